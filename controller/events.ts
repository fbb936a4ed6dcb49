// Events (events.k8s.io/v1) about NodeDisks (what the policy did, and what it refused to do) and about
// NodeDiskClaims (bound, why not, released, lost: as the PV binder's about PVCs). NodeDisks are
// cluster-scoped, so their events live in the "default" namespace, as kubectl expects; a claim's live in
// its namespace, where its team (and `kubectl describe ndc`) reads them.
//
// Not a thundering herd (ADR 23): a first start on a large fleet with many disks labelled would post an
// AutoReserved event for each of them at once. As client-go's EventCorrelator does, events pass a token
// bucket, here one per namespace the events go to (all NodeDisks' share "default"), burst 25 as client-go's
// spam filter; an event that finds its bucket empty is combined with the similar ones (same kind, type,
// reason and action) waiting with it, and they go out as one event, "(combined from similar events): N
// NodeDisks, the last X: …", regarding the last of them, when a token is back. A person's occasional label
// change still gets its own event at once. Per namespace: one team's hundred claims neither delay another
// team's events nor are combined with them (a team never reads of another namespace's claims).
import { createHash, randomBytes } from 'node:crypto';
import { API_VERSION, type CLAIM_KIND, KIND } from '../api/constants.ts';
import type { NodeDiskClaim } from '../api/v1alpha1/claim-types.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import { TokenBucket } from '../lib/kube/ratelimit.ts';
import type { RestClient } from '../lib/kube/rest.ts';
import type { Logger } from '../lib/runtime/log.ts';

export const REPORTING_CONTROLLER = 'localtest.example.com/node-disks-operator';

export interface EventLimits {
  /** Events posted at once before the limit applies (client-go's spam filter: 25). */
  burst?: number;
  /** One more event allowed every this many ms. */
  refillMs?: number;
}

type EventType = 'Normal' | 'Warning';

/** An event's `regarding` (or `related`): the object it is about. */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
}

/** The reference to a NodeDisk or a NodeDiskClaim that an event names (a cached copy may lack its kind). */
export function refOf(o: NodeDisk | NodeDiskClaim, kind: typeof KIND | typeof CLAIM_KIND = KIND): ObjectRef {
  const m: { name?: string; namespace?: string; uid?: string; resourceVersion?: string } = o.metadata;
  return {
    apiVersion: API_VERSION,
    kind,
    name: m.name ?? '',
    ...(m.namespace ? { namespace: m.namespace } : {}),
    ...(m.uid ? { uid: m.uid } : {}),
    ...(m.resourceVersion ? { resourceVersion: m.resourceVersion } : {}),
  };
}

interface Waiting {
  count: number;
  regarding: ObjectRef;
  related: ObjectRef | undefined;
  type: EventType;
  reason: string;
  action: string;
  note: string;
}

/** The events of one namespace: its token bucket, and what waits for a token, combined. */
interface Scope {
  bucket: TokenBucket;
  /** Events held back, combined by kind, type, reason and action, in the order they first came. */
  waiting: Map<string, Waiting>;
  lastUsedMs: number;
}

/** Namespaces remembered before the idle ones (nothing waiting, the bucket full again) are forgotten. */
const MAX_IDLE_SCOPES = 1000;

export class EventRecorder {
  private readonly rest: RestClient;
  private readonly instance: string;
  private readonly log: Logger;
  private readonly burst: number;
  private readonly refillMs: number;
  private readonly scopes = new Map<string, Scope>();
  private timer: NodeJS.Timeout | undefined;

  constructor(rest: RestClient, instance: string, log: Logger, limits: EventLimits = {}) {
    this.rest = rest;
    this.instance = instance;
    this.log = log;
    this.burst = limits.burst ?? 25;
    this.refillMs = limits.refillMs ?? 5000;
  }

  private scope(namespace: string): Scope {
    let sc = this.scopes.get(namespace);
    if (!sc) {
      if (this.scopes.size >= MAX_IDLE_SCOPES) this.forgetIdle();
      sc = { bucket: new TokenBucket({ burst: this.burst, qps: 1000 / this.refillMs }), waiting: new Map(), lastUsedMs: 0 };
      this.scopes.set(namespace, sc);
    }
    sc.lastUsedMs = Date.now();
    return sc;
  }

  /** A namespace with nothing waiting and no event for a whole burst's refill has a full bucket: a new one is the same. */
  private forgetIdle(): void {
    const idleSince = Date.now() - this.burst * this.refillMs;
    for (const [ns, sc] of this.scopes) if (sc.waiting.size === 0 && sc.lastUsedMs < idleSince) this.scopes.delete(ns);
  }

  /** Best effort: an event that cannot be recorded is logged, never fails a reconcile. */
  async record(nd: NodeDisk, type: EventType, reason: string, action: string, note: string): Promise<void> {
    await this.recordAbout(refOf(nd), undefined, type, reason, action, note);
  }

  /** An event about any object (`related`: a second one it concerns, such as a claim's disk); best effort too. */
  async recordAbout(regarding: ObjectRef, related: ObjectRef | undefined, type: EventType, reason: string, action: string, note: string): Promise<void> {
    const sc = this.scope(regarding.namespace ?? 'default');
    if (sc.waiting.size === 0 && sc.bucket.tryTake()) return await this.post(regarding, related, type, reason, action, note);
    const key = [regarding.kind, type, reason, action].join('\0');
    const w = sc.waiting.get(key);
    if (w) Object.assign(w, { count: w.count + 1, regarding, related, note });
    else sc.waiting.set(key, { count: 1, regarding, related, type, reason, action, note });
    this.schedule();
  }

  /** Drops what is held back (the term ended). */
  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.scopes.clear();
  }

  /** One timer for all namespaces: when the first bucket with events waiting has a token again. */
  private schedule(): void {
    if (this.timer) return;
    let ms = Number.POSITIVE_INFINITY;
    for (const sc of this.scopes.values()) if (sc.waiting.size > 0) ms = Math.min(ms, sc.bucket.msUntilToken());
    if (ms === Number.POSITIVE_INFINITY) return;
    this.timer = setTimeout(() => this.flush(), ms);
    this.timer.unref(); // never keeps a stopping process alive
  }

  private flush(): void {
    this.timer = undefined;
    for (const sc of this.scopes.values()) {
      for (const [key, w] of sc.waiting) {
        if (!sc.bucket.tryTake()) break;
        sc.waiting.delete(key);
        const note = w.count === 1 ? w.note : `(combined from similar events): ${w.count} ${w.regarding.kind}s, the last ${w.regarding.name}: ${w.note}`;
        void this.post(w.regarding, w.related, w.type, w.reason, w.action, note);
      }
    }
    this.schedule();
  }

  private async post(regarding: ObjectRef, related: ObjectRef | undefined, type: EventType, reason: string, action: string, note: string): Promise<void> {
    const name = eventName(regarding.name, Date.now(), randomBytes(2).toString('hex'));
    const namespace = regarding.namespace ?? 'default';
    try {
      await this.rest.request('POST', `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/events`, {
        body: {
          apiVersion: 'events.k8s.io/v1',
          kind: 'Event',
          metadata: { name, namespace },
          eventTime: new Date().toISOString().replace(/Z$/, '000Z'),
          reportingController: REPORTING_CONTROLLER,
          reportingInstance: this.instance.slice(0, 128),
          action,
          reason,
          note: note.slice(0, 1024),
          type,
          regarding,
          ...(related ? { related } : {}),
        },
        timeoutMs: 10_000,
      });
    } catch (err) {
      if (cancelled(err)) return; // the term ended: not worth a warning per event
      this.log.warn('could not record event', {
        reason,
        kind: regarding.kind,
        ...(regarding.namespace ? { namespace: regarding.namespace } : {}),
        name: regarding.name,
        error: (err as Error).message,
      });
    }
  }
}

/** An Event's name is a DNS subdomain, as any object's: at most 253 characters. */
const MAX_NAME = 253;
const HASH_HEX = 10;

/**
 * The Event's name: `<object name>.<hex time>` as client-go's recorders name them (here ms plus 4 random hex
 * digits, so two events of one millisecond differ). A NodeDisk's name may take all 253 characters, and the
 * Event would then be refused, every time: the object's name is then cut and ends in `-` and 10 hex digits
 * of its SHA-256, so the name stays valid, still starts like the object's, and names of different objects
 * cut alike still differ (client-go falls back to a random UUID; a person reading `kubectl get events`
 * is better served by the object's name). The Event's `regarding` always carries the full name.
 */
export function eventName(objectName: string, nowMs: number, random: string): string {
  const suffix = `.${nowMs.toString(16)}${random}`;
  if (objectName.length + suffix.length <= MAX_NAME) return `${objectName}${suffix}`;
  const hash = createHash('sha256').update(objectName).digest('hex').slice(0, HASH_HEX);
  // Cut where a DNS label may end: not after a '.' or a '-'.
  const head = objectName.slice(0, MAX_NAME - suffix.length - HASH_HEX - 1).replace(/[.-]+$/, '');
  return `${head}-${hash}${suffix}`;
}

/** The request was stopped by its term ending (shutdown, or leadership lost), not refused. */
function cancelled(err: unknown): boolean {
  const e = err as Error & { cause?: Error };
  return [e.name, e.cause?.name].some((n) => n === 'AbortError' || n === 'NotLeaderError');
}
