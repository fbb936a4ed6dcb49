// The agent's liveness signal (ADR 24, the kubelet's node lease of KEP-589): one Lease per node,
// `node-disks-agent-<node>` in the system namespace, renewed every heartbeat period. One write per period
// however many disks the node has; status.node is written only when a disk's report changes.
//
// A renewal is one PUT of the last Lease we wrote, carrying its resourceVersion, as the kubelet does. A
// 409 (someone else wrote it: a person, a restore) is answered by one GET and one more PUT; a 404 (it was
// deleted, or this is the node's first agent) by a POST. The Lease lasts LEASE_PERIODS periods, so three
// renewals in a row can fail before the controller calls the node's disks stale.
//
// The Lease is owned by its Node (an ownerReference to the Node's UID, once the agent knows it: ADR 35),
// so the garbage collector deletes it with the Node: a deleted node leaves no heartbeat behind.
import { HEARTBEAT_LABEL_VALUE, LABEL_HEARTBEAT, LEASE_PERIODS, heartbeatLeaseName } from '../api/heartbeat-lease.ts';
import { LEASES_API, leasesPath, microTime, type Lease } from '../lib/kube/lease.ts';
import { isApiError } from '../lib/kube/errors.ts';
import type { RestClient } from '../lib/kube/rest.ts';
import { Backoff, sleep } from '../lib/runtime/backoff.ts';
import type { Logger } from '../lib/runtime/log.ts';

export interface HeartbeatOptions {
  rest: RestClient;
  namespace: string;
  nodeName: string;
  /** How often the Lease is renewed; it lasts LEASE_PERIODS times this. */
  periodMs: number;
  log: Logger;
  /** Called after each attempt: 'renewed' (one write went through) or 'failed'. */
  onResult?: (result: 'renewed' | 'failed') => void;
  /** This node's UID, once known: the Lease's owner. */
  nodeUID?: () => string | undefined;
}

export class NodeHeartbeat {
  readonly name: string;
  private readonly o: HeartbeatOptions;
  /** The Lease as we last wrote or read it: what the next renewal PUTs. */
  private lease: Lease | undefined;
  private failing: string | undefined;

  constructor(o: HeartbeatOptions) {
    this.o = o;
    this.name = heartbeatLeaseName(o.nodeName);
  }

  /** Why the last renewal failed, until one succeeds. */
  get problem(): string | undefined {
    return this.failing;
  }

  private get path(): string {
    return leasesPath(this.o.namespace);
  }

  private desired(base: Lease | undefined): Lease {
    return {
      apiVersion: LEASES_API,
      kind: 'Lease',
      metadata: {
        ...(base?.metadata ?? {}),
        name: this.name,
        namespace: this.o.namespace,
        labels: { ...(base?.metadata.labels ?? {}), [LABEL_HEARTBEAT]: HEARTBEAT_LABEL_VALUE },
        ...this.owner(base),
      },
      spec: {
        ...(base?.spec ?? {}),
        holderIdentity: this.o.nodeName,
        // Rounded up: a lease shorter than LEASE_PERIODS periods would expire between two on-time renewals.
        leaseDurationSeconds: Math.ceil((LEASE_PERIODS * this.o.periodMs) / 1000),
        renewTime: microTime(),
      },
    };
  }

  /** The Node as the Lease's only owner, when its UID is known; else what the Lease had. */
  private owner(base: Lease | undefined): Pick<Lease['metadata'], 'ownerReferences'> {
    const uid = this.o.nodeUID?.();
    if (uid === undefined) return base?.metadata.ownerReferences ? { ownerReferences: base.metadata.ownerReferences } : {};
    return { ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: this.o.nodeName, uid }] };
  }

  /** One renewal: normally a single PUT; see the header for 409 and 404. */
  async renew(signal?: AbortSignal): Promise<void> {
    const init = signal ? { signal } : {};
    if (!this.lease) {
      try {
        this.lease = await this.o.rest.request<Lease>('GET', `${this.path}/${this.name}`, init);
      } catch (err) {
        if (!isApiError(err, 404)) throw err;
        await this.create(init);
        return;
      }
    }
    try {
      this.lease = await this.put(this.lease, init);
    } catch (err) {
      if (isApiError(err, 404)) {
        await this.create(init);
      } else if (isApiError(err, 409)) {
        // Written by someone else since: renew on top of what is there now.
        this.lease = await this.o.rest.request<Lease>('GET', `${this.path}/${this.name}`, init);
        this.lease = await this.put(this.lease, init);
      } else {
        // Unknown state (a timeout may have written it): read it afresh next time.
        this.lease = undefined;
        throw err;
      }
    }
  }

  private async put(base: Lease, init: { signal?: AbortSignal }): Promise<Lease> {
    const body = this.desired(base);
    delete body.metadata.managedFields;
    return await this.o.rest.request<Lease>('PUT', `${this.path}/${this.name}`, { body, ...init });
  }

  private async create(init: { signal?: AbortSignal }): Promise<void> {
    const body = this.desired(undefined);
    try {
      this.lease = await this.o.rest.request<Lease>('POST', this.path, { body, ...init });
    } catch (err) {
      if (!isApiError(err, 409)) throw err;
      // Created meanwhile (an agent restarting fast): renew that one.
      this.lease = await this.o.rest.request<Lease>('GET', `${this.path}/${this.name}`, init);
      this.lease = await this.put(this.lease, init);
    }
  }

  /**
   * Renews every period while `canRenew()` says the agent is doing its job (synced, disk dir readable: a
   * renewal says "my reports are current"), until `signal` aborts. A failed renewal is retried sooner,
   * with backoff, never later than the next period.
   */
  async run(signal: AbortSignal, canRenew: () => boolean): Promise<void> {
    const backoff = new Backoff({ initialMs: 200, maxMs: this.o.periodMs });
    let waitMs = 0;
    while (!signal.aborted) {
      await sleep(waitMs, signal);
      if (signal.aborted) return;
      if (!canRenew()) {
        waitMs = Math.min(1000, this.o.periodMs);
        continue;
      }
      const started = Date.now();
      try {
        await this.renew(signal);
        if (this.failing) this.o.log.info('heartbeat Lease renewed again', { lease: `${this.o.namespace}/${this.name}` });
        this.failing = undefined;
        backoff.reset();
        this.o.onResult?.('renewed');
        waitMs = Math.max(0, this.o.periodMs - (Date.now() - started));
      } catch (err) {
        if (signal.aborted) return;
        const why = (err as Error).message;
        if (why !== this.failing) this.o.log.warn('cannot renew the heartbeat Lease; retrying', { lease: `${this.o.namespace}/${this.name}`, error: why });
        this.failing = why;
        this.o.onResult?.('failed');
        waitMs = backoff.next();
      }
    }
  }
}
