// Leader election on a coordination.k8s.io/v1 Lease, with client-go's timings and rules:
// lease 15 s, renew deadline 10 s, retry period 2 s. Another holder's lease is respected until it has not
// changed for a full lease duration *as observed locally* (no trust in clock agreement between hosts);
// updates carry the resourceVersion, so two candidates can never both win. Losing the lease stops the
// leader (the caller exits, as controller-runtime does); a clean shutdown releases it for a fast handover.
import { isApiError } from '../lib/kube/errors.ts';
import type { RestClient } from '../lib/kube/rest.ts';
import { sleep } from '../lib/runtime/backoff.ts';
import type { Logger } from '../lib/runtime/log.ts';

interface Lease {
  apiVersion: 'coordination.k8s.io/v1';
  kind: 'Lease';
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

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

const microTime = (d = new Date()) => d.toISOString().replace(/Z$/, '000Z');

export class LeaderElector {
  private readonly o: Required<LeaderElectionOptions>;
  private observed: { record: string; at: number } | undefined;
  private current: Lease | undefined;
  private leading = false;

  constructor(o: LeaderElectionOptions) {
    this.o = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000, ...o };
  }

  get isLeader(): boolean {
    return this.leading;
  }

  private get path(): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${this.o.namespace}/leases`;
  }

  /** One attempt to acquire or renew. True when we hold the lease afterwards. */
  private async tryAcquireOrRenew(): Promise<boolean> {
    const now = new Date();
    let lease: Lease | undefined;
    try {
      lease = await this.o.rest.request<Lease>('GET', `${this.path}/${this.o.name}`);
    } catch (err) {
      if (!isApiError(err, 404)) throw err;
    }
    const mine: Lease['spec'] = {
      holderIdentity: this.o.identity,
      leaseDurationSeconds: Math.round(this.o.leaseDurationMs / 1000),
      acquireTime: microTime(now),
      renewTime: microTime(now),
      leaseTransitions: 0,
    };
    if (!lease) {
      try {
        this.current = await this.o.rest.request<Lease>('POST', this.path, {
          body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: this.o.name, namespace: this.o.namespace }, spec: mine },
        });
        return true;
      } catch (err) {
        if (isApiError(err, 409)) return false; // someone else created it first
        throw err;
      }
    }
    const record = JSON.stringify([lease.spec.holderIdentity, lease.spec.renewTime, lease.spec.leaseDurationSeconds]);
    if (!this.observed || this.observed.record !== record) this.observed = { record, at: Date.now() };
    const holder = lease.spec.holderIdentity ?? '';
    const durationMs = (lease.spec.leaseDurationSeconds ?? 15) * 1000;
    if (holder !== '' && holder !== this.o.identity && Date.now() < this.observed.at + durationMs) return false;

    const spec: Lease['spec'] =
      holder === this.o.identity
        ? { ...lease.spec, renewTime: microTime(now), leaseDurationSeconds: mine.leaseDurationSeconds }
        : { ...mine, leaseTransitions: (lease.spec.leaseTransitions ?? 0) + 1 };
    try {
      this.current = await this.o.rest.request<Lease>('PUT', `${this.path}/${this.o.name}`, { body: { ...lease, spec } });
      return true;
    } catch (err) {
      if (isApiError(err, 409)) return false; // lost an update race
      throw err;
    }
  }

  /** Resolves once this instance leads; rejects only if `signal` aborts first. */
  async acquire(signal: AbortSignal): Promise<boolean> {
    while (!signal.aborted) {
      try {
        if (await this.tryAcquireOrRenew()) {
          this.leading = true;
          this.o.log.info('became leader', { lease: `${this.o.namespace}/${this.o.name}`, identity: this.o.identity });
          return true;
        }
      } catch (err) {
        this.o.log.warn('leader election attempt failed', { error: (err as Error).message });
      }
      await sleep(this.o.retryPeriodMs * (1 + Math.random() * 0.2), signal);
    }
    return false;
  }

  /** Renews until the renew deadline passes without success (resolves 'lost') or `signal` aborts ('stopped'). */
  async hold(signal: AbortSignal): Promise<'lost' | 'stopped'> {
    let lastRenew = Date.now();
    while (!signal.aborted) {
      await sleep(this.o.retryPeriodMs, signal);
      if (signal.aborted) break;
      try {
        if (await this.tryAcquireOrRenew()) {
          lastRenew = Date.now();
          continue;
        }
        this.o.log.warn('lease taken by another holder');
        this.leading = false;
        return 'lost';
      } catch (err) {
        this.o.log.warn('lease renewal failed', { error: (err as Error).message });
      }
      if (Date.now() - lastRenew > this.o.renewDeadlineMs) {
        this.o.log.error('could not renew the lease within the renew deadline; stepping down');
        this.leading = false;
        return 'lost';
      }
    }
    return 'stopped';
  }

  /** Gives the lease up so a standby takes over at once instead of after the lease duration. */
  async release(): Promise<void> {
    if (!this.leading || !this.current) return;
    this.leading = false;
    try {
      await this.o.rest.request('PUT', `${this.path}/${this.o.name}`, {
        body: { ...this.current, spec: { ...this.current.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: microTime() } },
        timeoutMs: 5000,
      });
    } catch (err) {
      this.o.log.warn('could not release the lease', { error: (err as Error).message });
    }
  }
}
