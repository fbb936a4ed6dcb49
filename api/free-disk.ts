// The one answer to "may this disk go to a new holder?", asked by every route that hands out a disk it
// was not named (`reserve --node`/`-l`, NodeDiskClaims, PersistentVolumes) and by the plugin's `status`
// when it says why (docs/adr/0043-one-notion-of-free.md). Each route adds only its own filters (size,
// node, selector, class) around it.
//
// A disk may go to a new holder when it is free (not reserved, not being reserved by its label, not being
// deleted), in service (not cordoned), not being wiped (no earlier owner's bytes once a wipe was asked
// for), reported Available with a size, on a node that exists and is the machine that reported it, and
// reported by an agent that is alive. Bytes kept on purpose (a release without --wipe, ADR 38) go to the
// next holder as they are, except to a PersistentVolume, which needs a blank disk to format: that is
// the CSI route's own filter, as its size is. The last is the only part that changes with time alone: what the disk's record says
// (`notFreeByRecord`, which the controller's index keeps per disk) comes first, then what the route knows
// of the agents now (`agentNotAlive`).
import {
  ANNOTATION_HEALTH_REVIEWED,
  AUTO_OWNER,
  AUTO_RESERVE_VALUE,
  CONDITION,
  CORDONED_VALUE,
  LABEL_AUTO_RESERVE,
  LABEL_CORDONED,
  REASON_AGENT_STALE,
  REASON_NODE_GONE,
  REASON_NODE_REPLACED,
} from './constants.ts';
import type { NodeDisk } from './v1alpha1/types.ts';
import { pendingWipe } from './wipe.ts';

/** Why a disk is not free, as a kind to count by (a claim's Pending line). */
export type NotFreeKind = 'deleting' | 'reserved' | 'wiping' | 'labelled' | 'cordoned' | 'failing' | 'node-gone' | 'node-replaced' | 'stale' | 'unreported' | 'phase' | 'unsized';

export interface NotFree {
  kind: NotFreeKind;
  /** In words, after the disk's name: "is reserved by team-db". */
  why: string;
}

/**
 * What a route knows of the node agents beyond their disks' records: the controller's heartbeat view
 * (controller/agent-liveness.ts), the plugin's read of the Leases. A route without one judges an agent by
 * the Ready condition the controller writes on its disks.
 */
export interface AgentView {
  now: number;
  /** For a node with no heartbeat Lease: a report older than this is stale (as the Ready condition judges). */
  staleAfterMs: number;
  /** A node's agent by its heartbeat Lease; `none` (or no function) judges it by its last report. */
  liveness?: (node: string) => { kind: 'alive' | 'stale' | 'none' };
}

/** Why `nd` may not go to a new holder, as a kind and in words; undefined when it may. */
export function notFree(nd: NodeDisk, agents?: AgentView): NotFree | undefined {
  return notFreeByRecord(nd) ?? agentNotAlive(nd, agents);
}

/** What the disk's own record says (the same until the object changes). */
export function notFreeByRecord(nd: NodeDisk): NotFree | undefined {
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
  // Its agent saw it fail, and nobody has checked it since (agent/disk-health.ts).
  if (failing(nd)) return { kind: 'failing', why: `is failing: ${nd.status?.node?.health?.message ?? ''}` };
  const ready = nd.status?.conditions?.find((c) => c.type === CONDITION.ready);
  // The controller found no Node of that name: the disk went with its machine (ADR 35).
  if (ready?.reason === REASON_NODE_GONE) return { kind: 'node-gone', why: `is on node ${nd.spec.nodeName}, which is gone (no Node object)` };
  if (ready?.reason === REASON_NODE_REPLACED) return { kind: 'node-replaced', why: `was found on another machine than node ${nd.spec.nodeName} is now (another Node UID)` };
  // The controller judged its agent stale: what the agent last reported (free, wiped, no data) may be out of date.
  if (ready?.reason === REASON_AGENT_STALE) return { kind: 'stale', why: `is on node ${nd.spec.nodeName}, whose node agent is stale (its report may be out of date)` };
  const node = nd.status?.node;
  if (!node?.phase) return { kind: 'unreported', why: 'has not been reported by its node agent yet' };
  if (node.phase !== 'Available') return { kind: 'phase', why: `is in phase ${node.phase}${node.message ? ` (${node.message})` : ''}` };
  if (node.capacityBytes === undefined) return { kind: 'unsized', why: 'has no reported size' };
  if (node.capacityBytes <= 0) return { kind: 'unsized', why: 'is an empty (0-byte) image' };
  return undefined;
}

/** Whether the disk's agent reports it failing and no person has marked it checked since the failure began. */
export function failing(nd: NodeDisk): boolean {
  const health = nd.status?.node?.health;
  if (health?.status !== 'False') return false;
  const reviewed = Date.parse(nd.metadata.annotations?.[ANNOTATION_HEALTH_REVIEWED] ?? '');
  const since = Date.parse(health.since ?? '');
  return Number.isNaN(reviewed) || Number.isNaN(since) || reviewed < since;
}

/** What the route's view of the agents says now: stale, when its heartbeat Lease expired (or, with none, its report is old). */
export function agentNotAlive(nd: NodeDisk, agents: AgentView | undefined): NotFree | undefined {
  if (!agents || !agentStale(nd, agents)) return undefined;
  return { kind: 'stale', why: `is on node ${nd.spec.nodeName}, whose node agent is stale (its heartbeat or last report is too old)` };
}

/** Whether the agent that reports `nd` is stale: its heartbeat Lease expired, or with none, its report is old. */
export function agentStale(nd: NodeDisk, agents: AgentView): boolean {
  const liveness = agents.liveness?.(nd.spec.nodeName);
  if (liveness?.kind === 'stale') return true;
  if (liveness?.kind === 'alive') return false;
  const seen = Date.parse(nd.status?.node?.lastSeenTime ?? '');
  return !Number.isNaN(seen) && agents.now - seen > agents.staleAfterMs;
}

/** Why `nd` may not go to a new holder, or undefined when it may. */
export function notFreeBecause(nd: NodeDisk, agents?: AgentView): string | undefined {
  return notFree(nd, agents)?.why;
}

export interface FreePick {
  /** The first free disk by name, if any. */
  disk: NodeDisk | undefined;
  /** "disk1 is reserved by team-db", one per disk that is not free, in name order. */
  skipped: string[];
}

/** Picks the first free disk by name (so a node's disks are handed out in a predictable order). */
export function pickFree(candidates: NodeDisk[], label: (nd: NodeDisk) => string, agents?: AgentView): FreePick {
  const sorted = [...candidates].sort((a, b) => (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''));
  const skipped: string[] = [];
  for (const nd of sorted) {
    const why = notFreeBecause(nd, agents);
    if (why === undefined) return { disk: nd, skipped };
    skipped.push(`${label(nd)} ${why}`);
  }
  return { disk: undefined, skipped };
}
