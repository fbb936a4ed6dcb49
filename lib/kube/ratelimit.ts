// A client-side token bucket, as client-go's flowcontrol.NewTokenBucketRateLimiter(qps, burst): it starts
// full (`burst` requests leave at once), then refills at `qps` tokens a second. Waiters are served in the
// order they asked (each takes a reservation on the future), so a busy worker cannot starve another.
// One bucket is shared by every request of a client (all the controller's workers, its informer, its
// events): it bounds what the process as a whole sends, a fuse against a runaway loop.
export interface RateLimit {
  qps: number;
  burst: number;
}

export class TokenBucket {
  readonly qps: number;
  readonly burst: number;
  private tokens: number;
  private last: number;
  private readonly now: () => number;

  constructor(limit: RateLimit, now: () => number = () => performance.now()) {
    if (!(limit.qps > 0) || !Number.isFinite(limit.qps)) throw new Error(`rate limit: qps must be a positive number, got ${limit.qps}`);
    if (!Number.isInteger(limit.burst) || limit.burst < 1) throw new Error(`rate limit: burst must be a positive integer, got ${limit.burst}`);
    this.qps = limit.qps;
    this.burst = limit.burst;
    this.tokens = limit.burst;
    this.now = now;
    this.last = now();
  }

  /**
   * Takes one token and returns how long (ms) the caller must wait before using it: 0 while the burst
   * lasts. Tokens may go negative: that is the queue of reservations already handed out.
   */
  reserve(): number {
    this.refill();
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : (-this.tokens * 1000) / this.qps;
  }

  /** Takes a token if one is there now; false (and nothing taken) otherwise. */
  tryTake(): boolean {
    this.refill();
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  /** How long until a token is there (0: now). */
  msUntilToken(): number {
    this.refill();
    return this.tokens >= 1 ? 0 : ((1 - this.tokens) * 1000) / this.qps;
  }

  private refill(): void {
    const t = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) * this.qps) / 1000);
    this.last = t;
  }

  /** Gives back a reservation that will not be used (its request was cancelled while waiting). */
  private cancel(): void {
    this.tokens = Math.min(this.burst, this.tokens + 1);
  }

  /** Resolves when the caller may send; rejects with the signal's reason if it aborts first. */
  async wait(signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    const ms = this.reserve();
    if (ms <= 0) return;
    await new Promise<void>((resolve, reject) => {
      const done = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const timer = setTimeout(done, ms);
      const onAbort = () => {
        clearTimeout(timer);
        this.cancel();
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
