// Which disk may be handed out as free (by `reserve --node X` / `reserve -l …` without --all, and by
// everything else that hands out disks): one that is really free and usable, and when none is, why not.
import { AUTO_OWNER, AUTO_RESERVE_VALUE, CONDITION, CORDONED_VALUE, LABEL_AUTO_RESERVE, LABEL_CORDONED, REASON_AGENT_STALE, REASON_NODE_GONE, REASON_NODE_REPLACED } from './constants.ts';
import type { NodeDisk } from './v1alpha1/types.ts';
import { pendingWipe } from './wipe.ts';

/** Why a disk is not free, as a kind to count by (a claim's Pending line). */
export type NotFreeKind = 'deleting' | 'reserved' | 'wiping' | 'labelled' | 'cordoned' | 'node-gone' | 'node-replaced' | 'stale' | 'unreported' | 'phase' | 'unsized';

/** Why `nd` cannot be handed out as a free disk, as a kind and in words; undefined when it can. */
export function notFree(nd: NodeDisk): { kind: NotFreeKind; why: string } | undefined {
  if (nd.metadata.deletionTimestamp) return { kind: 'deleting', why: 'is being deleted' };
  const d = nd.spec.desired;
  if (d?.state === 'Reserved') {
    if (d.owner === AUTO_OWNER) return { kind: 'reserved', why: 'is reserved by the label policy (owner auto)' };
    return { kind: 'reserved', why: d.owner ? `is reserved by ${d.owner}` : 'is reserved with no owner' };
  }
  // Released with a wipe request: nobody gets the previous owner's bytes (ADR 38).
  if (pendingWipe(nd) !== undefined) return { kind: 'wiping', why: 'is being wiped (released with a wipe request; free once its node agent reports it wiped)' };
  // The controller has not acted on the label yet: the disk is as good as taken.
  if (nd.metadata.labels?.[LABEL_AUTO_RESERVE] === AUTO_RESERVE_VALUE) return { kind: 'labelled', why: `is labelled ${LABEL_AUTO_RESERVE}=true (being reserved by the label policy)` };
  // A person took it out of service (kubectl nodedisks cordon).
  if (nd.metadata.labels?.[LABEL_CORDONED] === CORDONED_VALUE) return { kind: 'cordoned', why: `is cordoned (label ${LABEL_CORDONED}=true; kubectl nodedisks uncordon puts it back)` };
  // The controller found no Node of that name: the disk went with its machine (ADR 35).
  if (nd.status?.conditions?.some((c) => c.type === CONDITION.ready && c.reason === REASON_NODE_GONE))
    return { kind: 'node-gone', why: `is on node ${nd.spec.nodeName}, which is gone (no Node object)` };
  if (nd.status?.conditions?.some((c) => c.type === CONDITION.ready && c.reason === REASON_NODE_REPLACED))
    return { kind: 'node-replaced', why: `was found on another machine than node ${nd.spec.nodeName} is now (another Node UID)` };
  // The controller judged its agent stale: what the agent last reported (free, wiped, no data) may be out of date.
  if (nd.status?.conditions?.some((c) => c.type === CONDITION.ready && c.reason === REASON_AGENT_STALE))
    return { kind: 'stale', why: `is on node ${nd.spec.nodeName}, whose node agent is stale (its report may be out of date)` };
  const node = nd.status?.node;
  if (!node?.phase) return { kind: 'unreported', why: 'has not been reported by its node agent yet' };
  if (node.phase !== 'Available') return { kind: 'phase', why: `is in phase ${node.phase}${node.message ? ` (${node.message})` : ''}` };
  if (node.capacityBytes === undefined) return { kind: 'unsized', why: 'has no reported size' };
  if (node.capacityBytes <= 0) return { kind: 'unsized', why: 'is an empty (0-byte) image' };
  return undefined;
}

/** Why `nd` cannot be handed out as a free disk, or undefined when it can. */
export function notFreeBecause(nd: NodeDisk): string | undefined {
  return notFree(nd)?.why;
}

export interface FreePick {
  /** The first free disk by name, if any. */
  disk: NodeDisk | undefined;
  /** "disk1 is reserved by team-db", one per disk that is not free, in name order. */
  skipped: string[];
}

/** Picks the first free disk by name (so a node's disks are handed out in a predictable order). */
export function pickFree(candidates: NodeDisk[], label: (nd: NodeDisk) => string): FreePick {
  const sorted = [...candidates].sort((a, b) => (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''));
  const skipped: string[] = [];
  for (const nd of sorted) {
    const why = notFreeBecause(nd);
    if (why === undefined) return { disk: nd, skipped };
    skipped.push(`${label(nd)} ${why}`);
  }
  return { disk: undefined, skipped };
}
