// Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules and timings (lease 15 s,
// renew deadline 10 s, retry period 2 s by default):
// - another holder's lease is respected until it has not changed for a full lease duration *as observed
//   locally* (no trust in clock agreement between hosts); updates carry the resourceVersion, so two
//   candidates can never both win;
// - leadership is confirmed by a successful acquire or renew, and lasts the renew deadline from the moment
//   that attempt *started* (the lease record it wrote cannot be older than that, so a standby, counting the
//   lease duration from when it saw that record, cannot take over before we stop: lease > renew deadline);
// - every request of an attempt is bounded by what is left of the renew deadline, so a stalled connection
//   cannot keep a leader in office;
// - time is monotonic (performance.now()): a process frozen by SIGSTOP or a VM pause finds, on waking, that
//   its leadership has run out, before anything else runs (see `isLeader`, the gate of every write).
// A clean shutdown releases the lease for a fast handover. See docs/adr/0011-conditional-writes-and-leadership.md.
// Generic: any program can elect a leader on any Lease; nothing here knows the product.
import { sleep } from '../runtime/backoff.ts';
import type { Logger } from '../runtime/log.ts';
import { isApiError } from './errors.ts';
import { type Lease, LEASES_API, type LeaseSpec, leasesPath, microTime } from './lease.ts';
import type { RestClient } from './rest.ts';

export interface LeaderElectionOptions {
  rest: RestClient;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  log: Logger;
}

/** A request was stopped because this replica cannot confirm that it leads. */
export class NotLeaderError extends Error {
  constructor() {
    super('not the leader: leadership could not be confirmed within the renew deadline');
    this.name = 'NotLeaderError';
  }
}

const monotonic = () => performance.now();

export class LeaderElector {
  private readonly o: Required<LeaderElectionOptions>;
  private observed: { record: string; at: number } | undefined;
  private current: Lease | undefined;
  /** Monotonic start of the last successful acquire or renew attempt, while we lead. */
  private confirmedAt: number | undefined;
  private lastError: string | undefined;

  constructor(o: LeaderElectionOptions) {
    this.o = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000, ...o };
  }

  /** True only while leadership is confirmed: computed from the clock at each call, never cached. */
  get isLeader(): boolean {
    return this.confirmedAt !== undefined && monotonic() - this.confirmedAt < this.o.renewDeadlineMs;
  }

  /** Why the last election attempt got no answer from the API server (undefined when it did). */
  get problem(): string | undefined {
    return this.lastError;
  }

  private get path(): string {
    return leasesPath(this.o.namespace);
  }

  /**
   * One attempt to acquire or renew, every request bounded by `deadline` (monotonic ms). True when we
   * hold the lease afterwards.
   */
  private async tryAcquireOrRenew(deadline: number, signal: AbortSignal): Promise<boolean> {
    const bounded = () => {
      const left = Math.floor(deadline - monotonic());
      if (left <= 0) throw new Error('the renew deadline passed during the attempt');
      return { timeoutMs: left, signal };
    };
    const now = new Date();
    let lease: Lease | undefined;
    try {
      lease = await this.o.rest.request<Lease>('GET', `${this.path}/${this.o.name}`, bounded());
    } catch (err) {
      if (!isApiError(err, 404)) throw err;
    }
    const mine: LeaseSpec = {
      holderIdentity: this.o.identity,
      // Rounded up: rounding down could let a standby take over before our renew deadline.
      leaseDurationSeconds: Math.ceil(this.o.leaseDurationMs / 1000),
      acquireTime: microTime(now),
      renewTime: microTime(now),
      leaseTransitions: 0,
    };
    if (!lease) {
      try {
        this.current = await this.o.rest.request<Lease>('POST', this.path, {
          body: { apiVersion: LEASES_API, kind: 'Lease', metadata: { name: this.o.name, namespace: this.o.namespace }, spec: mine },
          ...bounded(),
        });
        return true;
      } catch (err) {
        if (isApiError(err, 409)) return false; // someone else created it first
        throw err;
      }
    }
    const record = JSON.stringify([lease.spec?.holderIdentity, lease.spec?.renewTime, lease.spec?.leaseDurationSeconds]);
    if (!this.observed || this.observed.record !== record) this.observed = { record, at: monotonic() };
    const holder = lease.spec?.holderIdentity ?? '';
    const durationMs = (lease.spec?.leaseDurationSeconds ?? 15) * 1000;
    if (holder !== '' && holder !== this.o.identity && monotonic() < this.observed.at + durationMs) return false;

    const spec: LeaseSpec =
      holder === this.o.identity
        ? { ...lease.spec, renewTime: microTime(now), leaseDurationSeconds: mine.leaseDurationSeconds }
        : { ...mine, leaseTransitions: (lease.spec?.leaseTransitions ?? 0) + 1 };
    try {
      this.current = await this.o.rest.request<Lease>('PUT', `${this.path}/${this.o.name}`, { body: { ...lease, spec }, ...bounded() });
      return true;
    } catch (err) {
      if (isApiError(err, 409)) return false; // lost an update race
      throw err;
    }
  }

  /** Resolves true once this instance leads; false if `signal` aborts first. */
  async acquire(signal: AbortSignal): Promise<boolean> {
    while (!signal.aborted) {
      const started = monotonic();
      try {
        const won = await this.tryAcquireOrRenew(started + this.o.renewDeadlineMs, signal);
        this.lastError = undefined;
        if (won) {
          this.confirmedAt = started;
          this.o.log.info('became leader', { lease: `${this.o.namespace}/${this.o.name}`, identity: this.o.identity });
          return true;
        }
      } catch (err) {
        if (signal.aborted) break;
        this.lastError = `cannot reach the lease ${this.o.namespace}/${this.o.name}: ${(err as Error).message}`;
        this.o.log.warn('leader election attempt failed', { error: (err as Error).message });
      }
      await sleep(this.o.retryPeriodMs * (1 + Math.random() * 0.2), signal);
    }
    return false;
  }

  /**
   * Renews every retry period while leading. Resolves 'lost' as soon as leadership cannot be confirmed
   * (no successful renewal within the renew deadline, or another holder), 'stopped' when `signal` aborts.
   */
  async hold(signal: AbortSignal): Promise<'lost' | 'stopped'> {
    while (this.confirmedAt !== undefined) {
      const deadline = this.confirmedAt + this.o.renewDeadlineMs;
      await sleep(Math.max(0, Math.min(this.o.retryPeriodMs, deadline - monotonic())), signal);
      if (signal.aborted) return 'stopped';
      if (!this.isLeader) return this.stepDown('could not renew the lease within the renew deadline; stepping down');
      const started = monotonic();
      try {
        const renewed = await this.tryAcquireOrRenew(deadline, signal);
        this.lastError = undefined;
        if (!renewed) return this.stepDown('lease taken by another holder; stepping down');
        this.confirmedAt = started;
      } catch (err) {
        if (signal.aborted) return 'stopped';
        this.lastError = `cannot renew the lease ${this.o.namespace}/${this.o.name}: ${(err as Error).message}`;
        this.o.log.warn('lease renewal failed', { error: (err as Error).message });
      }
    }
    return 'lost';
  }

  private stepDown(why: string): 'lost' {
    this.confirmedAt = undefined;
    this.o.log.error(why);
    return 'lost';
  }

  /** Gives the lease up so a standby takes over at once instead of after the lease duration. */
  async release(): Promise<void> {
    const leading = this.isLeader;
    this.confirmedAt = undefined;
    if (!leading || !this.current) return;
    try {
      // Guarded by the resourceVersion of our last write: a lease someone else took since is left alone.
      await this.o.rest.request('PUT', `${this.path}/${this.o.name}`, {
        body: { ...this.current, spec: { ...this.current.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: microTime() } },
        timeoutMs: Math.min(5000, this.o.renewDeadlineMs),
      });
    } catch (err) {
      this.o.log.warn('could not release the lease', { error: (err as Error).message });
    }
  }
}
