// Events (events.k8s.io/v1) about NodeDisks: what the policy did, and what it refused to do.
// NodeDisks are cluster-scoped, so their events live in the "default" namespace, as kubectl expects.
//
// Not a thundering herd (ADR 23): a first start on a large fleet with many disks labelled would post an
// AutoReserved event for each of them at once. As client-go's EventCorrelator does, events pass a token
// bucket, here one per source (this controller), burst 25 as client-go's spam filter; an event that finds
// the bucket empty is combined with the similar ones (same type, reason and action) waiting with it, and they go out
// as one event, "(combined from similar events): N NodeDisks, the last X: …", regarding the last of them,
// when a token is back. A person's occasional label change still gets its own event at once.
import { createHash, randomBytes } from 'node:crypto';
import { API_VERSION, KIND } from '../api/constants.ts';
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

interface Waiting {
  count: number;
  nd: NodeDisk;
  type: EventType;
  reason: string;
  action: string;
  note: string;
}

export class EventRecorder {
  private readonly rest: RestClient;
  private readonly instance: string;
  private readonly log: Logger;
  private readonly bucket: TokenBucket;
  /** Events held back, combined by type, reason and action, in the order they first came. */
  private readonly waiting = new Map<string, Waiting>();
  private timer: NodeJS.Timeout | undefined;

  constructor(rest: RestClient, instance: string, log: Logger, limits: EventLimits = {}) {
    this.rest = rest;
    this.instance = instance;
    this.log = log;
    this.bucket = new TokenBucket({ burst: limits.burst ?? 25, qps: 1000 / (limits.refillMs ?? 5000) });
  }

  /** Best effort: an event that cannot be recorded is logged, never fails a reconcile. */
  async record(nd: NodeDisk, type: EventType, reason: string, action: string, note: string): Promise<void> {
    if (this.waiting.size === 0 && this.bucket.tryTake()) return await this.post(nd, type, reason, action, note);
    const key = `${type}\0${reason}\0${action}`;
    const w = this.waiting.get(key);
    if (w) Object.assign(w, { count: w.count + 1, nd, note });
    else this.waiting.set(key, { count: 1, nd, type, reason, action, note });
    this.schedule();
  }

  /** Drops what is held back (the term ended). */
  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.waiting.clear();
  }

  private schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => this.flush(), this.bucket.msUntilToken());
    this.timer.unref(); // never keeps a stopping process alive
  }

  private flush(): void {
    this.timer = undefined;
    for (const [key, w] of this.waiting) {
      if (!this.bucket.tryTake()) break;
      this.waiting.delete(key);
      const note = w.count === 1 ? w.note : `(combined from similar events): ${w.count} NodeDisks, the last ${w.nd.metadata.name}: ${w.note}`;
      void this.post(w.nd, w.type, w.reason, w.action, note);
    }
    if (this.waiting.size > 0) this.schedule();
  }

  private async post(nd: NodeDisk, type: EventType, reason: string, action: string, note: string): Promise<void> {
    const name = eventName(nd.metadata.name ?? '', Date.now(), randomBytes(2).toString('hex'));
    try {
      await this.rest.request('POST', '/apis/events.k8s.io/v1/namespaces/default/events', {
        body: {
          apiVersion: 'events.k8s.io/v1',
          kind: 'Event',
          metadata: { name, namespace: 'default' },
          eventTime: new Date().toISOString().replace(/Z$/, '000Z'),
          reportingController: REPORTING_CONTROLLER,
          reportingInstance: this.instance.slice(0, 128),
          action,
          reason,
          note: note.slice(0, 1024),
          type,
          regarding: { apiVersion: API_VERSION, kind: KIND, name: nd.metadata.name, uid: nd.metadata.uid, resourceVersion: nd.metadata.resourceVersion },
        },
        timeoutMs: 10_000,
      });
    } catch (err) {
      if (cancelled(err)) return; // the term ended: not worth a warning per event
      this.log.warn('could not record event', { reason, nodeDisk: nd.metadata.name, error: (err as Error).message });
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
