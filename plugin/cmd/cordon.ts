// kubectl nodedisks cordon|uncordon NAME…|-l SELECTOR|--node N: takes disks out of service, or puts them
// back, as kubectl cordon does for a node's pods: nothing hands a cordoned disk out any more (reserve
// --node, claims, the label policy: api/free-disk.ts and controller/policy.ts), and a reservation it has
// is left as it is. The mark is the label localtest.example.com/cordoned=true (ADR 35), so git can set it
// as any label; one JSON merge patch of that label per disk, under --field-manager. Quiet as kubectl
// cordon: one line per disk, "<kind>/<name> cordoned" or "already cordoned".
import type { CommandSpec } from '../args.ts';
import { ANNOTATION_HEALTH_REVIEWED, CORDONED_VALUE, FIELD_MANAGER, LABEL_CORDONED } from '../../api/constants.ts';
import { failing } from '../../api/free-disk.ts';
import type { Session } from '../context.ts';
import { usageError } from '../errors.ts';
import { escapeControl } from '../escape.ts';
import { qualifiedName } from '../kubectl/printers.ts';
import { hasSelection, resolveTargets, type SelectionFlags } from '../select.ts';
import { DRY_RUN_FLAG, dryRunMode, SELECTION_FLAGS } from './flags.ts';

export interface CordonArgs extends SelectionFlags {
  names: string[];
  'dry-run'?: string | true | undefined;
  'field-manager'?: string | undefined;
}

async function execute(session: Session, args: CordonArgs, cordon: boolean): Promise<void> {
  const verb = cordon ? 'cordon' : 'uncordon';
  if (!args.names.length && !hasSelection(args)) throw usageError(`${verb} needs disk names, or -l/--node; see kubectl nodedisks ${verb} --help`);
  // kubectl's --dry-run: none, client (nothing sent) or server (validated, not stored).
  const mode = dryRunMode(args['dry-run'], 'none', 'none, client or server', session.io);
  const client = session.client();
  const fieldManager = args['field-manager'] ?? FIELD_MANAGER.plugin;
  // kubectl cordon's words: "(dry run)" for a client dry run, "(server dry run)" for a server one.
  const suffix = mode === 'client' ? ' (dry run)' : mode === 'server' ? ' (server dry run)' : '';
  const targets = await resolveTargets(session, args.names, args);
  if (targets.length === 0) {
    session.io.err('No resources found\n');
    return;
  }
  for (const nd of targets) {
    const is = nd.metadata.labels?.[LABEL_CORDONED] === CORDONED_VALUE;
    const name = escapeControl(qualifiedName(nd));
    // Uncordoning a disk its agent saw failing marks the failure checked: failures seen before now no
    // longer keep it out of service (agent/disk-health.ts).
    const review = !cordon && failing(nd);
    if (is === cordon && !review) {
      session.io.out(`${name} already ${verb}ed${suffix}\n`);
      continue;
    }
    if (mode !== 'client') {
      const metadata = {
        ...(is !== cordon ? { labels: { [LABEL_CORDONED]: cordon ? CORDONED_VALUE : null } } : {}),
        // The failure's own start, not this machine's clock: a clock behind the node's would mark nothing.
        ...(review ? { annotations: { [ANNOTATION_HEALTH_REVIEWED]: nd.status?.node?.health?.since ?? new Date().toISOString().replace(/\.\d+Z$/, 'Z') } } : {}),
      };
      await client.mergePatch(nd.metadata.name ?? '', { metadata }, { fieldManager, dryRun: mode === 'server' });
    }
    session.io.out(`${name} ${verb}ed${review ? ' (its failure marked checked)' : ''}${suffix}\n`);
  }
}

const FLAGS = {
  ...SELECTION_FLAGS,
  'dry-run': DRY_RUN_FLAG,
  'field-manager': { type: 'string' as const, default: FIELD_MANAGER.plugin, describe: 'Name of the manager used to track field ownership' },
};

export const cordonCommand: CommandSpec<CordonArgs> = {
  name: 'cordon',
  summary: 'Take disks out of service: nothing hands them out, their reservations stay',
  description: `Mark NodeDisks as not to be handed out (label ${LABEL_CORDONED}=true): reserve --node/-l, claims and the auto-reserve label skip them, as kubectl cordon keeps new pods off a node. An existing reservation is not touched. With -l/--node every match is cordoned.`,
  positionals: [{ name: 'names', describe: 'NodeDisk names', variadic: true }],
  flags: FLAGS,
  examples: [
    ['kubectl nodedisks cordon node-disk-node-a-disk1', 'Take one disk out of service'],
    ['kubectl nodedisks cordon --node node-a', 'Every disk of node-a (before draining the machine, say)'],
  ],
  run: (session, args) => execute(session, args, true),
};

export const uncordonCommand: CommandSpec<CordonArgs> = {
  name: 'uncordon',
  summary: 'Put cordoned disks back in service',
  description: `Remove the label ${LABEL_CORDONED} from NodeDisks: they are handed out again when free. A disk its node agent saw failing (condition Healthy=False) is marked checked (annotation ${ANNOTATION_HEALTH_REVIEWED}, the time its failure began): that failure no longer keeps it out of service, a later one does. With -l/--node every match is uncordoned.`,
  positionals: [{ name: 'names', describe: 'NodeDisk names', variadic: true }],
  flags: FLAGS,
  examples: [
    ['kubectl nodedisks uncordon node-disk-node-a-disk1', 'Put one disk back in service'],
    ['kubectl nodedisks uncordon --node node-a', 'Every disk of node-a'],
  ],
  run: (session, args) => execute(session, args, false),
};
