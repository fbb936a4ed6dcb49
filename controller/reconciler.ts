// The controller's reconcile of one NodeDisk: apply the label policy to spec.desired, then report
// status.conditions (Accepted, Ready), status.observedGeneration and status.controller. Idempotent: it
// computes what should be from one version of the object and writes only what differs, with server-side
// apply under its own field manager (never a PUT of the whole object).
//
// Every write is conditional on the version it was decided from (metadata.resourceVersion in the apply
// body): the API server refuses it with 409 Conflict if anyone wrote in between, a person reserving the
// disk by hand above all. A refused decision is taken again from a fresh GET, not from the informer cache,
// which may not have the newer version yet. See docs/adr/0011-conditional-writes-and-leadership.md.
//
// A NodeDisk whose Node object does not exist (ADR 35) is Ready False (NodeGone), is not reserved by the
// label, and once its node has been gone for the grace period it is deleted, if nothing holds it: a
// reservation or the agent's finalizer keeps it, visibly, until a person acts. The delete is conditional
// on the version decided from, as every write here.
import {
  API_VERSION,
  CLAIM_OWNER_PREFIX,
  CONDITION,
  CORDONED_VALUE,
  FIELD_MANAGER,
  KIND,
  LABEL_CORDONED,
  REASON_CLAIM_GONE,
  REASON_DISK_FAILING,
  REASON_NODE_GONE,
  REASON_NODE_REPLACED,
  REASON_WIPING,
} from '../api/constants.ts';
import { pendingWipe } from '../api/wipe.ts';
import { failing } from '../api/free-disk.ts';
import { isDriveId } from '../api/names.ts';
import type { NodeDiskClient } from '../api/client.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import { isApiError, isStaleVersionConflict } from '../lib/kube/errors.ts';
import type { Logger } from '../lib/runtime/log.ts';
import { controllerStatus, formatDuration, keptBecause, nodeGoneCondition, nodeReplacedCondition, readyCondition, sameControllerStatus, type ReadyVerdict } from './conditions.ts';
import type { EventRecorder } from './events.ts';
import { tellFailing } from './failing-disk-events.ts';
import type { AgentHeartbeats } from './agent-liveness.ts';
import type { ControllerMetrics } from './metrics.ts';
import type { Nodes } from './nodes.ts';
import { decide, type PolicyNote, type Refusal } from './policy.ts';

export interface ReconcilerOptions {
  client: NodeDiskClient;
  events: EventRecorder;
  log: Logger;
  metrics: ControllerMetrics;
  /** With no heartbeat Lease for its node, an agent report older than this makes Ready Unknown (AgentStale). */
  staleAfterMs: number;
  /** The agents' heartbeat Leases (ADR 24): what decides staleness for a node that has one. */
  heartbeats?: Pick<AgentHeartbeats, 'hasSynced' | 'liveness'>;
  /**
   * How long after its creation a NodeDisk the agent has not reported yet is left without a controller
   * status (0: written at once). The agent reports a disk right after creating it, so writing Ready
   * Unknown (WaitingForAgent) first would cost a second status write per new disk for a state that lasts
   * milliseconds; a disk no agent reports within the grace still gets WaitingForAgent.
   */
  firstReportGraceMs?: number;
  /** Which Nodes exist (./nodes.ts): without it no node is ever judged gone. */
  nodes?: Pick<Nodes, 'hasSynced' | 'exists' | 'goneSince' | 'uid'>;
  /** How long the NodeDisks of a gone node stay before the unreserved ones are deleted. */
  nodeGoneGraceMs?: number;
  /** The claims binder's view of the claims: whether a claim reservation's claim is gone (ClaimGone). */
  claims?: { readonly hasSynced: boolean; claimGoneOf(nd: NodeDisk): string | undefined };
  /** The nodes whose agents report this drive (its diskID) present now: where a Missing drive went. */
  driveElsewhere?: (nd: NodeDisk) => string[];
}

export interface ReconcileResult {
  /** Look again after this many ms (a report going stale), if set. */
  requeueAfterMs?: number;
  /** The newest version of the object we know of after our writes, to keep the cache current. */
  updated?: NodeDisk;
  /** The object is gone. */
  deleted?: boolean;
  /** At least one write was accepted by the API server. */
  wrote?: boolean;
}

/** Decisions taken again from fresh state before giving up to the queue's backoff. */
const MAX_ATTEMPTS = 5;

export class Reconciler {
  private readonly o: ReconcilerOptions;
  constructor(o: ReconcilerOptions) {
    this.o = o;
  }

  /** Reconciles from `cached`; when a write finds the object changed, decides again from a fresh GET. */
  async reconcile(cached: NodeDisk): Promise<ReconcileResult> {
    const name = cached.metadata.name ?? '';
    let nd = cached;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.reconcileVersion(nd);
      } catch (err) {
        if (!isStaleVersionConflict(err) || attempt >= MAX_ATTEMPTS) throw err;
        this.o.metrics.conflicts.inc();
        this.o.log.debug('the NodeDisk changed since it was read; deciding again from a fresh read', { nodeDisk: name, resourceVersion: nd.metadata.resourceVersion, attempt });
        try {
          nd = await this.o.client.get(name);
        } catch (getErr) {
          if (isApiError(getErr, 404)) return { deleted: true };
          throw getErr;
        }
      }
    }
  }

  /**
   * How long to hold back the status of a new NodeDisk its agent has not reported yet (0: do not). Its
   * report (a watch event) brings the reconcile sooner; the requeue covers an agent that never reports.
   * Bounded by the grace itself, so a controller clock behind the API server's cannot stretch it.
   */
  private firstReportWait(nd: NodeDisk, now: number): number {
    const grace = this.o.firstReportGraceMs ?? 0;
    if (grace <= 0 || nd.status?.node?.phase) return 0;
    const created = Date.parse(nd.metadata.creationTimestamp ?? '');
    if (Number.isNaN(created)) return 0;
    return Math.min(grace, Math.max(0, created + grace - now));
  }

  /** One pass over one version of the object; every write is conditional on that version. */
  private async reconcileVersion(nd: NodeDisk): Promise<ReconcileResult> {
    const { client, events, log, metrics } = this.o;
    const name = nd.metadata.name ?? '';
    let current = nd;
    let wrote = false;
    const meta = () => ({ apiVersion: API_VERSION, kind: KIND, metadata: { name, resourceVersion: current.metadata.resourceVersion } }) as const;

    const nodes = this.o.nodes;
    // Nothing is judged gone before the Nodes are known: every node would look gone.
    if (nodes && !nodes.hasSynced) return { requeueAfterMs: 1000 };
    const node = current.spec.nodeName;
    const gone = nodes !== undefined && !nodes.exists(node);
    // Found on the machine before this one of the name (ADR 35): the Node's UID is not the one reported.
    const reportedUID = current.status?.node?.nodeUID;
    const nodeUID = nodes && !gone ? nodes.uid(node) : undefined;
    const replaced = reportedUID !== undefined && nodeUID !== undefined && reportedUID !== nodeUID;
    const refusal: Refusal | undefined = gone
      ? { reason: REASON_NODE_GONE, message: `its node ${node} is gone (no Node object)` }
      : replaced
        ? { reason: REASON_NODE_REPLACED, message: `it was found on another machine than node ${node} is now (Node UID ${reportedUID}, now ${nodeUID})` }
        : current.metadata.labels?.[LABEL_CORDONED] === CORDONED_VALUE
          ? { reason: 'Cordoned', message: `the disk is cordoned (label ${LABEL_CORDONED}=true): kubectl nodedisks uncordon puts it back in service` }
          : failing(current)
            ? {
                reason: REASON_DISK_FAILING,
                message: `the disk is failing (${current.status?.node?.health?.reason ?? ''}): kubectl nodedisks uncordon marks it checked and puts it back in service`,
              }
            : pendingWipe(current) !== undefined
              ? { reason: REASON_WIPING, message: 'the disk is being wiped (released with a wipe request); the label takes effect once its node agent reports it wiped' }
              : undefined;

    const decision = decide(current, refusal);
    if (decision.action !== 'none') {
      // force: the default Available belongs to the creator (the agent); see docs/adr/0004. The
      // resourceVersion keeps force from taking anything decided on a stale view: see the header.
      current = await client.apply({ ...meta(), spec: { desired: decision.desired } }, { fieldManager: FIELD_MANAGER.controller, force: true });
      wrote = true;
      metrics.writes.inc({ kind: 'spec' });
      metrics.policyActions.inc({ action: decision.action });
      log.info(decision.note.message, { nodeDisk: name, action: decision.action });
      await events.record(current, 'Normal', decision.note.reason, decision.action === 'reserve' ? 'Reserve' : 'Release', decision.note.message);
    }

    const now = Date.now();
    let ready: ReadyVerdict;
    if (nodes && gone) {
      const graceMs = this.o.nodeGoneGraceMs ?? 3_600_000;
      const since = nodes.goneSince(node);
      if (now >= since + graceMs && keptBecause(current) === undefined) {
        const { uid, resourceVersion } = current.metadata;
        await client.delete(name, { preconditions: { ...(uid ? { uid } : {}), ...(resourceVersion ? { resourceVersion } : {}) } });
        metrics.writes.inc({ kind: 'delete' });
        const message = `node ${node} has been gone for more than ${formatDuration(graceMs)} and the disk was not reserved: NodeDisk deleted`;
        log.info(message, { nodeDisk: name, node });
        await events.record(current, 'Normal', REASON_NODE_GONE, 'Delete', message);
        return { deleted: true, wrote: true };
      }
      ready = nodeGoneCondition(current, since, graceMs);
    } else if (replaced) {
      ready = nodeReplacedCondition(current, nodeUID);
    } else {
      const wait = this.firstReportWait(current, now);
      if (wait > 0) return { updated: current, wrote, requeueAfterMs: wait };
      const heartbeats = this.o.heartbeats;
      // Staleness is not judged before the heartbeat Leases are known: a node would look Lease-less.
      if (heartbeats && !heartbeats.hasSynced) return { updated: current, wrote, requeueAfterMs: 1000 };
      ready = readyCondition(current, now, this.o.staleAfterMs, heartbeats?.liveness(node));
      // A drive has one identity wherever it is plugged: Missing here and reported on another node, it moved.
      const where = ready.reason === 'DiskMissing' && isDriveId(current.spec.diskID) ? (this.o.driveElsewhere?.(current) ?? []) : [];
      if (where.length) ready = { ...ready, message: `${movedTo(current, where)}; ${ready.message}` };
    }
    let after = decide(current, refusal);
    const claims = this.o.claims;
    if (claims && current.spec.desired?.state === 'Reserved' && current.spec.desired.owner?.startsWith(CLAIM_OWNER_PREFIX)) {
      // Not judged before the claims are known: every claim would look gone.
      if (!claims.hasSynced) return { updated: current, wrote, requeueAfterMs: 1000 };
      const claim = claims.claimGoneOf(current);
      if (claim !== undefined) after = { ...after, note: claimGoneNote(name, claim, after.note) };
    }
    const status = controllerStatus(current, after, ready, new Date(now));
    if (!sameControllerStatus(current.status, status)) {
      const prevAccepted = current.status?.conditions?.find((c) => c.type === 'Accepted');
      const wasFailing = current.status?.conditions?.some((c) => c.type === CONDITION.healthy && c.status === 'False') === true;
      // Conditional too: Accepted and Ready describe this version, and must not land on a newer one.
      // One apply of all three parts: a field this manager applied before and leaves out now (the old
      // status.controller.conditions, ADR 20) is removed by the server-side apply itself.
      current = await client.applyStatus({ ...meta(), status }, { fieldManager: FIELD_MANAGER.controller });
      wrote = true;
      metrics.writes.inc({ kind: 'status' });
      const acceptedNow = status.conditions.find((c) => c.type === 'Accepted');
      if (acceptedNow?.reason === REASON_CLAIM_GONE && prevAccepted?.reason !== REASON_CLAIM_GONE) {
        log.info(acceptedNow.message, { nodeDisk: name });
        await events.record(current, 'Normal', REASON_CLAIM_GONE, 'Observe', acceptedNow.message);
      } else if (after.note?.conflict && acceptedNow && prevAccepted?.reason !== acceptedNow.reason) {
        log.warn(after.note.message, { nodeDisk: name });
        await events.record(current, 'Warning', after.note.reason, 'PolicyRejected', after.note.message);
      }
      const healthyNow = status.conditions.find((c) => c.type === CONDITION.healthy);
      if (healthyNow?.status === 'False' && !wasFailing) await tellFailing(current, healthyNow.message, { events, rest: client.rest, log });
    }
    return { updated: current, wrote, ...(ready.recheckAt !== undefined ? { requeueAfterMs: Math.max(0, ready.recheckAt - now) } : {}) };
  }
}

/**
 * Accepted of a NodeDisk whose claim is gone: reason ClaimGone, naming the claim and how to release the
 * disk; still False (with the label's conflict in words) when the label asks for something it cannot do.
 */
export function claimGoneNote(disk: string, claim: string, label: PolicyNote | undefined): PolicyNote {
  const message =
    `reserved for ${claim}, which is gone: the reservation is Released and the disk keeps its data; ` +
    `a person with the NodeDisk editor role may release it (kubectl nodedisks release ${disk})`;
  return { reason: REASON_CLAIM_GONE, message: label?.conflict ? `${message}; ${label.message}` : message, ...(label?.conflict ? { conflict: true } : {}) };
}

/** Where a missing drive went, in words: its NodeDisks there, and what to do with this one. */
export function movedTo(nd: NodeDisk, nodes: string[]): string {
  const reserved = nd.spec.desired?.state === 'Reserved';
  return `drive ${nd.spec.diskID} is on node ${nodes.join(', ')} now (moved there)${reserved ? ': this reservation stays here until it is released' : ': delete this NodeDisk (kubectl delete ndisk ' + (nd.metadata.name ?? '') + ') or plug the drive back'}`;
}
