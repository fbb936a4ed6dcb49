// A rate-limited work queue in the manner of client-go's workqueue:
// - a key added while queued is not queued twice (de-duplication);
// - a key added while being processed is queued again after it is done, never processed concurrently;
// - failures retry with per-item exponential backoff, forgotten on success;
// - addAfter schedules a later look (for time-based changes such as an agent going stale).
export interface QueueOptions {
  baseDelayMs?: number;
  maxDelayMs?: number;
}

export class WorkQueue {
  // FIFO as an array read from `head`: Array#shift on a large queue copies the rest every time (a large
  // array cannot be trimmed in place), and a restart on a large fleet spent much of its CPU in it
  // (docs/benchmarks.md).
  private queue: string[] = [];
  private head = 0;
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private waiters: ((key: string | undefined) => void)[] = [];
  private shuttingDown = false;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;

  constructor(o: QueueOptions = {}) {
    this.baseDelayMs = o.baseDelayMs ?? 100;
    this.maxDelayMs = o.maxDelayMs ?? 5 * 60_000;
  }

  get length(): number {
    return this.queue.length - this.head;
  }

  add(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return; // re-queued by done()
    const waiter = this.waiters.shift();
    if (waiter) waiter(key);
    else this.queue.push(key);
  }

  /** Adds the key after `ms`; an earlier pending schedule for the same key wins. */
  addAfter(key: string, ms: number): void {
    if (this.shuttingDown) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const existing = this.timers.get(key);
    if (existing) return;
    const t = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    this.timers.set(key, t);
  }

  addRateLimited(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    const delay = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** n);
    const existing = this.timers.get(key);
    if (existing) {
      clearTimeout(existing);
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

  /** Waits for the next key; undefined once shut down. */
  async get(): Promise<string | undefined> {
    if (this.shuttingDown) return undefined;
    const key = this.head < this.queue.length ? this.queue[this.head++] : undefined;
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head); // drop what was read, now and then: amortized O(1)
      this.head = 0;
    }
    const next = key ?? (await new Promise<string | undefined>((resolve) => this.waiters.push(resolve)));
    if (next === undefined) return undefined;
    this.dirty.delete(next);
    this.processing.add(next);
    return next;
  }

  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key)) {
      this.dirty.delete(key);
      this.add(key);
    }
  }

  shutDown(): void {
    this.shuttingDown = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    for (const w of this.waiters) w(undefined);
    this.waiters = [];
  }
}
