// kubectl nodedisks reserve|release NAME…|-l SELECTOR|--node N [--all] [--owner X]
// reserve: by default sets the auto-reserve label (the controller's policy path); --owner X sets
// spec.desired to Reserved/X (a manual reservation). release undoes either. All writes are server-side
// apply under --field-manager (kubectl-nodedisks).
import type { CommandSpec, FlagSpec } from '../args.ts';
import { API_VERSION, AUTO_OWNER, AUTO_RESERVE_VALUE, FIELD_MANAGER, KIND, LABEL_AUTO_RESERVE, MAX_OWNER_LENGTH, OWNER_PATTERN } from '../../api/constants.ts';
import type { JsonPatchOp, NodeDiskApply } from '../../api/client.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { ApiError } from '../../lib/kube/errors.ts';
import type { Session } from '../context.ts';
import { EXIT, PluginError, usageError } from '../errors.ts';
import { jittered, sleep } from '../../lib/runtime/backoff.ts';
import { pickFree } from '../reserve/free.ts';
import { applyResolving, ChangedMeanwhile, fieldOwners, gitOwners, gitRouteError, guarded, type ApplyFlags } from '../reserve/ownership.ts';
import { printNodeDisks, qualifiedName, type OutputFormat } from '../kubectl/printers.ts';
import { hasSelection, resolveTargets, type SelectionFlags } from '../select.ts';
import { SELECTION_FLAGS } from './list.ts';

export interface MutateArgs extends SelectionFlags {
  names: string[];
  all?: boolean | undefined;
  owner?: string | undefined;
  force?: boolean | undefined;
  'dry-run'?: string | undefined;
  output?: string | undefined;
  'field-manager'?: string | undefined;
  'force-conflicts'?: boolean | undefined;
}

const OWNER_RE = new RegExp(OWNER_PATTERN);

function dryRunMode(v: string | undefined): 'none' | 'client' | 'server' {
  if (v === undefined || v === 'none') return 'none';
  if (v === 'client' || v === 'server') return v;
  if (v === '' || v === 'true') return 'client';
  throw usageError(`--dry-run must be none, client or server, got ${JSON.stringify(v)}`);
}

const MUTATE_FLAGS: Record<string, FlagSpec> = {
  ...SELECTION_FLAGS,
  all: { type: 'boolean', default: false, describe: 'With -l/--node: act on every match, not just one' },
  owner: { type: 'string', describe: 'A manual reservation for this owner instead of the auto-reserve label' },
  force: { type: 'boolean', default: false, describe: "Take over or release someone else's reservation" },
  'dry-run': { type: 'string', default: 'none', describe: 'none, client (print only) or server (the API server validates, nothing is stored)' },
  output: {
    type: 'string',
    short: 'o',
    describe: "yaml or json: print exactly what is sent (the apply body with its resourceVersion precondition, or the JSON Patch); with --dry-run=server, the server's answer",
  },
  'field-manager': { type: 'string', default: FIELD_MANAGER.plugin, describe: 'Name of the manager used to track field ownership' },
  'force-conflicts': { type: 'boolean', default: false, describe: 'Take fields over from other field managers, GitOps controllers included' },
};

/** A server-side apply, or (only to remove fields) a JSON Patch guarded by the resourceVersion. */
// (A stale conflict on an apply is resolved by applyResolving; --force here is about whose reservation it is.)
type Step = { body: NodeDiskApply } | { name: string; patch: JsonPatchOp[] };

interface Plan {
  nd: NodeDisk;
  steps: Step[];
  /** What the confirmation line says. */
  verb: string;
  skip?: string;
}

const base = (nd: NodeDisk) => ({ apiVersion: API_VERSION, kind: KIND, metadata: { name: nd.metadata.name ?? '' } }) as const;

/** Refuses an --owner the CRD would refuse, or the label policy's own (reserve and gitops both ask). */
export function validateOwner(owner: string | undefined): void {
  if (owner !== undefined && (owner === AUTO_OWNER || !OWNER_RE.test(owner) || owner.length > MAX_OWNER_LENGTH)) {
    throw usageError(
      owner === AUTO_OWNER
        ? '--owner auto is reserved for the label policy; omit --owner to reserve through the label'
        : `--owner ${JSON.stringify(owner)} is not a valid owner: letters, digits and - _ . : @ /, starting and ending with a letter or digit, at most ${MAX_OWNER_LENGTH} characters`,
    );
  }
}

function planReserve(nd: NodeDisk, args: MutateArgs): Plan {
  const d = nd.spec.desired;
  const heldBy = d?.state === 'Reserved' ? (d.owner ?? '') : undefined;
  if (args.owner !== undefined) {
    if (heldBy === args.owner) return { nd, steps: [], verb: '', skip: `already reserved by ${args.owner}` };
    if (heldBy !== undefined && !args.force) {
      throw new PluginError(`${nd.metadata.name} is already reserved by ${heldBy || 'a manual reservation with no owner'}; release it first, or pass --force to take it over`, EXIT.conflict);
    }
    const owners = fieldOwners(nd, ['spec', 'desired', 'state']);
    if (gitOwners(owners).length && !args['force-conflicts']) throw gitRouteError(nd, 'spec.desired', gitOwners(owners));
    // Taking over an auto reservation whose label git keeps would leave git and the cluster disagreeing.
    const labelGit = gitOwners(fieldOwners(nd, ['metadata', 'labels', LABEL_AUTO_RESERVE]));
    if (heldBy === AUTO_OWNER && labelGit.length && !args['force-conflicts']) throw gitRouteError(nd, `the reservation (label ${LABEL_AUTO_RESERVE})`, labelGit);
    return { nd, steps: [{ body: { ...base(nd), spec: { desired: { state: 'Reserved', owner: args.owner } } } }], verb: `reserved for ${args.owner}` };
  }
  if (heldBy !== undefined && heldBy !== AUTO_OWNER && !args.force) {
    throw new PluginError(
      `${nd.metadata.name} is reserved by ${heldBy || 'a manual reservation with no owner'}; the auto-reserve label would have no effect. Release it first (it needs --force if it is not yours)`,
      EXIT.conflict,
    );
  }
  if (nd.metadata.labels?.[LABEL_AUTO_RESERVE] === AUTO_RESERVE_VALUE) return { nd, steps: [], verb: '', skip: 'already labelled for auto reservation' };
  const owners = fieldOwners(nd, ['metadata', 'labels', LABEL_AUTO_RESERVE]);
  if (gitOwners(owners).length && !args['force-conflicts']) throw gitRouteError(nd, `label ${LABEL_AUTO_RESERVE}`, gitOwners(owners));
  return { nd, steps: [{ body: { ...base(nd), metadata: { ...base(nd).metadata, labels: { [LABEL_AUTO_RESERVE]: AUTO_RESERVE_VALUE } } } }], verb: 'reserved (auto-reserve label set)' };
}

// Server-side apply cannot remove a field that another manager also owns (for example a label set with
// `kubectl label`), so a release is one JSON Patch: it tests the resourceVersion it was planned against
// (someone else's change in between makes it fail with a conflict, never overwrite) and removes exactly
// the reservation. docs/adr/0009-plugin.md.
function planRelease(nd: NodeDisk, args: MutateArgs): Plan {
  const d = nd.spec.desired;
  const label = nd.metadata.labels?.[LABEL_AUTO_RESERVE];
  const ops: JsonPatchOp[] = [{ op: 'test', path: '/metadata/resourceVersion', value: nd.metadata.resourceVersion }];
  let verb = 'released (auto-reserve label removed)';
  if (label !== undefined) {
    const owners = fieldOwners(nd, ['metadata', 'labels', LABEL_AUTO_RESERVE]);
    if (gitOwners(owners).length && !args['force-conflicts']) throw gitRouteError(nd, `label ${LABEL_AUTO_RESERVE}`, gitOwners(owners));
    ops.push({ op: 'remove', path: `/metadata/labels/${LABEL_AUTO_RESERVE.replace(/~/g, '~0').replace(/\//g, '~1')}` });
  }
  if (d?.state === 'Reserved' && d.owner !== AUTO_OWNER) {
    const holder = d.owner ?? '';
    if (holder !== (args.owner ?? '') && !args.force) {
      throw new PluginError(
        `${nd.metadata.name} is reserved by ${holder || 'a manual reservation with no owner'}${args.owner ? `, not ${args.owner}` : ''}; pass --force to release someone else's reservation`,
        EXIT.conflict,
      );
    }
    const owners = fieldOwners(nd, ['spec', 'desired', 'state']);
    if (gitOwners(owners).length && !args['force-conflicts']) throw gitRouteError(nd, 'spec.desired', gitOwners(owners));
    ops.push({ op: 'replace', path: '/spec/desired', value: { state: 'Available' } });
    verb = holder && holder !== args.owner ? `released (it was reserved by ${holder})` : 'released';
  }
  if (ops.length === 1) return { nd, steps: [], verb: '', skip: 'not reserved' };
  return { nd, steps: [{ name: nd.metadata.name ?? '', patch: ops }], verb };
}

type Patch = NodeDiskApply | { name: string; jsonPatch: JsonPatchOp[] };

interface Run {
  mode: 'none' | 'client' | 'server';
  print: string | undefined;
  flags: ApplyFlags;
  /** With --dry-run=server: the objects as the API server answered (what -o prints then, as kubectl does). */
  answers: NodeDisk[];
}

/** Carries out one plan: its writes (unless a client dry run) and its confirmation line. */
async function carryOut(session: Session, plan: Plan, r: Run, patches: Patch[]): Promise<void> {
  const client = session.client();
  if (plan.skip) {
    if (!r.print) session.io.out(`${qualifiedName(plan.nd)} unchanged (${plan.skip})\n`);
    // Nothing to send; kubectl apply prints the object as it stands in that case too.
    r.answers.push(plan.nd);
    return;
  }
  for (const step of plan.steps) {
    if ('patch' in step) {
      patches.push({ name: step.name, jsonPatch: step.patch });
      if (r.mode !== 'client') {
        try {
          r.answers.push(await client.jsonPatch(step.name, step.patch, { fieldManager: r.flags.fieldManager, dryRun: r.flags.dryRun }));
        } catch (err) {
          if (err instanceof ApiError && (err.statusCode === 422 || err.statusCode === 409) && /test/i.test(err.message)) {
            throw new PluginError(`${step.name} changed while it was being released; run the command again`, EXIT.conflict);
          }
          throw err;
        }
      }
      continue;
    }
    // What is sent, precondition included: the resourceVersion the plan was made from.
    const body = guarded(step.body, plan.nd.metadata.resourceVersion);
    patches.push(body);
    if (r.mode !== 'client') r.answers.push(await applyResolving(client, body, r.flags));
  }
  if (!r.print) session.io.out(`${qualifiedName(plan.nd)} ${plan.verb}${r.mode !== 'none' ? ` (dry run: ${r.mode})` : ''}\n`);
}

/** How often `reserve --node` re-reads the node and tries its next free disk after losing one to someone faster. */
const PICK_ATTEMPTS = 10;

/**
 * "Give me a disk": the first free, usable disk (by name) of the selection. People asking at the same
 * time race for the same disk; the write is guarded by the resourceVersion it was picked at, so the loser
 * never overwrites the winner: it re-reads the selection and tries the next free disk.
 */
async function reserveOneFree(session: Session, args: MutateArgs, r: Run, patches: Patch[]): Promise<void> {
  const byNode = args.node !== undefined && args.selector === undefined && args.phase === undefined && args.desired === undefined;
  for (let attempt = 1; ; attempt++) {
    const targets = await resolveTargets(session, [], args);
    if (targets.length === 0) throw new PluginError('no NodeDisk matches the selection', EXIT.notFound);
    const { disk, skipped } = pickFree(targets, (nd) => (byNode ? nd.spec.diskID : (nd.metadata.name ?? '')));
    if (!disk) {
      const where = byNode ? `node ${args.node} has no free disk` : `none of the ${targets.length} selected disks is free`;
      throw new PluginError(`${where}: ${skipped.join(', ')}`, EXIT.conflict);
    }
    session.io.progress(`reserve ${disk.metadata.name}`);
    const written = patches.length;
    try {
      await carryOut(session, planReserve(disk, args), r, patches);
      return;
    } catch (err) {
      if (!(err instanceof ChangedMeanwhile) || attempt >= PICK_ATTEMPTS) throw err;
      // Someone else was faster. A short random pause, so the losers do not collide again in step.
      patches.length = written;
      r.answers.length = 0;
      await sleep(jittered(20 * attempt, 2));
    }
  }
}

async function execute(session: Session, args: MutateArgs, action: 'reserve' | 'release'): Promise<void> {
  const mode = dryRunMode(args['dry-run']);
  const print = args.output;
  if (print !== undefined && print !== 'yaml' && print !== 'json') throw usageError('-o for reserve/release is yaml or json (the patches)');
  if (action === 'reserve') validateOwner(args.owner);
  if (!args.names.length && !hasSelection(args)) throw usageError(`${action} needs disk names, or -l/--node with --all; see kubectl nodedisks ${action} --help`);
  if (action === 'release' && hasSelection(args) && !args.all) throw usageError('release with -l/--node/--phase/--desired releases every match: add --all to confirm');

  const r: Run = { mode, print, flags: { fieldManager: args['field-manager'] ?? FIELD_MANAGER.plugin, forceConflicts: !!args['force-conflicts'], dryRun: mode === 'server' }, answers: [] };
  const patches: Patch[] = [];
  if (action === 'reserve' && hasSelection(args) && !args.all) {
    await reserveOneFree(session, args, r, patches);
  } else {
    const targets = await resolveTargets(session, args.names, args);
    if (targets.length === 0) throw new PluginError('no NodeDisk matches the selection', EXIT.notFound);
    const plans = targets.map((nd) => (action === 'reserve' ? planReserve(nd, args) : planRelease(nd, args)));
    let done = 0;
    for (const plan of plans) {
      session.io.progress(`${action} ${++done}/${plans.length} ${plan.nd.metadata.name}`);
      await carryOut(session, plan, r, patches);
    }
  }
  session.io.progress('');
  if (print && mode === 'server') {
    // As kubectl apply --server-side --dry-run=server -o yaml|json: the server's answer, the object as it would be.
    const format: OutputFormat = { kind: print === 'json' ? 'json' : 'yaml' };
    await printNodeDisks(r.answers, { format, single: r.answers.length === 1, noHeaders: false, showLabels: false, labelColumns: [] }, session.io.out);
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
    "Release NodeDisks: remove the auto-reserve label, or set a manual reservation back to Available. Releasing someone else's reservation needs --force, and says whose it was. With -l/--node, --all is required.",
  positionals: [{ name: 'names', describe: 'NodeDisk names', variadic: true }],
  flags: MUTATE_FLAGS,
  examples: [
    ['kubectl nodedisks release node-disk-node-a-disk1', 'Remove the auto-reserve label'],
    ['kubectl nodedisks release node-disk-node-a-disk2 --owner team-db', 'Release your own manual reservation'],
    ['kubectl nodedisks release node-disk-node-a-disk3 --force', "Release someone else's reservation"],
  ],
  run: (session, args) => execute(session, args, 'release'),
};
