// The controller's reconcile of one NodeDisk: apply the label policy to spec.desired, then report
// status.controller. Idempotent: it reads the informer's cache, computes what should be, and writes only
// what differs, with server-side apply under its own field manager (never a PUT of the whole object).
import { API_VERSION, FIELD_MANAGER, KIND } from '../api/constants.ts';
import type { NodeDiskClient } from '../api/client.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import type { Logger } from '../lib/runtime/log.ts';
import { controllerStatus, readiness, sameControllerStatus } from './conditions.ts';
import type { EventRecorder } from './events.ts';
import type { ControllerMetrics } from './metrics.ts';
import { decide } from './policy.ts';

export interface ReconcilerOptions {
  client: NodeDiskClient;
  events: EventRecorder;
  log: Logger;
  metrics: ControllerMetrics;
  /** An agent report older than this makes Ready Unknown (AgentStale). */
  staleAfterMs: number;
}

export interface ReconcileResult {
  /** Look again after this many ms (a report going stale), if set. */
  requeueAfterMs?: number;
  /** The object as it is after our writes, to keep the cache current. */
  updated?: NodeDisk;
}

export class Reconciler {
  private readonly o: ReconcilerOptions;
  constructor(o: ReconcilerOptions) {
    this.o = o;
  }

  async reconcile(nd: NodeDisk): Promise<ReconcileResult> {
    const { client, events, log, metrics } = this.o;
    const name = nd.metadata.name ?? '';
    const meta = { apiVersion: API_VERSION, kind: KIND, metadata: { name } } as const;
    let current = nd;

    const decision = decide(current);
    if (decision.action !== 'none') {
      // force: the default Available belongs to the creator (the agent); see docs/adr/0004.
      current = await client.apply({ ...meta, spec: { desired: decision.desired } }, { fieldManager: FIELD_MANAGER.controller, force: true });
      metrics.writes.inc({ kind: 'spec' });
      metrics.policyActions.inc({ action: decision.action });
      log.info(decision.note.message, { nodeDisk: name, action: decision.action });
      await events.record(current, 'Normal', decision.note.reason, decision.action === 'reserve' ? 'Reserve' : 'Release', decision.note.message);
    }

    const now = Date.now();
    const ready = readiness(current, now, this.o.staleAfterMs);
    const after = decide(current);
    const status = controllerStatus(current, after, ready, new Date(now));
    if (!sameControllerStatus(current.status?.controller, status)) {
      const prevAccepted = current.status?.controller?.conditions?.find((c) => c.type === 'Accepted');
      current = await client.applyStatus({ ...meta, status: { controller: status } }, { fieldManager: FIELD_MANAGER.controller });
      metrics.writes.inc({ kind: 'status' });
      const acceptedNow = status.conditions?.find((c) => c.type === 'Accepted');
      if (after.note?.conflict && acceptedNow && prevAccepted?.reason !== acceptedNow.reason) {
        log.warn(after.note.message, { nodeDisk: name });
        await events.record(current, 'Warning', after.note.reason, 'PolicyRejected', after.note.message);
      }
    }
    return { updated: current, ...(ready.recheckAt !== undefined ? { requeueAfterMs: Math.max(0, ready.recheckAt - now) } : {}) };
  }
}
