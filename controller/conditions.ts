// The controller's part of status: the Accepted and Ready conditions (and Healthy, from the agent's health
// report, while there is one) at status.conditions (where kubectl
// wait, kstatus, Argo CD and Flux look) with status.observedGeneration, and the seed's status.controller
// (accepted, observedGeneration); see docs/adr/0020-conditions-at-status-conditions.md.
// lastTransitionTime moves only when a condition's status changes (metav1.Condition semantics).
import { CONDITION, FINALIZER, REASON_AGENT_STALE, REASON_NODE_GONE, REASON_NODE_REPLACED, REASON_WIPING } from '../api/constants.ts';
import { pendingWipe } from '../api/wipe.ts';
import type { Condition, ConditionStatus, ControllerStatus, NodeDisk, NodeDiskStatus } from '../api/v1alpha1/types.ts';
import type { AgentLiveness } from './agent-liveness.ts';
import type { PolicyDecision } from './policy.ts';

export interface ReadyVerdict {
  status: ConditionStatus;
  reason: string;
  message: string;
  /** When the verdict would change by itself (the agent going stale), in ms since epoch. */
  recheckAt?: number;
}

/**
 * Whether what the agent reports matches what is desired, in words. `liveness` is what the node's heartbeat
 * Lease says (controller/agent-liveness.ts, ADR 24); without one (an agent from before it, or none given) the
 * report's lastSeenTime decides staleness against `staleAfterMs`, as before.
 */
export function readyCondition(nd: NodeDisk, now: number, staleAfterMs: number, liveness?: AgentLiveness): ReadyVerdict {
  const desired = nd.spec.desired?.state ?? 'Available';
  const node = nd.status?.node;
  if (!node?.phase) {
    return { status: 'Unknown', reason: 'WaitingForAgent', message: `the node agent on ${nd.spec.nodeName} has not reported this disk yet` };
  }
  if (liveness?.kind === 'stale') {
    return {
      status: 'Unknown',
      reason: REASON_AGENT_STALE,
      message: `the node agent on ${nd.spec.nodeName} has not renewed its heartbeat (Lease ${liveness.lease}, last renewed ${liveness.renewTime}, lasts ${liveness.durationSeconds} s); its phase ${node.phase} may be out of date`,
    };
  }
  if (liveness?.kind === 'alive') return verdict(nd, desired, {});
  const seen = node.lastSeenTime ? Date.parse(node.lastSeenTime) : NaN;
  if (!Number.isNaN(seen) && now - seen > staleAfterMs) {
    return {
      status: 'Unknown',
      reason: REASON_AGENT_STALE,
      message: `the node agent on ${nd.spec.nodeName} last reported at ${node.lastSeenTime} (more than ${Math.round(staleAfterMs / 1000)} s ago); its phase ${node.phase} may be out of date`,
    };
  }
  const recheckAt = Number.isNaN(seen) ? undefined : seen + staleAfterMs + 1000;
  return verdict(nd, desired, recheckAt !== undefined ? { recheckAt } : {});
}

/** A duration as Go prints one, shortest form: 1h, 90s → 1m30s, 250ms. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  const total = Math.round(ms / 1000);
  const [h, m, s] = [Math.floor(total / 3600), Math.floor((total % 3600) / 60), total % 60];
  return `${h ? `${h}h` : ''}${m ? `${m}m` : ''}${s || (!h && !m) ? `${s}s` : ''}`;
}

/** Why a NodeDisk of a gone node must stay after the grace period (a reservation never goes silently), or undefined. */
export function keptBecause(nd: NodeDisk): string | undefined {
  if (nd.metadata.deletionTimestamp) return 'it is being deleted';
  const d = nd.spec.desired;
  if (d?.state === 'Reserved') {
    const who = d.owner ? `by ${d.owner}` : 'with no owner';
    return `it is reserved ${who}: it stays until a person releases it (kubectl nodedisks release, or kubectl nodedisks prune)`;
  }
  if (nd.metadata.finalizers?.includes(FINALIZER))
    return `it still has the node agent's finalizer ${FINALIZER} (a marker may be on the node): it stays until a person removes it (kubectl nodedisks prune)`;
  return undefined;
}

/**
 * Ready of a NodeDisk whose Node object does not exist: False, NodeGone, naming the node; says whether and
 * when the NodeDisk is deleted. `deleteAt` is wall-clock ms; the message changes only when it does.
 */
export function nodeGoneCondition(nd: NodeDisk, goneSince: number, graceMs: number): ReadyVerdict {
  const node = nd.spec.nodeName;
  const since = new Date(goneSince).toISOString().replace(/\.\d+Z$/, 'Z');
  const kept = keptBecause(nd);
  const then = kept
    ? `; ${kept}`
    : `; not reserved, it is deleted after the grace period of ${formatDuration(graceMs)}, at ${new Date(goneSince + graceMs).toISOString().replace(/\.\d+Z$/, 'Z')}`;
  return {
    status: 'False',
    reason: REASON_NODE_GONE,
    message: `node ${node} is gone: no Node object of that name (noticed at ${since})${then}`,
    ...(kept ? {} : { recheckAt: goneSince + graceMs }),
  };
}

/**
 * Ready of a NodeDisk reported by another machine than the Node of its name now is (a new UID): False,
 * NodeReplaced. Reserved, it stays until a person releases it (the new machine's agent leaves it alone);
 * not reserved, the new machine's agent reports it afresh, which ends this.
 */
export function nodeReplacedCondition(nd: NodeDisk, nodeUID: string): ReadyVerdict {
  const node = nd.spec.nodeName;
  const kept = keptBecause(nd);
  return {
    status: 'False',
    reason: REASON_NODE_REPLACED,
    message: `node ${node} is another machine now (Node UID ${nodeUID}); this disk was found on the one before (Node UID ${nd.status?.node?.nodeUID})${kept ? `; ${kept}` : "; not reserved, the new machine's agent reports its own disk under this name"}`,
  };
}

/** The verdict of a report that is not stale. */
function verdict(nd: NodeDisk, desired: string, base: { recheckAt?: number }): ReadyVerdict {
  const node = nd.status?.node ?? {};
  if (node.phase === 'Missing') return { ...base, status: 'False', reason: 'DiskMissing', message: node.message || `disk image ${nd.spec.path} is missing on ${nd.spec.nodeName}` };
  if (node.phase === 'Error') return { ...base, status: 'False', reason: 'AgentError', message: node.message || 'the node agent reports an error' };
  const wipe = pendingWipe(nd);
  if (wipe !== undefined) {
    const doing = node.phase === 'Wiping' ? 'the node agent is wiping it' : `waiting for the node agent on ${nd.spec.nodeName} to wipe it`;
    return { ...base, status: 'False', reason: REASON_WIPING, message: `released with a wipe request (${wipe}): ${doing}; it is free to nobody until the agent reports it wiped` };
  }
  if (node.phase === desired) return { ...base, status: 'True', reason: 'PhaseMatchesDesired', message: `the node agent reports ${node.phase}, as desired` };
  return { ...base, status: 'False', reason: 'Progressing', message: `desired ${desired}, the node agent reports ${node.phase}` };
}

function condition(prev: Condition[] | undefined, type: string, status: ConditionStatus, reason: string, message: string, generation: number, now: string): Condition {
  const old = prev?.find((c) => c.type === type);
  return {
    type,
    status,
    observedGeneration: generation,
    lastTransitionTime: old && old.status === status ? old.lastTransitionTime : now,
    reason,
    message,
  };
}

/** Everything the controller writes in status, in one apply of the status subresource. */
export interface ControllerReport {
  controller: ControllerStatus;
  observedGeneration: number;
  conditions: Condition[];
}

export function controllerStatus(nd: NodeDisk, decision: PolicyDecision, ready: ReadyVerdict, now: Date): ControllerReport {
  const generation = nd.metadata.generation ?? 0;
  const prev = nd.status?.conditions;
  const ts = now.toISOString().replace(/\.\d+Z$/, 'Z');
  const note = decision.note;
  const accepted = !note?.conflict;
  const acceptedCond = accepted
    ? condition(prev, CONDITION.accepted, 'True', note?.reason ?? 'Reconciled', note?.message ?? 'policy applied', generation, ts)
    : condition(prev, CONDITION.accepted, 'False', note?.reason ?? 'Rejected', note?.message ?? '', generation, ts);
  const readyCond = condition(prev, CONDITION.ready, ready.status, ready.reason, ready.message, generation, ts);
  // Healthy follows the agent's report of what the kernel saw, and is there only while it has one.
  const health = nd.status?.node?.health;
  const healthyCond = health ? [condition(prev, CONDITION.healthy, health.status, health.reason, health.message, generation, ts)] : [];
  return { controller: { accepted, observedGeneration: generation }, observedGeneration: generation, conditions: [acceptedCond, readyCond, ...healthyCond] };
}

/** Whether `status` already says what `want` says, for "write only when something changed". */
export function sameControllerStatus(status: NodeDiskStatus | undefined, want: ControllerReport): boolean {
  const a = status?.controller;
  if (!a || a.accepted !== want.controller.accepted || a.observedGeneration !== want.controller.observedGeneration) return false;
  if (status.observedGeneration !== want.observedGeneration) return false;
  const ac = status.conditions ?? [];
  if (ac.length !== want.conditions.length) return false;
  return want.conditions.every((c) => {
    const o = ac.find((x) => x.type === c.type);
    return !!o && o.status === c.status && o.reason === c.reason && o.message === c.message && o.observedGeneration === c.observedGeneration && o.lastTransitionTime === c.lastTransitionTime;
  });
}
