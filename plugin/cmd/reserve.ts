// kubectl nodedisks reserve|release NAME…|-l SELECTOR|--node N [--all] [--owner X]
// reserve: by default sets the auto-reserve label (the controller's policy path); --owner X sets
// spec.desired to Reserved/X (a manual reservation). release undoes either. All writes are server-side
// apply under --field-manager (kubectl-nodedisks). The arguments are read here; what is written, and how,
// is ../reserve/.
import type { CommandSpec } from '../args.ts';
import { FIELD_MANAGER } from '../../api/constants.ts';
import type { Session } from '../context.ts';
import { usageError } from '../errors.ts';
import { printNodeDisks, type OutputFormat } from '../kubectl/printers.ts';
import { carryOutEach, reserveOneFree, type Outcome, type Run } from '../reserve/execute.ts';
import { planEach, validateOwner, type Action, type Request } from '../reserve/plan.ts';
import { hasSelection, resolveTargets } from '../select.ts';
import { dryRunMode, MUTATE_FLAGS, type MutateArgs } from './flags.ts';
import { newWipeToken } from '../../api/wipe.ts';

async function execute(session: Session, args: MutateArgs, action: Action): Promise<void> {
  const mode = dryRunMode(args['dry-run'], 'none', 'none, client or server', session.io);
  const print = args.output;
  if (print !== undefined && print !== 'yaml' && print !== 'json') throw usageError('-o for reserve/release is yaml or json (the patches)');
  if (action === 'reserve') validateOwner(args.owner);
  if (!args.names.length && !hasSelection(args)) throw usageError(`${action} needs disk names, or -l/--node with --all; see kubectl nodedisks ${action} --help`);
  if (action === 'release' && hasSelection(args) && !args.all) throw usageError('release with -l/--node/--phase/--desired releases every match: add --all to confirm');

  if (args.wipe && args['keep-data']) throw usageError('--wipe and --keep-data contradict each other: choose one');
  const token = action === 'release' ? newWipeToken() : undefined;
  const req: Request = {
    owner: args.owner,
    force: !!args.force,
    forceConflicts: !!args['force-conflicts'],
    ...(args.wipe ? { wipe: token } : {}),
    ...(args['keep-data'] ? {} : { claimWipe: token }),
  };
  const r: Run = { mode, quiet: print !== undefined, flags: { fieldManager: args['field-manager'] ?? FIELD_MANAGER.plugin, forceConflicts: req.forceConflicts, dryRun: mode === 'server' } };
  let done: Outcome;
  if (action === 'reserve' && hasSelection(args) && !args.all) {
    done = await reserveOneFree(session, args, req, r);
  } else {
    done = await carryOutEach(session, planEach(await resolveTargets(session, args.names, args), action, req), action, r);
  }
  session.io.progress('');
  const { patches, answers } = done;
  if (print && mode === 'server') {
    // As kubectl apply --server-side --dry-run=server -o yaml|json: the server's answer, the object as it would be.
    const format: OutputFormat = { kind: print === 'json' ? 'json' : 'yaml' };
    await printNodeDisks(answers, { format, single: answers.length === 1, noHeaders: false, showLabels: false, labelColumns: [] }, session.io.out);
    return;
  }
  if (print === 'json') session.io.out(JSON.stringify(patches.length === 1 ? patches[0] : { apiVersion: 'v1', kind: 'List', items: patches }, null, 2) + '\n');
  if (print === 'yaml') {
    const { dump } = await import('js-yaml');
    session.io.out(patches.map((p) => dump(p, { noRefs: true, lineWidth: -1 })).join('---\n'));
  }
}

export const reserveCommand: CommandSpec<MutateArgs> = {
  name: 'reserve',
  summary: 'Reserve disks: through the auto-reserve label, or for an owner with --owner',
  description:
    'Reserve NodeDisks. By default the disk gets the label localtest.example.com/auto-reserve=true and the controller reserves it for owner "auto" (the policy path); with --owner the reservation is written to spec.desired directly (a manual reservation). With -l/--node the first free, usable disk of the selection is reserved (people asking at the same time each get a different one), or every match with --all. Changes are server-side applied.',
  positionals: [{ name: 'names', describe: 'NodeDisk names', variadic: true }],
  flags: MUTATE_FLAGS,
  examples: [
    ['kubectl nodedisks reserve node-disk-node-a-disk1', 'Label the disk; the controller reserves it for owner auto'],
    ['kubectl nodedisks reserve --node node-a --owner team-db', 'Reserve one free disk of node-a for team-db'],
    ['kubectl nodedisks reserve -l localtest.example.com/node=node-a --all --dry-run=server -o yaml', 'Validate and show the patches, change nothing'],
  ],
  run: (session, args) => execute(session, args, 'reserve'),
};

export const releaseCommand: CommandSpec<MutateArgs> = {
  name: 'release',
  summary: "Release reservations (the label, or a manual one; --force for someone else's)",
  description:
    "Release NodeDisks: remove the auto-reserve label, or set a manual reservation back to Available. Releasing someone else's reservation needs --force, and says whose it was. A NodeDiskClaim's reservation is released by deleting the claim; once the claim is gone (the controller says ClaimGone: deleted with reclaimPolicy Retain, or its namespace) the disk is Released and this releases it, without --force, wiped first unless --keep-data. With -l/--node, --all is required. Other disks keep their bytes (the next owner gets them as they are) unless --wipe: then the node agent wipes the image first, and nobody gets the disk until it has (a free disk that still holds an earlier owner's data can be wiped the same way).",
  positionals: [{ name: 'names', describe: 'NodeDisk names', variadic: true }],
  flags: {
    ...MUTATE_FLAGS,
    wipe: { type: 'boolean', default: false, describe: 'Wipe the disk before anyone gets it again (its node agent does it; the disk is free once it has)' },
    'keep-data': { type: 'boolean', default: false, describe: "For a Released claim's disk (ClaimGone): release it without wiping, its data going to the next owner" },
  },
  examples: [
    ['kubectl nodedisks release node-disk-node-a-disk1', 'Remove the auto-reserve label'],
    ['kubectl nodedisks release node-disk-node-a-disk2 --owner team-db', 'Release your own manual reservation'],
    ['kubectl nodedisks release node-disk-node-a-disk3 --force', "Release someone else's reservation"],
    ['kubectl nodedisks release node-disk-node-a-disk2 --owner team-db --wipe', 'Release it, wiped before anyone gets it again'],
    ['kubectl nodedisks release node-disk-node-a-disk4 --keep-data', "Release a Released claim's disk (its claim is gone) with its data"],
  ],
  run: (session, args) => execute(session, args, 'release'),
};
