// A NodeDiskClaim's status as the binder writes it, from the disk it holds (Bound, with Ready from that
// disk's report), from the line its team reads (Pending), or from the disk it lost (Lost); and whether a
// status already says what another says (write only on change). See docs/adr/0034-node-disk-claims.md.
import { type AgentView, agentStale } from '../api/free-disk.ts';
import { CLAIM_CONDITION, CONDITION, REASON_NODE_GONE, REASON_NODE_REPLACED } from '../api/constants.ts';
import type { NodeDiskClaim, NodeDiskClaimStatus } from '../api/v1alpha1/claim-types.ts';
import type { Condition, ConditionStatus, NodeDisk } from '../api/v1alpha1/types.ts';

export interface ReadyVerdict {
  status: ConditionStatus;
  reason: string;
  message: string;
}

/** Whether the disk a claim holds is ready for use: its marker is on the node, as its agent reports. */
export function claimReady(nd: NodeDisk, agents: AgentView): ReadyVerdict {
  const node = nd.status?.node;
  const where = `on node ${nd.spec.nodeName}`;
  // The machine the disk was on is gone, or another one holds the name now (ADR 35): whatever its agent
  // reported, or a new machine's agent renews, the disk is not there for the claim's pods.
  const machine = nd.status?.conditions?.find((c) => c.type === CONDITION.ready && (c.reason === REASON_NODE_GONE || c.reason === REASON_NODE_REPLACED));
  if (machine?.reason === REASON_NODE_GONE)
    return {
      status: 'False',
      reason: REASON_NODE_GONE,
      message: `node ${nd.spec.nodeName} is gone (no Node object): the disk went with its machine; its reservation stays until a person releases it`,
    };
  if (machine?.reason === REASON_NODE_REPLACED)
    return {
      status: 'False',
      reason: REASON_NODE_REPLACED,
      message: `node ${nd.spec.nodeName} is another machine now (another Node UID): the disk was on the machine before, not on this one; its reservation stays until a person releases it`,
    };
  if (node?.phase && agentStale(nd, agents)) return { status: 'Unknown', reason: 'AgentStale', message: `the node agent ${where} is stale; its report (${node.phase}) may be out of date` };
  if (node?.phase === 'Reserved') return { status: 'True', reason: 'MarkerOnNode', message: `the reservation marker of ${nd.spec.path} is ${where}` };
  if (node?.phase === 'Missing') return { status: 'False', reason: 'DiskMissing', message: `disk image ${nd.spec.path} is missing ${where}` };
  if (node?.phase === 'Error') return { status: 'False', reason: 'AgentError', message: node.message || `the node agent ${where} reports an error` };
  return { status: 'False', reason: 'WaitingForMarker', message: `waiting for the node agent ${where} to write the reservation marker (it reports ${node?.phase ?? 'nothing yet'})` };
}

function condition(prev: Condition[] | undefined, type: string, v: ReadyVerdict, generation: number, now: string): Condition {
  const old = prev?.find((c) => c.type === type);
  return { type, status: v.status, observedGeneration: generation, lastTransitionTime: old && old.status === v.status ? old.lastTransitionTime : now, reason: v.reason, message: v.message };
}

const timestamp = (now: Date) => now.toISOString().replace(/\.\d+Z$/, 'Z');

/** Ready reasons of a Bound claim that only a person can mend (the controller never moves a Bound claim). */
const NEEDS_A_PERSON = new Set(['DiskMissing', 'AgentError', REASON_NODE_GONE, REASON_NODE_REPLACED]);

/** Status of a claim that holds `nd`. */
export function boundStatus(claim: NodeDiskClaim, nd: NodeDisk, agents: AgentView, now: Date): NodeDiskClaimStatus {
  const generation = claim.metadata.generation ?? 0;
  const prev = claim.status?.conditions;
  const ts = timestamp(now);
  const ready = claimReady(nd, agents);
  const name = nd.metadata.name ?? '';
  const capacity = nd.status?.node?.capacityBytes;
  return {
    phase: 'Bound',
    diskName: name,
    nodeName: nd.spec.nodeName,
    path: nd.spec.path,
    ...(capacity !== undefined ? { capacityBytes: capacity } : {}),
    ...(ready.status !== 'True' ? { message: ready.message } : {}),
    observedGeneration: generation,
    conditions: [
      condition(prev, CLAIM_CONDITION.bound, { status: 'True', reason: 'Bound', message: `bound to NodeDisk ${name} on node ${nd.spec.nodeName}` }, generation, ts),
      condition(prev, CLAIM_CONDITION.ready, ready, generation, ts),
      ...(NEEDS_A_PERSON.has(ready.reason) ? [condition(prev, CLAIM_CONDITION.stalled, { ...ready, status: 'True' }, generation, ts)] : []),
    ],
  };
}

/**
 * Status of a claim no disk fits. Ready False too, not only Bound False: kstatus (tools with no custom
 * check) reads a resource with no Ready, Reconciling or Stalled condition as Current, and
 * `kubectl wait --for=condition=Ready` should keep waiting with the reason in sight.
 */
export function pendingStatus(claim: NodeDiskClaim, message: string, now: Date): NodeDiskClaimStatus {
  const generation = claim.metadata.generation ?? 0;
  const prev = claim.status?.conditions;
  const ts = timestamp(now);
  const none: ReadyVerdict = { status: 'False', reason: 'NoDiskFits', message };
  return {
    phase: 'Pending',
    message,
    observedGeneration: generation,
    conditions: [condition(prev, CLAIM_CONDITION.bound, none, generation, ts), condition(prev, CLAIM_CONDITION.ready, none, generation, ts)],
  };
}

/** Status of a claim that was bound and whose disk is gone (`why`), kept where it was so people can find it. */
export function lostStatus(claim: NodeDiskClaim, why: string, now: Date): NodeDiskClaimStatus {
  const generation = claim.metadata.generation ?? 0;
  const s = claim.status ?? {};
  const prev = s.conditions;
  const ts = timestamp(now);
  const lost: ReadyVerdict = { status: 'False', reason: 'DiskGone', message: why };
  return {
    phase: 'Lost',
    ...(s.diskName !== undefined ? { diskName: s.diskName } : {}),
    ...(s.nodeName !== undefined ? { nodeName: s.nodeName } : {}),
    ...(s.path !== undefined ? { path: s.path } : {}),
    ...(s.capacityBytes !== undefined ? { capacityBytes: s.capacityBytes } : {}),
    message: why,
    observedGeneration: generation,
    conditions: [
      condition(prev, CLAIM_CONDITION.bound, lost, generation, ts),
      condition(prev, CLAIM_CONDITION.ready, lost, generation, ts),
      condition(prev, CLAIM_CONDITION.stalled, { ...lost, status: 'True' }, generation, ts),
    ],
  };
}

/** Whether `have` already says what `want` says (write only on change). */
export function sameClaimStatus(have: NodeDiskClaimStatus | undefined, want: NodeDiskClaimStatus): boolean {
  if (!have) return false;
  const norm = (s: NodeDiskClaimStatus) =>
    JSON.stringify([
      s.phase,
      s.diskName,
      s.nodeName,
      s.path,
      s.capacityBytes,
      s.message ?? '',
      s.observedGeneration,
      (s.conditions ?? []).map((c) => [c.type, c.status, c.reason, c.message, c.observedGeneration, c.lastTransitionTime]).sort(),
    ]);
  return norm(have) === norm(want);
}
