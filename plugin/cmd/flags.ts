// plugin/cmd/: the commands, one file each: read the arguments, call the logic (../kubectl, ../reserve,
// ../gitops, ../select.ts), print. Here: the flags several commands share, defined once.
import { FIELD_MANAGER } from '../../api/constants.ts';
import type { FlagSpec } from '../args.ts';
import type { Io } from '../context.ts';
import { usageError } from '../errors.ts';
import type { SelectionFlags } from '../select.ts';

/** Which disks: list, status, wait, reserve and release read them alike (../select.ts). */
export const SELECTION_FLAGS: Record<string, FlagSpec> = {
  selector: { type: 'string', short: 'l', describe: "Selector (label query) to filter on, e.g. localtest.example.com/node=node-a or 'tier in (fast,slow)'" },
  'field-selector': {
    type: 'string',
    describe: 'Selector (field query) on spec.nodeName, spec.diskID, spec.desired.state, status.node.phase or metadata.name, e.g. spec.nodeName=node-a,status.node.phase!=Error',
  },
  node: { type: 'string', describe: 'Only disks of this node (field selector spec.nodeName)' },
  phase: { type: 'string', describe: 'Only disks in this reported phase: Available, Reserved, Missing, Error or Discovered' },
  desired: { type: 'string', describe: 'Only disks with this desired state: Available or Reserved' },
  'chunk-size': { type: 'string', integer: true, default: '500', describe: 'Return large lists in chunks of this many objects' },
};

export type DryRun = 'none' | 'client' | 'server';

/** --dry-run as the mutating commands take it (prune has its own default); bare it means client, as in kubectl. */
export const DRY_RUN_FLAG: FlagSpec = {
  type: 'string',
  optionalValue: true,
  default: 'none',
  describe: 'none, client (print only) or server (the API server validates, nothing is stored)',
};

/** strconv.ParseBool's spellings, which kubectl still takes for --dry-run. */
const BOOLEAN: Record<string, boolean> = Object.fromEntries([
  ...['1', 't', 'T', 'TRUE', 'true', 'True'].map((s) => [s, true]),
  ...['0', 'f', 'F', 'FALSE', 'false', 'False'].map((s) => [s, false]),
]);

/**
 * Reads --dry-run as kubectl does: none, client or server; bare (true) it is client, and a boolean value
 * client or none, each with kubectl's deprecation warning in kubectl's words. `valid` says what the
 * command accepts, for the usage error of any other value.
 */
export function dryRunMode(v: string | true | undefined, fallback: DryRun, valid: string, io: Pick<Io, 'err'>): DryRun {
  if (v === undefined) return fallback;
  if (v === true) {
    io.err('Warning: --dry-run is deprecated and can be replaced with --dry-run=client.\n');
    return 'client';
  }
  if (v === 'none' || v === 'client' || v === 'server') return v;
  const b = BOOLEAN[v];
  if (b === undefined) throw usageError(`--dry-run must be ${valid}, got ${JSON.stringify(v)}`);
  const mode = b ? 'client' : 'none';
  io.err(`Warning: --dry-run=${v} is deprecated (boolean value) and can be replaced with --dry-run=${mode}.\n`);
  return mode;
}

/** The arguments of reserve and release. */
export interface MutateArgs extends SelectionFlags {
  names: string[];
  all?: boolean | undefined;
  owner?: string | undefined;
  force?: boolean | undefined;
  'dry-run'?: string | true | undefined;
  output?: string | undefined;
  'field-manager'?: string | undefined;
  'force-conflicts'?: boolean | undefined;
  /** release only: wipe the disk before it is free again. */
  wipe?: boolean | undefined;
  /** release only: a Released claim's disk keeps its data. */
  'keep-data'?: boolean | undefined;
}

/** The flags of reserve and release. */
export const MUTATE_FLAGS: Record<string, FlagSpec> = {
  ...SELECTION_FLAGS,
  all: { type: 'boolean', default: false, describe: 'With -l/--node: act on every match, not just one' },
  owner: { type: 'string', describe: 'A manual reservation for this owner instead of the auto-reserve label' },
  force: { type: 'boolean', default: false, describe: "Take over or release someone else's reservation" },
  'dry-run': DRY_RUN_FLAG,
  output: {
    type: 'string',
    short: 'o',
    describe: "yaml or json: print exactly what is sent (the apply body with its resourceVersion precondition, or the JSON Patch); with --dry-run=server, the server's answer",
  },
  'field-manager': { type: 'string', default: FIELD_MANAGER.plugin, describe: 'Name of the manager used to track field ownership' },
  'force-conflicts': { type: 'boolean', default: false, describe: 'Take fields over from other field managers, GitOps controllers included' },
};
