// The node agent: keeps its node's NodeDisks, the disk files and the marker files in step. This file wires
// the pieces and runs the one work loop:
// - inputs: the disk dir (./disk-dir.ts: file-system events plus a slow rescan) and its node's NodeDisks
//   (an informer, list+watch with a spec.nodeName field selector);
// - one work queue of diskIDs (lib/kube/workqueue.ts), handled by one worker, one disk at a time,
//   de-duplicated, so a burst of events costs one reconcile; disks something happened to (a file event, a
//   NodeDisk event, a retry) go before a rescan's or relist's sweep. The full scan is an item of the same
//   queue, so two pieces of work never race on one disk or on the last discovery;
// - per disk, ./reconcile-disk.ts: NodeDisk creation, marker, finalizer (ADR 12), status.node;
// - ./aliases.ts: NodeDisks of this node under a non-canonical name; ./readiness.ts: /readyz and /healthz;
// - liveness is one heartbeat Lease per node (./heartbeat.ts, ADR 24), not a periodic write per disk.
import type { NodeDiskClient } from '../api/client.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import { isApiError } from '../lib/kube/errors.ts';
import { Informer } from '../lib/kube/informer.ts';
import { WorkQueue } from '../lib/kube/workqueue.ts';
import type { Logger } from '../lib/runtime/log.ts';
import { Aliases } from './aliases.ts';
import { DEFAULT_BY_ID_DIR } from '../api/constants.ts';
import { isDriveId } from '../api/names.ts';
import type { Discovery } from './discover.ts';
import { DiskDir } from './disk-dir.ts';
import type { DriveSelector } from './drive-select.ts';
import { NodeDrives } from './node-drives.ts';
import { NodeHeartbeat } from './heartbeat.ts';
import { tokenNodeIdentity } from './node-identity.ts';
import { Backoff, sleep } from '../lib/runtime/backoff.ts';
import type { AgentMetrics } from './metrics.ts';
import { describe, liveness, mayRenew, readiness, type AgentState } from './readiness.ts';
import { reconcileDisk, type DiskCache, type ReconcileContext } from './reconcile-disk.ts';

export interface AgentOptions {
  client: NodeDiskClient;
  nodeName: string;
  /** The disk dir as this process sees it. */
  diskDir: string;
  /** The same dir as a path on the host, for spec.path (differs when mounted elsewhere in a container). */
  hostDiskDir: string;
  /** How often the node's heartbeat Lease is renewed (it lasts LEASE_PERIODS times this). */
  heartbeatMs: number;
  /** The system namespace, where the heartbeat Lease lives. */
  leaseNamespace: string;
  rescanMs: number;
  log: Logger;
  metrics: AgentMetrics;
  /** false: the informer lists in pages instead of the streaming watch-list (--no-watch-list). */
  watchList?: boolean;
  /** The drives the admin chose (--drive), and where their by-id names are; none: images only. */
  drives?: { selectors: DriveSelector[]; byIdDir: string; hostByIdDir?: string; sysRoot?: string; mountInfo?: string };
}

/** The queue item that stands for a full scan of the disk dir: no diskID contains '/' (api/names.ts). */
const SCAN = '/scan';

/**
 * What the agent keeps of a NodeDisk: all but metadata.managedFields, which it never reads (its writes are
 * server-side applies and merge patches that do not need them) and which are about half of each object.
 * The informer's transform, so it applies to list pages, watch events and the agent's own writes alike.
 * In place: the parsed object is the informer's own. (The controller keeps much less of each object, for
 * other reads: controller/cache.ts.)
 */
function dropManagedFields(nd: NodeDisk): NodeDisk {
  delete nd.metadata.managedFields;
  return nd;
}

export class Agent {
  private readonly o: AgentOptions;
  private readonly informer: Informer<NodeDisk>;
  private readonly queue = new WorkQueue({ baseDelayMs: 500, maxDelayMs: 60_000, jitter: 0.2 });
  private readonly dir: DiskDir;
  private readonly drives: NodeDrives;
  private readonly aliases: Aliases;
  private readonly heartbeat: NodeHeartbeat;
  private readonly reconcile: ReconcileContext;
  /** Writes the API server refused (401/403), by diskID, until a reconcile of that disk succeeds. */
  private readonly refused = new Map<string, string>();
  /** Disks taken from the queue while the disk dir could not be read: queued again after the next scan. */
  private readonly deferred = new Set<string>();
  /** Why this node's UID is not known yet, while it is not (./node-identity.ts). */
  private identityProblem: string | undefined = 'not learnt yet';
  /** When the work loop took its current item; undefined while it waits for one. */
  private busySince: number | undefined;
  private synced!: () => void;
  private readonly firstSync = new Promise<void>((resolve) => (this.synced = resolve));

  constructor(o: AgentOptions) {
    this.o = o;
    const fieldSelector = `spec.nodeName=${o.nodeName}`;
    this.informer = new Informer<NodeDisk>(
      {
        list: (l) => o.client.list({ ...l, fieldSelector }),
        watch: (w, signal) => o.client.watch({ ...w, fieldSelector }, signal),
        watchList: (w, signal) => o.client.watch({ ...w, fieldSelector }, signal),
      },
      {
        onUpsert: (nd) => {
          this.aliases.track(nd, true);
          this.queue.add(nd.spec.diskID);
        },
        // A NodeDisk gone (released and let go, or deleted unreserved): rediscover its disk at once.
        onDelete: (nd) => {
          this.aliases.track(nd, false);
          this.queue.add(nd.spec.diskID);
        },
        onSync: () => {
          for (const nd of this.informer.cache.values()) this.queue.add(nd.spec.diskID, 'sweep');
          this.synced(); // the first scan waits for this, even on a node with no NodeDisk yet
        },
      },
      { log: o.log.with({ loop: 'informer' }), transform: dropManagedFields, ...(o.watchList === false ? { watchList: false } : {}) },
    );
    const cache: DiskCache = {
      get: (name) => this.informer.cache.get(name),
      storeOwnWrite: (nd) => this.informer.storeOwnWrite(nd),
      forget: (name) => this.informer.cache.delete(name),
      values: () => this.informer.cache.values(),
    };
    this.dir = new DiskDir({
      diskDir: o.diskDir,
      nodeName: o.nodeName,
      rescanMs: o.rescanMs,
      log: o.log,
      metrics: o.metrics,
      holderOf: (objectName) => this.holderOf(objectName),
      onDisk: (diskID, priority) => this.queue.add(diskID, priority),
      onScanWanted: (priority) => this.queue.add(SCAN, priority),
    });
    this.drives = new NodeDrives({
      selectors: o.drives?.selectors ?? [],
      byIdDir: o.drives?.byIdDir ?? DEFAULT_BY_ID_DIR,
      hostByIdDir: o.drives?.hostByIdDir ?? o.drives?.byIdDir ?? DEFAULT_BY_ID_DIR,
      sysRoot: o.drives?.sysRoot ?? '/sys',
      mountInfo: o.drives?.mountInfo ?? '/proc/self/mountinfo',
      log: o.log.with({ loop: 'drives' }),
      onChange: () => this.queue.add(SCAN, 'event'),
    });
    this.aliases = new Aliases({ client: o.client, nodeName: o.nodeName, cache, log: o.log, metrics: o.metrics });
    this.reconcile = {
      client: o.client,
      nodeName: o.nodeName,
      diskDir: o.diskDir,
      hostDiskDir: o.hostDiskDir,
      cache,
      log: o.log,
      metrics: o.metrics,
      actionErrors: new Map(),
      reportAliases: (diskID, canonical) => this.aliases.report(diskID, canonical),
      sysRoot: o.drives?.sysRoot ?? '/sys',
      lookAtDrive: async (diskID) => {
        await this.drives.scan();
        return this.drives.get(diskID);
      },
    };
    this.heartbeat = new NodeHeartbeat({
      rest: o.client.rest,
      namespace: o.leaseNamespace,
      nodeName: o.nodeName,
      periodMs: o.heartbeatMs,
      log: o.log.with({ loop: 'heartbeat' }),
      onResult: (result) => o.metrics.heartbeats.inc({ result }),
      nodeUID: () => this.reconcile.nodeUID,
    });
  }

  private state(): AgentState {
    return {
      synced: this.informer.hasSynced,
      informerError: this.informer.error,
      scanned: this.dir.discovery !== undefined,
      dirProblem: this.dir.problem,
      refused: this.refused,
      heartbeat: { lease: `${this.o.leaseNamespace}/${this.heartbeat.name}`, problem: this.heartbeat.problem },
      stuck: this.liveness(),
      identityProblem: this.identityProblem,
    };
  }

  /** Why the agent is not ready, or undefined (./readiness.ts). */
  readiness(): string | undefined {
    return readiness(this.state());
  }

  /** Why the agent is not healthy (its loop is stuck), or undefined. */
  liveness(): string | undefined {
    return liveness(this.busySince, Math.max(120_000, this.o.rescanMs * 3));
  }

  async run(signal: AbortSignal): Promise<void> {
    const informerDone = this.informer.run(signal);
    const stop = () => this.queue.shutDown();
    signal.addEventListener('abort', stop, { once: true });
    this.dir.start();
    this.drives.start();
    // Its own loop, so that a long sweep of disks never delays a renewal.
    const beating = this.heartbeat.run(signal, () => mayRenew(this.state()));
    try {
      // The first scan waits for the NodeDisks: which of two files whose names make one NodeDisk name keeps
      // it depends on which one a NodeDisk already names (nothing is reconciled before the sync anyway).
      await Promise.race([this.firstSync, new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))]);
      // Which machine this is, before any disk is looked at: another machine's NodeDisks must not be
      // taken for this one's (ADR 35).
      await this.learnIdentity(signal);
      if (!signal.aborted) await this.turn(SCAN, signal);
      for (let key = await this.queue.get(); key !== undefined; key = await this.queue.get()) {
        try {
          await this.turn(key, signal);
        } finally {
          this.queue.done(key);
        }
      }
    } finally {
      signal.removeEventListener('abort', stop);
      this.queue.shutDown();
      this.dir.close();
      this.drives.close();
      await informerDone;
      await beating;
    }
  }

  /** Learns this node's UID from the agent's token, retrying with backoff until it is known or `signal` aborts. */
  private async learnIdentity(signal: AbortSignal): Promise<void> {
    const backoff = new Backoff({ initialMs: 500, maxMs: 30_000 });
    while (!signal.aborted) {
      try {
        const id = await tokenNodeIdentity(this.o.client.rest, signal);
        if (id.node !== undefined && id.node !== this.o.nodeName) throw new Error(`the agent's token is bound to node ${id.node}, not to ${this.o.nodeName}`);
        if (id.uid === undefined) this.o.log.warn("the agent's token names no Node UID: a machine registered again under this node's name cannot be told from the last one");
        else this.o.log.info('node identity', { nodeUID: id.uid });
        this.reconcile.nodeUID = id.uid;
        this.identityProblem = undefined;
        return;
      } catch (err) {
        if (signal.aborted) return;
        this.identityProblem = describe(err as Error);
        const delay = backoff.next();
        this.o.log.warn("cannot learn this node's UID from the agent's token; retrying", { error: this.identityProblem, retryInMs: delay });
        await sleep(delay, signal);
      }
    }
  }

  /** One piece of work: a full scan, or one disk. */
  private async turn(key: string, signal: AbortSignal): Promise<void> {
    this.busySince = Date.now();
    try {
      if (key === SCAN) await this.scan();
      else await this.work(key, signal);
    } finally {
      this.busySince = undefined;
    }
  }

  private async scan(): Promise<void> {
    if (!(await this.dir.scan())) return;
    await this.drives.scan();
    for (const diskID of this.drives.diskIDs()) this.queue.add(diskID, 'sweep');
    // Every scan looks at every disk: files that are not NodeDisks yet (queued by the scan), and every
    // NodeDisk of this node, so grown, removed or replaced files and markers changed by hand are all
    // noticed. Reconciling an unchanged disk costs a few lstat calls and writes nothing.
    for (const diskID of this.deferred) this.queue.add(diskID);
    this.deferred.clear();
    for (const nd of this.informer.cache.values()) this.queue.add(nd.spec.diskID, 'sweep');
  }

  private async work(diskID: string, signal: AbortSignal): Promise<void> {
    // Disks are reconciled only against a completed, current scan. While the disk dir cannot be read the
    // last reports stand: no marker change, no status, and no heartbeat renewal (it would claim a look the
    // agent did not take). Readiness says why.
    const discovery = this.dir.discovery;
    if (discovery === undefined || this.dir.problem !== undefined) {
      this.deferred.add(diskID);
      return;
    }
    if (isDriveId(diskID)) {
      // A file event named the drive (its marker, its wipe's request, progress or answer, its stage's
      // record): the drives are scanned again first, as an image named by an event is looked at again. The
      // last scan may be older than what the event tells of: after a wipe, the partitions the tenant made
      // are gone from the kernel, and a report from that scan would refuse the drive for them.
      if (this.dir.takeChanged(diskID)) await this.drives.scan();
    } else if (this.dir.takeChanged(diskID)) {
      // A file event named it: look at that file again first. Its name may be another disk's to keep.
      const owner = await this.dir.rediscover(diskID);
      if (owner !== undefined && owner !== diskID) this.queue.add(owner);
    }
    if (signal.aborted) return;
    try {
      const drive = isDriveId(diskID) ? this.drives.get(diskID) : undefined;
      const view: Discovery = isDriveId(diskID) ? { disks: new Map(drive ? [[diskID, drive]] : []), ignored: [] } : discovery;
      const result = await reconcileDisk(this.reconcile, diskID, view);
      this.queue.forget(diskID);
      this.refused.delete(diskID);
      if (result.again) this.queue.add(diskID);
    } catch (err) {
      if (isApiError(err, 401) || isApiError(err, 403)) this.refused.set(diskID, describe(err as Error));
      const delay = this.queue.addRateLimited(diskID);
      this.o.log.warn('reconcile failed; retrying', { diskID, error: (err as Error).message, retryInMs: delay });
    }
  }

  /** The diskID of this node's NodeDisk of that name, if the agent knows one. */
  private holderOf(objectName: string): string | undefined {
    const nd = this.informer.cache.get(objectName);
    return nd && nd.spec.nodeName === this.o.nodeName ? nd.spec.diskID : undefined;
  }
}
