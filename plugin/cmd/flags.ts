// plugin/cmd/: the commands, one file each: read the arguments, call the logic (../kubectl, ../reserve,
// ../gitops, ../select.ts), print. Here: the flags several commands share, defined once.
import { FIELD_MANAGER } from '../../api/constants.ts';
import type { FlagSpec } from '../args.ts';
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

/** The arguments of reserve and release. */
export interface MutateArgs extends SelectionFlags {
  names: string[];
  all?: boolean | undefined;
  owner?: string | undefined;
  force?: boolean | undefined;
  'dry-run'?: string | undefined;
  output?: string | undefined;
  'field-manager'?: string | undefined;
  'force-conflicts'?: boolean | undefined;
  /** release only: wipe the disk before it is free again. */
  wipe?: boolean | undefined;
}

/** The flags of reserve and release. */
export const MUTATE_FLAGS: Record<string, FlagSpec> = {
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
