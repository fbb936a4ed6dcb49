// Exponential backoff with jitter, as client-go's wait.Backoff: each failure doubles the delay up to a cap,
// and jitter spreads retries so many agents do not hit a recovering API server in step.
export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  factor?: number;
  /** 0..1: the delay is multiplied by a random factor in [1, 1 + jitter]. */
  jitter?: number;
}

export class Backoff {
  private attempt = 0;
  private readonly o: Required<BackoffOptions>;
  constructor(o: BackoffOptions) {
    this.o = { factor: 2, jitter: 0.2, ...o };
  }
  next(): number {
    const base = Math.min(this.o.maxMs, this.o.initialMs * this.o.factor ** this.attempt);
    this.attempt++;
    return Math.round(base * (1 + Math.random() * this.o.jitter));
  }
  reset(): void {
    this.attempt = 0;
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** A duration with up to `fraction` random extra, so periodic work of many processes spreads out. */
export function jittered(ms: number, fraction = 0.1): number {
  return Math.round(ms * (1 + Math.random() * fraction));
}
