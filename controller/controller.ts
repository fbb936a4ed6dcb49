// Wires the informer, the work queue and the reconciler: informer events enqueue names; workers take
// one name at a time (never the same name twice at once), reconcile it from the cache, and retry failures
// with per-item backoff.
import type { NodeDiskClient } from '../api/client.ts';
import { isDriveId } from '../api/names.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import { isApiError } from '../lib/kube/errors.ts';
import { Informer } from '../lib/kube/informer.ts';
import type { Logger } from '../lib/runtime/log.ts';
import type { ControllerMetrics } from './metrics.ts';
import { WorkQueue } from '../lib/kube/workqueue.ts';
import type { Reconciler } from './reconciler.ts';
import { leanNodeDisk } from './cache.ts';
import type { Nodes } from './nodes.ts';

export interface ControllerOptions {
  client: NodeDiskClient;
  reconciler: Reconciler;
  workers: number;
  log: Logger;
  metrics: ControllerMetrics;
  /** A NodeDisk was added, changed or deleted (the claims binder looks at the claims it concerns). */
  onNodeDisk?: (name: string) => void;
  /** Which Nodes exist (the node lifecycle, ADR 35): run and counted with the controller when given. */
  nodes?: Nodes;
  /** false: the informer lists in pages instead of the streaming watch-list (--no-watch-list). */
  watchList?: boolean;
}

export class Controller {
  readonly queue = new WorkQueue({ baseDelayMs: 200, maxDelayMs: 5 * 60_000 });
  readonly informer: Informer<NodeDisk>;
  private readonly o: ControllerOptions;

  constructor(o: ControllerOptions) {
    this.o = o;
    this.informer = new Informer<NodeDisk>(
      { list: (l) => o.client.list(l), listText: (l) => o.client.listText(l), watch: (w, s) => o.client.watch(w, s), watchList: (w, s) => o.client.watch(w, s) },
      {
        onUpsert: (nd, old) => {
          if (!old) o.nodes?.trackDisk(nd.spec.nodeName, 1);
          this.queue.add(nd.metadata.name ?? '');
          o.onNodeDisk?.(nd.metadata.name ?? '');
          if (!old || old.status?.node?.phase !== nd.status?.node?.phase) this.sameDriveElsewhere(nd);
        },
        onDelete: (nd) => {
          o.nodes?.trackDisk(nd.spec.nodeName, -1);
          o.onNodeDisk?.(nd.metadata.name ?? '');
          this.sameDriveElsewhere(nd);
        },
        // A relist looks at every NodeDisk again: a sweep, behind the ones something happened to (a
        // changed object of the relist is an upsert first).
        onSync: () => {
          for (const name of this.informer.cache.keys()) this.queue.add(name, 'sweep');
        },
      },
      // The cache keeps only what the controller reads (./cache.ts).
      { log: o.log.with({ loop: 'informer' }), transform: leanNodeDisk, ...(o.watchList === false ? { watchList: false } : {}) },
    );
  }

  /** The nodes whose agents report this drive present now (./reconciler.ts driveElsewhere). */
  drivePresentOn(nd: NodeDisk): string[] {
    const nodes: string[] = [];
    for (const other of this.informer.cache.values())
      if (other.spec.diskID === nd.spec.diskID && other.spec.nodeName !== nd.spec.nodeName && other.status?.node?.phase !== 'Missing' && other.status?.node?.phase !== undefined)
        nodes.push(other.spec.nodeName);
    return nodes.sort();
  }

  /** A drive appearing or going on one node changes what its NodeDisks on the others say. */
  private sameDriveElsewhere(nd: NodeDisk): void {
    if (!isDriveId(nd.spec.diskID)) return;
    for (const other of this.informer.cache.values()) if (other.spec.diskID === nd.spec.diskID && other.spec.nodeName !== nd.spec.nodeName) this.queue.add(other.metadata.name ?? '');
  }

  /** The last reconcile that failed, until a later one writes successfully. */
  private failing: { name: string; error: string } | undefined;

  /**
   * Why this controller cannot do its job right now, if it cannot: its cache is not synced, it cannot
   * watch NodeDisks, or its last write attempt failed (refused, or no answer) and no write has succeeded since.
   */
  readiness(): string | undefined {
    if (!this.informer.hasSynced) return `informer not synced${this.informer.error ? `: ${this.informer.error.message}` : ''}`;
    if (this.informer.error) return `cannot list or watch NodeDisks: ${this.informer.error.message}`;
    const nodes = this.o.nodes?.readiness();
    if (nodes) return nodes;
    if (this.failing) return `the last write failed (nodedisk ${this.failing.name}): ${this.failing.error}`;
    return undefined;
  }

  /** Runs the informer and the workers until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const informerDone = this.informer.run(signal);
    const nodesDone = this.o.nodes?.run(signal);
    signal.addEventListener('abort', () => this.queue.shutDown(), { once: true });
    const workers = Array.from({ length: this.o.workers }, () => this.worker(signal));
    await Promise.all([informerDone, nodesDone, ...workers]);
  }

  private async worker(signal: AbortSignal): Promise<void> {
    const { log, metrics } = this.o;
    while (!signal.aborted) {
      const name = await this.queue.get();
      if (name === undefined) return;
      metrics.queueDepth.set(this.queue.length);
      const nd = this.informer.cache.get(name);
      if (!nd) {
        this.queue.forget(name);
        this.queue.done(name);
        continue; // deleted: nothing to do (what this controller deletes, ADR 35, is gone from the cache too)
      }
      const end = metrics.reconcileSeconds.startTimer();
      try {
        const result = await this.o.reconciler.reconcile(nd);
        if (result.deleted) {
          this.queue.forget(name);
          continue;
        }
        // A write went through, or the object that failed needs none any more.
        if (result.wrote || this.failing?.name === name) this.failing = undefined;
        // Kept unless a watch event already brought a later version (the informer compares them).
        if (result.updated) this.informer.storeOwnWrite(result.updated);
        this.queue.forget(name);
        if (result.requeueAfterMs !== undefined) this.queue.addAfter(name, result.requeueAfterMs);
        metrics.reconciles.inc({ result: 'success' });
      } catch (err) {
        // The term ended (shutdown or lost leadership): the failure is that, not the object's.
        if (signal.aborted) return;
        if (isApiError(err, 404)) {
          this.queue.forget(name);
        } else {
          this.failing = { name, error: (err as Error).message };
          const delay = this.queue.addRateLimited(name);
          log.warn('reconcile failed; retrying', { nodeDisk: name, error: (err as Error).message, retryInMs: delay, retries: this.queue.retries(name) });
          metrics.reconciles.inc({ result: 'error' });
        }
      } finally {
        end();
        this.queue.done(name);
      }
    }
  }
}
