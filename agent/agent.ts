// The node agent: keeps its node's NodeDisks, the disk files and the marker files in step.
//
// Inputs: the disk dir (file-system events plus a slow rescan) and its node's NodeDisks (list+watch
// with a spec.nodeName field selector). One worker handles one diskID at a time, de-duplicated, so a
// burst of events costs one reconcile. Output: NodeDisk creation (identity and labels), marker files,
// and status.node by server-side apply, written only when it changed or the heartbeat is due.
import { watch as fsWatch, type FSWatcher } from 'node:fs';
import { API_VERSION, FIELD_MANAGER, KIND, LABEL_DISK, LABEL_NODE } from '../api/constants.ts';
import type { NodeDiskClient } from '../api/client.ts';
import { diskIdFromFileName, diskPath, labelValue, nodeDiskName } from '../api/names.ts';
import type { NodeDisk, NodeStatus } from '../api/v1alpha1/types.ts';
import { isApiError } from '../lib/kube/errors.ts';
import { Informer } from '../lib/kube/informer.ts';
import { Backoff, jittered, sleep } from '../lib/runtime/backoff.ts';
import type { Logger } from '../lib/runtime/log.ts';
import { discover, type Discovery } from './discover.ts';
import { ensureMarker, markerState, removeMarker } from './markers.ts';
import type { AgentMetrics } from './metrics.ts';
import { observedStatus, statusChanged } from './observe.ts';

export interface AgentOptions {
  client: NodeDiskClient;
  nodeName: string;
  /** The disk dir as this process sees it. */
  diskDir: string;
  /** The same dir as a path on the host, for spec.path (differs when mounted elsewhere in a container). */
  hostDiskDir: string;
  heartbeatMs: number;
  rescanMs: number;
  log: Logger;
  metrics: AgentMetrics;
}

export class Agent {
  private readonly o: AgentOptions;
  private readonly informer: Informer<NodeDisk>;
  private discovery: Discovery | undefined;
  private discoveryError: string | undefined;
  private readonly pending = new Set<string>();
  private scanRequested = true;
  private wake: (() => void) | undefined;
  /** When each disk's next heartbeat is due (ms since epoch), fixed with jitter at each write. */
  private readonly heartbeatDue = new Map<string, number>();
  private readonly retryBackoff = new Map<string, Backoff>();
  private readonly lastActionError = new Map<string, string>();
  private lastIgnored = '';
  private fsWatcher: FSWatcher | undefined;
  private lastLoop = Date.now();

  constructor(o: AgentOptions) {
    this.o = o;
    this.informer = new Informer<NodeDisk>(
      {
        list: (l) => o.client.list({ ...l, fieldSelector: `spec.nodeName=${o.nodeName}` }),
        watch: (w, signal) => o.client.watch({ ...w, fieldSelector: `spec.nodeName=${o.nodeName}` }, signal),
      },
      {
        onUpsert: (nd) => this.enqueue(nd.spec.diskID),
        onSync: () => {
          for (const nd of this.informer.cache.values()) this.enqueue(nd.spec.diskID);
        },
      },
      { log: o.log.with({ loop: 'informer' }) },
    );
  }

  /** Why the agent is not ready, or undefined. */
  readiness(): string | undefined {
    if (!this.informer.hasSynced) return `not yet synced with the API server${this.informer.error ? `: ${this.informer.error.message}` : ''}`;
    if (this.discoveryError) return this.discoveryError;
    if (!this.discovery) return 'disk dir not scanned yet';
    return undefined;
  }

  /** Why the agent is not healthy (its loop is stuck), or undefined. */
  liveness(): string | undefined {
    const stuckFor = Date.now() - this.lastLoop;
    return stuckFor > Math.max(120_000, this.o.rescanMs * 3) ? `work loop has not turned for ${Math.round(stuckFor / 1000)} s` : undefined;
  }

  private enqueue(diskID: string): void {
    this.pending.add(diskID);
    this.wake?.();
  }

  private requestScan(): void {
    this.scanRequested = true;
    this.wake?.();
  }

  async run(signal: AbortSignal): Promise<void> {
    const informerDone = this.informer.run(signal);
    this.watchDir();
    const rescan = setInterval(() => this.requestScan(), this.o.rescanMs);
    // The heartbeat check rides on a slow tick; it writes only for disks whose heartbeat is due.
    const tick = setInterval(() => {
      const now = Date.now();
      for (const [diskID, due] of this.heartbeatDue) if (due <= now) this.enqueue(diskID);
      this.wake?.();
    }, Math.min(this.o.heartbeatMs / 4, 30_000));
    try {
      while (!signal.aborted) {
        this.lastLoop = Date.now();
        if (this.scanRequested) {
          this.scanRequested = false;
          await this.scan();
        }
        // Disks are reconciled only against a synced cache and a completed scan; until then, wait.
        const canWork = this.informer.hasSynced && this.discovery !== undefined;
        if (canWork) {
          const batch = [...this.pending];
          this.pending.clear();
          for (const diskID of batch) {
            if (signal.aborted) break;
            await this.reconcileDisk(diskID, signal);
          }
        }
        if (!canWork || (this.pending.size === 0 && !this.scanRequested)) {
          // Sleep until woken (new work), aborted, or a second has passed; leave no timer or listener behind.
          await new Promise<void>((resolve) => {
            const done = () => {
              clearTimeout(timer);
              signal.removeEventListener('abort', done);
              this.wake = undefined;
              resolve();
            };
            const timer = setTimeout(done, 1000);
            this.wake = done;
            signal.addEventListener('abort', done, { once: true });
          });
        }
      }
    } finally {
      clearInterval(rescan);
      clearInterval(tick);
      this.fsWatcher?.close();
      await informerDone;
    }
  }

  private watchDir(): void {
    try {
      this.fsWatcher = fsWatch(this.o.diskDir, { persistent: false }, (_event, filename) => {
        // Any change of an .img file (or its marker) triggers a rescan: cheap, and it catches growth too.
        if (filename === null || filename.includes('.img')) this.requestScan();
      });
      this.fsWatcher.on('error', (err) => {
        this.o.log.warn('file-system watch failed; relying on the periodic rescan until it is re-established', { error: err.message });
        this.fsWatcher?.close();
        this.fsWatcher = undefined;
        setTimeout(() => this.watchDir(), this.o.rescanMs).unref();
      });
    } catch (err) {
      this.o.log.warn('cannot watch the disk dir; relying on the periodic rescan', { diskDir: this.o.diskDir, error: (err as Error).message });
      setTimeout(() => this.watchDir(), this.o.rescanMs).unref();
    }
  }

  private async scan(): Promise<void> {
    const end = this.o.metrics.scanSeconds.startTimer();
    let found: Discovery;
    try {
      found = await discover(this.o.diskDir, this.o.nodeName);
    } catch (err) {
      // An unreadable or missing dir says nothing about the disks: keep the last reports, say why not ready.
      const msg = `cannot read disk dir ${this.o.diskDir}: ${(err as Error).message}`;
      if (msg !== this.discoveryError) this.o.log.error(msg);
      this.discoveryError = msg;
      end();
      return;
    }
    end();
    if (this.discoveryError) {
      this.o.log.info('disk dir readable again', { diskDir: this.o.diskDir });
      // The dir may be a new one (recreated, remounted): watch it afresh.
      this.fsWatcher?.close();
      this.watchDir();
    }
    this.discoveryError = undefined;
    const ignoredKey = JSON.stringify(found.ignored);
    if (ignoredKey !== this.lastIgnored) {
      for (const f of found.ignored) this.o.log.warn('ignoring file in disk dir', { file: f.name, reason: f.reason });
      this.lastIgnored = ignoredKey;
    }
    this.o.metrics.ignoredFiles.set(found.ignored.length);
    this.discovery = found;
    // Every scan looks at every disk: files that are not NodeDisks yet, and every NodeDisk of this node,
    // so grown, removed or replaced files and markers changed by hand are all noticed. Reconciling an
    // unchanged disk costs a few lstat calls and writes nothing.
    for (const diskID of found.disks.keys()) this.enqueue(diskID);
    for (const nd of this.informer.cache.values()) this.enqueue(nd.spec.diskID);
  }

  private async reconcileDisk(diskID: string, signal: AbortSignal): Promise<void> {
    try {
      await this.reconcileDiskOnce(diskID);
      this.retryBackoff.delete(diskID);
    } catch (err) {
      const backoff = this.retryBackoff.get(diskID) ?? new Backoff({ initialMs: 500, maxMs: 60_000 });
      this.retryBackoff.set(diskID, backoff);
      const delay = backoff.next();
      this.o.log.warn('reconcile failed; retrying', { diskID, error: (err as Error).message, retryInMs: delay });
      void sleep(delay, signal).then(() => !signal.aborted && this.enqueue(diskID));
    }
  }

  private async reconcileDiskOnce(diskID: string): Promise<void> {
    const { nodeName, diskDir, hostDiskDir, client, log, metrics } = this.o;
    const name = nodeDiskName(nodeName, diskID);
    const file = this.discovery?.disks.get(diskID);
    const ignored = this.discovery?.ignored.find((f) => diskIdFromFileName(f.name) === diskID);
    let nd = this.informer.cache.get(name);
    const hostPath = diskPath(hostDiskDir, diskID);

    if (!nd) {
      if (!file) return;
      try {
        nd = await client.create(
          {
            apiVersion: API_VERSION,
            kind: KIND,
            metadata: { name, labels: { [LABEL_NODE]: labelValue(nodeName), [LABEL_DISK]: labelValue(diskID) } },
            spec: { nodeName, diskID, path: hostPath },
          },
          { fieldManager: FIELD_MANAGER.agent },
        );
        metrics.creates.inc();
        log.info('discovered disk', { nodeDisk: name, diskID, path: hostPath, sizeBytes: file.sizeBytes });
      } catch (err) {
        if (!isApiError(err, 409)) {
          metrics.apiErrors.inc({ op: 'create' });
          throw err;
        }
        nd = await client.get(name); // created by an earlier run of ours: carry on with it
      }
      this.informer.cache.set(name, nd);
    }
    if (nd.spec.nodeName !== nodeName || nd.spec.diskID !== diskID) {
      log.error('NodeDisk name collides with another disk; leaving it alone', { nodeDisk: name, diskID, existing: nd.spec });
      return;
    }

    const desired = nd.spec.desired?.state ?? 'Available';
    let actionError: string | undefined;
    if (file) {
      try {
        const changed = desired === 'Reserved' ? await ensureMarker(diskDir, diskID) : await removeMarker(diskDir, diskID);
        if (changed) {
          metrics.markerOps.inc({ op: desired === 'Reserved' ? 'create' : 'remove' });
          log.info(desired === 'Reserved' ? 'reservation marker written' : 'reservation marker removed', { nodeDisk: name, diskID });
        }
      } catch (err) {
        actionError = `cannot ${desired === 'Reserved' ? 'write' : 'remove'} the reservation marker: ${(err as Error).message}`;
        // Logged once per new problem, not at every rescan; the NodeDisk's Error phase carries it meanwhile.
        if (this.lastActionError.get(diskID) !== actionError) log.error(actionError, { nodeDisk: name, diskID });
      }
    }
    if (actionError) this.lastActionError.set(diskID, actionError);
    else if (this.lastActionError.delete(diskID)) log.info('reservation marker problem resolved', { nodeDisk: name, diskID });
    const marker = file ? await markerState(diskDir, diskID) : ({ kind: 'absent' } as const);
    let next = observedStatus({ file, marker, actionError, hostPath, previousCapacity: nd.status?.node?.capacityBytes });
    if (!file && ignored) next = { ...next, phase: 'Error', message: `disk image ${hostPath} ${ignored.reason}` };

    const current = nd.status?.node;
    const changed = statusChanged(current, next);
    const due = this.heartbeatDue.get(diskID);
    const heartbeat = !changed && (due === undefined ? heartbeatExpired(current, this.o.heartbeatMs) : due <= Date.now());
    if (!changed && !heartbeat) {
      if (due === undefined) this.scheduleHeartbeat(diskID, current);
      return;
    }
    const status: NodeStatus = { ...next, lastSeenTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') };
    try {
      const updated = await client.applyStatus(
        { apiVersion: API_VERSION, kind: KIND, metadata: { name }, status: { node: status } },
        { fieldManager: FIELD_MANAGER.agent },
      );
      this.informer.cache.set(name, updated);
    } catch (err) {
      metrics.apiErrors.inc({ op: 'status' });
      throw err;
    }
    metrics.statusWrites.inc({ cause: changed ? 'change' : 'heartbeat' });
    if (changed) log.info('reported disk status', { nodeDisk: name, diskID, phase: status.phase, capacityBytes: status.capacityBytes });
    this.heartbeatDue.set(diskID, Date.now() + jittered(this.o.heartbeatMs, 0.2));
    this.updatePhaseGauge();
  }

  private scheduleHeartbeat(diskID: string, current: NodeStatus | undefined): void {
    const last = current?.lastSeenTime ? Date.parse(current.lastSeenTime) : 0;
    this.heartbeatDue.set(diskID, last + jittered(this.o.heartbeatMs, 0.2));
  }

  private updatePhaseGauge(): void {
    const counts = new Map<string, number>();
    for (const nd of this.informer.cache.values()) {
      const p = nd.status?.node?.phase ?? 'Unknown';
      counts.set(p, (counts.get(p) ?? 0) + 1);
    }
    this.o.metrics.disks.reset();
    for (const [phase, n] of counts) this.o.metrics.disks.set({ phase }, n);
  }
}

function heartbeatExpired(current: NodeStatus | undefined, heartbeatMs: number): boolean {
  if (!current?.lastSeenTime) return true;
  return Date.now() - Date.parse(current.lastSeenTime) >= heartbeatMs;
}
