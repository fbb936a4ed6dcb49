// kubectl nodedisks prune [--dry-run=client|server|none] [--reserved-by OWNER]: the NodeDisks of machines
// that are gone, as the controller judges them (Ready NodeGone: no Node of that name; NodeReplaced: the
// Node of that name is another machine now). By default it only lists them (--dry-run=client); with
// --dry-run=none it deletes them: the unreserved ones, and reserved ones only of the owner --reserved-by
// names, so a reservation is never dropped without someone saying whose it is (ADR 35). The agent's
// finalizer on such a NodeDisk guarded a marker on the machine that is gone: it is removed first, or the
// delete would wait for an agent that will never come.
import type { CommandSpec } from '../args.ts';
import { AUTO_OWNER, CONDITION, FIELD_MANAGER, FINALIZER, REASON_NODE_GONE, REASON_NODE_REPLACED } from '../../api/constants.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { isApiError } from '../../lib/kube/errors.ts';
import type { Session } from '../context.ts';
import { usageError } from '../errors.ts';
import { escapeControl } from '../escape.ts';
import { qualifiedName } from '../kubectl/printers.ts';
import { selected, type SelectionFlags } from '../select.ts';
import { dryRunMode, SELECTION_FLAGS } from './flags.ts';

export interface PruneArgs extends SelectionFlags {
  'dry-run'?: string | true | undefined;
  'reserved-by'?: string | undefined;
  'field-manager'?: string | undefined;
}

/** Why the machine of `nd` is gone, from the controller's Ready condition, or undefined. */
export function goneBecause(nd: NodeDisk): string | undefined {
  const ready = nd.status?.conditions?.find((c) => c.type === CONDITION.ready);
  if (ready?.reason === REASON_NODE_GONE) return `node ${nd.spec.nodeName} is gone`;
  if (ready?.reason === REASON_NODE_REPLACED) return `node ${nd.spec.nodeName} is another machine now`;
  return undefined;
}

/** Whose reservation `nd` is ('' for none, 'auto' for the label policy's), or undefined when it is not reserved. */
function reservedBy(nd: NodeDisk): string | undefined {
  return nd.spec.desired?.state === 'Reserved' ? (nd.spec.desired.owner ?? '') : undefined;
}

async function execute(session: Session, args: PruneArgs): Promise<void> {
  const mode = dryRunMode(args['dry-run'], 'client', 'client (list only, the default), server or none (delete)', session.io);
  const owner = args['reserved-by'];
  if (owner === '') throw usageError(`--reserved-by needs the owner whose reservations may be removed (${AUTO_OWNER} for the label policy's)`);
  const client = session.client();
  const fieldManager = args['field-manager'] ?? FIELD_MANAGER.plugin;
  const suffix = mode === 'client' ? ' (dry run)' : mode === 'server' ? ' (server dry run)' : '';
  let found = 0;
  for await (const page of selected(session, args)) {
    for (const nd of page) {
      const why = goneBecause(nd);
      if (why === undefined) continue;
      found++;
      const name = escapeControl(qualifiedName(nd));
      const holder = reservedBy(nd);
      if (holder !== undefined && (owner === undefined || holder !== owner)) {
        const whose = holder === '' ? 'with no owner' : `by ${holder}`;
        const how = holder === '' ? 'release it first' : `add --reserved-by=${holder} to remove it`;
        session.io.err(escapeControl(`${qualifiedName(nd)} kept: ${why}, but it is reserved ${whose} (${how})`) + '\n');
        continue;
      }
      if (mode !== 'client') {
        const i = nd.metadata.finalizers?.indexOf(FINALIZER) ?? -1;
        const preconditions = nd.metadata.uid ? { uid: nd.metadata.uid } : {};
        if (i >= 0 && mode === 'none') {
          // Asked first whether the delete would be allowed (a role with patch but not delete, a policy):
          // otherwise the finalizer would be gone and the NodeDisk still there.
          await client.delete(nd.metadata.name ?? '', { preconditions, dryRun: true });
        }
        if (i >= 0) {
          // The finalizer's marker was on the machine that is gone; the test keeps us from removing another.
          await client.jsonPatch(
            nd.metadata.name ?? '',
            [
              { op: 'test', path: `/metadata/finalizers/${i}`, value: FINALIZER },
              { op: 'remove', path: `/metadata/finalizers/${i}` },
            ],
            { fieldManager, dryRun: mode === 'server' },
          );
        }
        try {
          await client.delete(nd.metadata.name ?? '', { preconditions, dryRun: mode === 'server' });
        } catch (err) {
          // Deleted already (someone's kubectl delete, held by the finalizer): removing it completed that.
          if (!(nd.metadata.deletionTimestamp && i >= 0 && isApiError(err, 404))) throw err;
        }
      }
      session.io.out(`${name} deleted${suffix}${holder !== undefined ? `: ${escapeControl(why)}; its reservation by ${escapeControl(holder)} is dropped` : ''}\n`);
    }
  }
  if (found === 0) session.io.err('No NodeDisks of gone nodes found\n');
  else if (mode === 'client') session.io.err('Nothing was deleted: run with --dry-run=none to delete these\n');
}

export const pruneCommand: CommandSpec<PruneArgs> = {
  name: 'prune',
  summary: 'List, or with --dry-run=none delete, the NodeDisks of nodes that are gone',
  description:
    'The NodeDisks of machines that are gone, as the controller judges them (Ready reason NodeGone: no Node of that name; NodeReplaced: the Node of that name is another machine now). By default they are only listed (--dry-run=client). With --dry-run=none the unreserved ones are deleted, and reserved ones only of the owner --reserved-by names (auto for the label policy): a reservation is never dropped without naming whose it is. The agent finalizer of such a disk is removed first (the marker it guarded was on the machine that is gone).',
  positionals: [],
  flags: {
    ...SELECTION_FLAGS,
    'dry-run': { type: 'string', optionalValue: true, default: 'client', describe: 'client (list only, the default), server (the API server validates, nothing is deleted) or none (delete)' },
    'reserved-by': { type: 'string', describe: 'Also delete the reserved ones of this owner (auto for the label policy); others are kept and listed on stderr' },
    'field-manager': { type: 'string', default: FIELD_MANAGER.plugin, describe: 'Name of the manager used to track field ownership' },
  },
  examples: [
    ['kubectl nodedisks prune', 'List what belongs to nodes that are gone; delete nothing'],
    ['kubectl nodedisks prune --dry-run=none', 'Delete the unreserved ones'],
    ['kubectl nodedisks prune --dry-run=none --reserved-by team-db --node node-a', "Also drop node-a's reservations of team-db"],
  ],
  run: (session, args) => execute(session, args),
};
