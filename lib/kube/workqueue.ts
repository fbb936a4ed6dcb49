// A work queue in the manner of client-go's util/workqueue, the one both daemons use:
// - a key added while queued is queued once (de-duplication);
// - a key added while being processed is queued again once after done(), never handed to two workers at once;
// - failures retry with per-item exponential backoff up to a cap (addRateLimited), forgotten on success (forget);
// - addAfter schedules a later look (for time-based changes such as an agent going stale);
// - two priorities: 'event' (something happened: a watch event, a file event, a retry) before 'sweep' (a
//   periodic rescan or relist that looks at everything), so news waits for the work in hand, never for a
//   sweep of thousands. A swept key that something happens to moves up to 'event'.
// There is no overall rate limit (client-go's default limiter has a token bucket): the controller's client
// has one for its requests (ratelimit.ts), and the agent does one thing at a time.
export type Priority = 'event' | 'sweep';

export interface QueueOptions {
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** 0..1: each backoff delay is multiplied by a random factor in [1, 1 + jitter], so retries spread out. */
  jitter?: number;
}

/**
 * FIFO as an array read from `head`: Array#shift on a large queue copies the rest every time (a large
 * array cannot be trimmed in place), and a restart on a large fleet spent much of its CPU in it
 * (docs/benchmarks.md).
 */
class Fifo {
  private items: string[] = [];
  private head = 0;

  push(key: string): void {
    this.items.push(key);
  }

  shift(): string | undefined {
    const key = this.head < this.items.length ? this.items[this.head++] : undefined;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head); // drop what was read, now and then: amortized O(1)
      this.head = 0;
    }
    return key;
  }
}

export class WorkQueue {
  private readonly fifos: Record<Priority, Fifo> = { event: new Fifo(), sweep: new Fifo() };
  /**
   * Keys waiting to be handed out, with their priority. A FIFO may also hold stale entries (a key moved up
   * to 'event' keeps its old 'sweep' entry, a key already handed out its entry): get() skips an entry whose
   * key is not queued at that priority, so each key comes out once.
   */
  private readonly queued = new Map<string, Priority>();
  /** Keys added while being processed, with the highest priority asked: queued again by done(). */
  private readonly dirty = new Map<string, Priority>();
  private readonly processing = new Set<string>();
  private readonly failures = new Map<string, number>();
  /** Each key's pending addAfter: its timer and when it is due. */
  private readonly timers = new Map<string, { timer: NodeJS.Timeout; dueAt: number }>();
  private waiters: ((key: string | undefined) => void)[] = [];
  private shuttingDown = false;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly jitter: number;

  constructor(o: QueueOptions = {}) {
    this.baseDelayMs = o.baseDelayMs ?? 100;
    this.maxDelayMs = o.maxDelayMs ?? 5 * 60_000;
    this.jitter = o.jitter ?? 0;
  }

  /** How many keys wait to be handed out (not those being processed). */
  get length(): number {
    return this.queued.size;
  }

  add(key: string, priority: Priority = 'event'): void {
    if (this.shuttingDown) return;
    if (this.processing.has(key)) {
      if (this.dirty.get(key) !== 'event') this.dirty.set(key, priority);
      return;
    }
    const queuedAs = this.queued.get(key);
    if (queuedAs !== undefined) {
      if (queuedAs === 'sweep' && priority === 'event') {
        this.queued.set(key, 'event');
        this.fifos.event.push(key);
      }
      return;
    }
    const waiter = this.waiters.shift();
    if (waiter) {
      this.processing.add(key);
      waiter(key);
      return;
    }
    this.queued.set(key, priority);
    this.fifos[priority].push(key);
  }

  /** Adds the key after `ms`; of two pending schedules for a key, the sooner is kept (one timer per key). */
  addAfter(key: string, ms: number, priority: Priority = 'event'): void {
    if (this.shuttingDown) return;
    if (ms <= 0) {
      this.add(key, priority);
      return;
    }
    const dueAt = Date.now() + ms;
    const existing = this.timers.get(key);
    if (existing) {
      if (existing.dueAt <= dueAt) return;
      clearTimeout(existing.timer);
    }
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key, priority);
    }, ms);
    this.timers.set(key, { timer, dueAt });
  }

  /** Adds the key after its backoff, which doubles with each failure since the last forget(); returns the delay. */
  addRateLimited(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    const delay = Math.round(Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** n) * (1 + Math.random() * this.jitter));
    // The backoff replaces any pending look, sooner or later: the failure is what decides when to retry.
    const existing = this.timers.get(key);
    if (existing) {
      clearTimeout(existing.timer);
      this.timers.delete(key);
    }
    this.addAfter(key, delay);
    return delay;
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  retries(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** Waits for the next key, an 'event' one first; undefined once shut down. */
  async get(): Promise<string | undefined> {
    if (this.shuttingDown) return undefined;
    const key = this.next('event') ?? this.next('sweep');
    if (key !== undefined) {
      this.queued.delete(key);
      this.processing.add(key);
      return key;
    }
    return new Promise<string | undefined>((resolve) => this.waiters.push(resolve));
  }

  private next(priority: Priority): string | undefined {
    const fifo = this.fifos[priority];
    for (let key = fifo.shift(); key !== undefined; key = fifo.shift()) if (this.queued.get(key) === priority) return key;
    return undefined;
  }

  done(key: string): void {
    this.processing.delete(key);
    const again = this.dirty.get(key);
    if (again !== undefined) {
      this.dirty.delete(key);
      this.add(key, again);
    }
  }

  shutDown(): void {
    this.shuttingDown = true;
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    for (const w of this.waiters) w(undefined);
    this.waiters = [];
  }
}
