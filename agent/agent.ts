// The node agent: keeps its node's NodeDisks, the disk files and the marker files in step.
//
// Inputs: the disk dir (file-system events plus a slow rescan) and its node's NodeDisks (list+watch
// with a spec.nodeName field selector). A file-system event names a file: that one file is looked at
// again and its disk reconciled at once; the full rescan (every file, every NodeDisk) is a safety net
// for missed events, run at its slow period. One worker handles one diskID at a time, de-duplicated, so
// a burst of events costs one reconcile; disks something happened to go before the rescan's sweep.
// Output: NodeDisk creation (identity and labels), marker files, the reservation-protection finalizer
// (ADR 12), and status.node by server-side apply, written only when it changed. Liveness is one heartbeat
// Lease per node (./heartbeat.ts, ADR 24), not a periodic write per disk.
import { watch as fsWatch, type FSWatcher } from 'node:fs';
import { API_VERSION, DISK_SUFFIX, FIELD_MANAGER, FINALIZER, KIND, LABEL_DISK, LABEL_NODE, RECOVERED_OWNER } from '../api/constants.ts';
import type { NodeDiskClient } from '../api/client.ts';
import { diskIdFromFileName, diskIdProblem, diskPath, labelValue, nodeDiskName } from '../api/names.ts';
import type { NodeDisk, NodeStatus } from '../api/v1alpha1/types.ts';
import { ApiError, isApiError } from '../lib/kube/errors.ts';
import { Informer } from '../lib/kube/informer.ts';
import { Backoff, sleep } from '../lib/runtime/backoff.ts';
import type { Logger } from '../lib/runtime/log.ts';
import { collision, discover, diskIdOfEntry, inspectDiskFile, type Discovery, type IgnoredFile } from './discover.ts';
import { ensureMarker, markerState, removeMarker } from './markers.ts';
import type { AgentMetrics } from './metrics.ts';
import { observedStatus, statusChanged } from './observe.ts';
import { NodeHeartbeat } from './heartbeat.ts';
import { addProtection, isProtected, removeProtection } from './protection.ts';

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
}

export class Agent {
  private readonly o: AgentOptions;
  private readonly informer: Informer<NodeDisk>;
  private discovery: Discovery | undefined;
  private discoveryError: string | undefined;
  /** Disks something happened to (a file event, a NodeDisk event, a retry): reconciled first. */
  private readonly urgent = new Set<string>();
  /** Disks a full rescan or a relist asks to look at: reconciled when nothing is urgent. */
  private readonly sweep = new Set<string>();
  /** Disks whose file a file-system event named, to be looked at again before they are reconciled. */
  private readonly changedFiles = new Set<string>();
  private scanRequested = true;
  private wake: (() => void) | undefined;
  private readonly heartbeat: NodeHeartbeat;
  private readonly retryBackoff = new Map<string, Backoff>();
  private readonly lastActionError = new Map<string, string>();
  /**
   * Names of this node's NodeDisks that are not the canonical name of their disk, by diskID: kept from the
   * informer's events so that reconciling a disk does not look through every NodeDisk of the node for them.
   */
  private readonly aliases = new Map<string, Set<string>>();
  /** Writes the API server refused (401/403), by diskID, until a reconcile of that disk succeeds. */
  private readonly refused = new Map<string, string>();
  /** Ignored files already logged, with the reason logged: a file is named again only when its reason changes. */
  private readonly reportedIgnored = new Map<string, string>();
  /** A full scan asked for by file events, run once the burst is over (see requestScanSoon). */
  private scanSoon: { timer: NodeJS.Timeout; firstAt: number } | undefined;
  private fsWatcher: FSWatcher | undefined;
  private lastLoop = Date.now();

  constructor(o: AgentOptions) {
    this.o = o;
    this.heartbeat = new NodeHeartbeat({
      rest: o.client.rest,
      namespace: o.leaseNamespace,
      nodeName: o.nodeName,
      periodMs: o.heartbeatMs,
      log: o.log.with({ loop: 'heartbeat' }),
      onResult: (result) => o.metrics.heartbeats.inc({ result }),
    });
    this.informer = new Informer<NodeDisk>(
      {
        list: async (l) => {
          const page = await o.client.list({ ...l, fieldSelector: `spec.nodeName=${o.nodeName}` });
          for (const nd of page.items) lean(nd);
          return page;
        },
        watch: async function* (w, signal) {
          for await (const ev of o.client.watch({ ...w, fieldSelector: `spec.nodeName=${o.nodeName}` }, signal)) {
            if (ev.type !== 'ERROR') lean(ev.object);
            yield ev;
          }
        },
      },
      {
        onUpsert: (nd) => {
          this.trackAlias(nd, true);
          this.enqueue(nd.spec.diskID);
        },
        // A NodeDisk gone (released and let go, or deleted unreserved): rediscover its disk at once.
        onDelete: (nd) => {
          this.trackAlias(nd, false);
          this.enqueue(nd.spec.diskID);
        },
        onSync: () => {
          for (const nd of this.informer.cache.values()) this.enqueue(nd.spec.diskID, this.sweep);
          this.wake?.(); // the first scan waits for this, even on a node with no NodeDisk yet
        },
      },
      { log: o.log.with({ loop: 'informer' }) },
    );
  }

  /**
   * Why the agent is not ready, or undefined: ready means able to do its job now, i.e. synced with the API
   * server and still listing and watching, its disk dir readable, and its last writes not refused.
   */
  readiness(): string | undefined {
    if (!this.informer.hasSynced) return `not yet synced with the API server${this.informer.error ? `: ${describe(this.informer.error)}` : ''}`;
    if (this.informer.error) return `cannot list or watch NodeDisks: ${describe(this.informer.error)}`;
    if (this.discoveryError) return this.discoveryError;
    if (!this.discovery) return 'disk dir not scanned yet';
    if (this.refused.size > 0) {
      const [diskID, why] = this.refused.entries().next().value!;
      return `the API server refused ${this.refused.size === 1 ? 'a write' : `writes for ${this.refused.size} disks`} of this agent (disk ${diskID}: ${why})`;
    }
    if (this.heartbeat.problem) return `cannot renew the heartbeat Lease ${this.o.leaseNamespace}/${this.heartbeat.name}: ${this.heartbeat.problem}`;
    return undefined;
  }

  /** Why the agent is not healthy (its loop is stuck), or undefined. */
  liveness(): string | undefined {
    const stuckFor = Date.now() - this.lastLoop;
    return stuckFor > Math.max(120_000, this.o.rescanMs * 3) ? `work loop has not turned for ${Math.round(stuckFor / 1000)} s` : undefined;
  }

  /**
   * Whether a heartbeat may say "this node's reports are current": synced and still listing and watching
   * its NodeDisks, the disk dir read and readable, the work loop turning. While it cannot see its NodeDisks
   * (list or watch failing: RBAC revoked, a proxy that closes every watch) it would act on what it last saw,
   * and while the dir cannot be read it would report a look it did not take: the Lease lapses then, and the
   * controller shows the node's disks as stale (ADR 24).
   */
  private canRenew(): boolean {
    return this.informer.hasSynced && this.informer.error === undefined && this.discovery !== undefined && this.discoveryError === undefined && this.liveness() === undefined;
  }

  private enqueue(diskID: string, queue: Set<string> = this.urgent): void {
    queue.add(diskID);
    this.wake?.();
  }

  /** The next disk to reconcile: an urgent one first, and each disk once however many asked. */
  private next(): string | undefined {
    const queue = this.urgent.size > 0 ? this.urgent : this.sweep;
    const diskID = queue.values().next().value;
    if (diskID === undefined) return undefined;
    this.urgent.delete(diskID);
    this.sweep.delete(diskID);
    return diskID;
  }

  private get hasWork(): boolean {
    return this.urgent.size > 0 || this.sweep.size > 0 || this.changedFiles.size > 0;
  }

  private requestScan(): void {
    if (this.scanSoon) clearTimeout(this.scanSoon.timer);
    this.scanSoon = undefined;
    this.scanRequested = true;
    this.wake?.();
  }

  /**
   * A full scan for a file event that one file cannot settle (a junk name, a collision): run once events
   * have paused for SCAN_QUIET_MS, and at most SCAN_MAX_DELAY_MS after the first, so a burst of thousands
   * of events costs a scan or two, not one scan per event.
   */
  private requestScanSoon(): void {
    const now = Date.now();
    const firstAt = this.scanSoon?.firstAt ?? now;
    if (this.scanSoon) clearTimeout(this.scanSoon.timer);
    const timer = setTimeout(() => this.requestScan(), Math.max(0, Math.min(now + SCAN_QUIET_MS, firstAt + SCAN_MAX_DELAY_MS) - now));
    timer.unref();
    this.scanSoon = { timer, firstAt };
  }

  async run(signal: AbortSignal): Promise<void> {
    const informerDone = this.informer.run(signal);
    this.watchDir();
    const rescan = setInterval(() => this.requestScan(), this.o.rescanMs);
    // Its own loop, so that a long sweep of disks never delays a renewal.
    const beating = this.heartbeat.run(signal, () => this.canRenew());
    try {
      while (!signal.aborted) {
        this.lastLoop = Date.now();
        // The first scan waits for the NodeDisks: which of two files whose names make one NodeDisk name keeps
        // it depends on which one a NodeDisk already names (nothing is reconciled before the sync anyway).
        if (this.scanRequested && this.informer.hasSynced) {
          this.scanRequested = false;
          // The scan sees every file as it is now, so the changes named so far are covered by it.
          this.changedFiles.clear();
          await this.scan();
        }
        // Disks are reconciled only against a synced cache and a completed, current scan; until then, wait.
        // While the disk dir cannot be read the last reports stand: no marker change, no status, and no
        // heartbeat renewal (it would claim a look the agent did not take). Readiness says why.
        const canWork = this.informer.hasSynced && this.discovery !== undefined && this.discoveryError === undefined;
        if (canWork) {
          // One disk per turn, so that a file event or a reservation arriving during a sweep of thousands
          // of disks waits for one reconcile, not for the sweep.
          for (const diskID of [...this.changedFiles]) {
            this.changedFiles.delete(diskID);
            await this.rediscover(diskID);
          }
          const diskID = this.next();
          if (diskID !== undefined && !signal.aborted) await this.reconcileDisk(diskID, signal);
        }
        if (!canWork || (!this.hasWork && !this.scanRequested)) {
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
      if (this.scanSoon) clearTimeout(this.scanSoon.timer);
      this.fsWatcher?.close();
      await informerDone;
      await beating;
    }
  }

  private watchDir(): void {
    try {
      this.fsWatcher = fsWatch(this.o.diskDir, { persistent: false }, (_event, filename) => {
        // An event names the file: look at that file again (created, grown, removed, its marker changed).
        // One that names no file, or a *.img that cannot be a disk, asks for the full scan, which says why.
        const diskID = filename === null ? undefined : diskIdOfEntry(filename);
        if (diskID !== undefined && diskIdProblem(diskID) === undefined) {
          this.changedFiles.add(diskID);
          this.wake?.();
        } else if (filename === null || filename.endsWith(DISK_SUFFIX)) this.requestScanSoon();
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
      found = await discover(this.o.diskDir, this.o.nodeName, undefined, (objectName) => this.holderOf(objectName));
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
    this.reportIgnored(found.ignored);
    this.o.metrics.ignoredFiles.set(found.ignored.length);
    this.discovery = found;
    // Every scan looks at every disk: files that are not NodeDisks yet, and every NodeDisk of this node,
    // so grown, removed or replaced files and markers changed by hand are all noticed. Reconciling an
    // unchanged disk costs a few lstat calls and writes nothing.
    for (const diskID of found.disks.keys()) this.enqueue(diskID, this.sweep);
    for (const nd of this.informer.cache.values()) this.enqueue(nd.spec.diskID, this.sweep);
  }

  /**
   * Looks at one disk file again after an event named it, updates the last discovery with what it found,
   * and queues the disk first. Which of two files whose names make one NodeDisk name keeps it depends on
   * the whole dir: such a case is left to a full scan.
   */
  private async rediscover(diskID: string): Promise<void> {
    const found = this.discovery;
    if (!found) return;
    const fileName = `${diskID}${DISK_SUFFIX}`;
    const seen = await inspectDiskFile(this.o.diskDir, fileName);
    const objectName = nodeDiskName(this.o.nodeName, diskID);
    // A NodeDisk already bearing the name settles a collision on its own: its disk keeps the name. Only
    // with none does the whole dir decide (the first in name order), which is a full scan's job.
    const held = this.holderOf(objectName);
    const collides =
      held === undefined &&
      (found.ignored.some((f) => f.collidesWith !== undefined && nodeDiskName(this.o.nodeName, f.collidesWith) === objectName) ||
        (seen.kind === 'disk' && !found.disks.has(diskID) && [...found.disks.keys()].some((other) => nodeDiskName(this.o.nodeName, other) === objectName)));
    if (collides) {
      this.requestScanSoon();
      return;
    }
    found.disks.delete(diskID);
    const wasIgnored = found.ignored.findIndex((f) => f.name === fileName);
    if (wasIgnored >= 0) found.ignored.splice(wasIgnored, 1);
    if (seen.kind === 'disk' && held !== undefined && held !== diskID) found.ignored.push(collision(fileName, objectName, held));
    else if (seen.kind === 'disk') found.disks.set(diskID, seen.disk);
    if (seen.kind === 'ignored') found.ignored.push(seen.ignored);
    found.ignored.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)); // in a scan's order
    this.reportIgnored(found.ignored);
    this.o.metrics.ignoredFiles.set(found.ignored.length);
    // A newcomer colliding with a held name has nothing to reconcile: the disk that keeps the name does,
    // and says in its status which files collide with it.
    this.enqueue(held ?? diskID);
  }

  /** The diskID of this node's NodeDisk of that name, if the agent knows one. */
  private holderOf(objectName: string): string | undefined {
    const nd = this.informer.cache.get(objectName);
    return nd && nd.spec.nodeName === this.o.nodeName ? nd.spec.diskID : undefined;
  }

  /**
   * Logs the ignored files not logged before (or whose reason changed), at most IGNORED_LOG_LIMIT by name
   * and the rest as a count, so that a dir full of junk costs a few lines once, not a line per file per
   * scan. A file gone from the list is forgotten: if it comes back, it is named again.
   */
  private reportIgnored(ignored: IgnoredFile[]): void {
    const now = new Map(ignored.map((f) => [f.name, f.reason]));
    for (const name of [...this.reportedIgnored.keys()]) if (!now.has(name)) this.reportedIgnored.delete(name);
    let unnamed = 0;
    let logged = 0;
    for (const f of ignored) {
      if (this.reportedIgnored.get(f.name) === f.reason) continue;
      this.reportedIgnored.set(f.name, f.reason);
      if (logged < IGNORED_LOG_LIMIT) {
        this.o.log.warn('ignoring file in disk dir', { file: f.name, reason: f.reason });
        logged++;
      } else unnamed++;
    }
    if (unnamed > 0) {
      this.o.log.warn(`ignoring ${unnamed} more files in disk dir, not named to keep the log short`, {
        more: unnamed,
        ignoredFiles: ignored.length,
        hint: 'the gauge nodedisks_agent_ignored_files counts them; fix or remove the files',
      });
    }
  }

  private async reconcileDisk(diskID: string, signal: AbortSignal): Promise<void> {
    try {
      await this.reconcileDiskOnce(diskID);
      this.retryBackoff.delete(diskID);
      this.refused.delete(diskID);
    } catch (err) {
      if (isApiError(err, 401) || isApiError(err, 403)) this.refused.set(diskID, describe(err));
      const backoff = this.retryBackoff.get(diskID) ?? new Backoff({ initialMs: 500, maxMs: 60_000 });
      this.retryBackoff.set(diskID, backoff);
      const delay = backoff.next();
      this.o.log.warn('reconcile failed; retrying', { diskID, error: (err as Error).message, retryInMs: delay });
      void sleep(delay, signal).then(() => !signal.aborted && this.enqueue(diskID));
    }
  }

  private async reconcileDiskOnce(diskID: string): Promise<void> {
    const { nodeName, diskDir, hostDiskDir, client, log } = this.o;
    const name = nodeDiskName(nodeName, diskID);
    const file = this.discovery?.disks.get(diskID);
    const ignored = this.discovery?.ignored.find((f) => diskIdFromFileName(f.name) === diskID);
    let nd = this.informer.cache.get(name);
    const hostPath = diskPath(hostDiskDir, diskID);

    // A file whose name makes a NodeDisk name another disk keeps: that disk reports it, nothing acts on it.
    if (!file && ignored?.collidesWith !== undefined) return;
    await this.reportAliases(diskID, name);
    if (!nd) {
      if (!file) return;
      nd = await this.createNodeDisk(diskID, name, hostPath, file.sizeBytes);
    }
    if (nd.spec.nodeName !== nodeName || nd.spec.diskID !== diskID) {
      log.error('NodeDisk name collides with another disk; leaving it alone', { nodeDisk: name, diskID, existing: nd.spec });
      return;
    }

    // Finalizer first, marker second; on release, marker first, finalizer last (ADR 12).
    let desired = nd.spec.desired?.state ?? 'Available';
    if (desired !== 'Reserved' && (await markerState(diskDir, diskID)).kind === 'present') {
      // Removing a marker frees the disk: decide it on a fresh read, never on the cache alone, which may
      // still hold a release the watch delivered late while the disk has been reserved again since. The cost
      // is one GET per release, not one per reconcile.
      nd = this.informer.storeOwnWrite(lean(await client.get(name)));
      desired = nd.spec.desired?.state ?? 'Available';
    }
    const deleting = nd.metadata.deletionTimestamp !== undefined;
    let actionError: string | undefined;
    if (desired === 'Reserved' && !isProtected(nd)) {
      if (deleting) actionError = `the NodeDisk is being deleted without finalizer ${FINALIZER}: no reservation marker is written for it`;
      else nd = await this.setProtection(nd, true);
    }
    if (!actionError && (file || desired !== 'Reserved')) {
      try {
        const replaced = (wrong: string) => log.warn('reservation marker put right', { nodeDisk: name, diskID, was: `it ${wrong}` });
        const changed = desired === 'Reserved' ? await ensureMarker(diskDir, diskID, { replaced }) : await removeMarker(diskDir, diskID);
        if (changed) {
          this.o.metrics.markerOps.inc({ op: desired === 'Reserved' ? 'create' : 'remove' });
          log.info(desired === 'Reserved' ? 'reservation marker written' : 'reservation marker removed', { nodeDisk: name, diskID });
        }
      } catch (err) {
        actionError = `cannot ${desired === 'Reserved' ? 'write' : 'remove'} the reservation marker: ${(err as Error).message}`;
      }
    }
    if (actionError) {
      // Logged once per new problem, not at every rescan; the NodeDisk's Error phase carries it meanwhile.
      if (this.lastActionError.get(diskID) !== actionError) log.error(actionError, { nodeDisk: name, diskID });
      this.lastActionError.set(diskID, actionError);
    } else if (this.lastActionError.delete(diskID)) log.info('reservation marker problem resolved', { nodeDisk: name, diskID });
    const onDisk = await markerState(diskDir, diskID);
    if (desired !== 'Reserved' && onDisk.kind === 'absent' && isProtected(nd)) {
      nd = await this.setProtection(nd, false);
      if (deleting) {
        // That completed its deletion: forget it, and rediscover the disk as a new, free NodeDisk.
        this.informer.cache.delete(name);
        this.enqueue(diskID);
        return;
      }
    }

    const marker = file ? onDisk : ({ kind: 'absent' } as const);
    let next = observedStatus({
      name,
      file,
      marker,
      actionError,
      hostPath,
      previousCapacity: nd.status?.node?.capacityBytes,
      owner: nd.spec.desired?.owner,
      deletionHeld: deleting && desired === 'Reserved' && isProtected(nd),
      rivals: this.discovery?.ignored.filter((f) => f.collidesWith === diskID).map((f) => f.name),
    });
    if (!file && ignored) next = { ...next, phase: 'Error', message: `disk image ${hostPath} ${ignored.reason}` };

    // Written only when the report changed: the node's heartbeat Lease says the agent is alive (ADR 24).
    if (!statusChanged(nd.status?.node, next)) return;
    const status: NodeStatus = { ...next, lastSeenTime: now() };
    try {
      const updated = await client.applyStatus({ apiVersion: API_VERSION, kind: KIND, metadata: { name }, status: { node: status } }, { fieldManager: FIELD_MANAGER.agent });
      this.informer.storeOwnWrite(lean(updated));
    } catch (err) {
      this.o.metrics.apiErrors.inc({ op: 'status' });
      throw err;
    }
    this.o.metrics.statusWrites.inc({ cause: 'change' });
    log.info('reported disk status', { nodeDisk: name, diskID, phase: status.phase, capacityBytes: status.capacityBytes });
    this.updatePhaseGauge();
  }

  /**
   * Creates the NodeDisk of a disk file. A reservation marker already beside the file, with no NodeDisk,
   * is a reservation whose NodeDisk was deleted past its finalizer (removed by hand, or the CRD deleted and
   * reinstalled): the NodeDisk is created reserved for RECOVERED_OWNER, with its finalizer, rather than as a
   * free disk whose marker would then be removed (ADR 12).
   */
  private async createNodeDisk(diskID: string, name: string, hostPath: string, sizeBytes: number): Promise<NodeDisk> {
    const { nodeName, diskDir, client, log, metrics } = this.o;
    const recovered = (await markerState(diskDir, diskID)).kind === 'present';
    let nd: NodeDisk;
    try {
      nd = await client.create(
        {
          apiVersion: API_VERSION,
          kind: KIND,
          metadata: {
            name,
            labels: { [LABEL_NODE]: labelValue(nodeName), [LABEL_DISK]: labelValue(diskID) },
            ...(recovered ? { finalizers: [FINALIZER] } : {}),
          },
          spec: { nodeName, diskID, path: hostPath, ...(recovered ? { desired: { state: 'Reserved', owner: RECOVERED_OWNER } } : {}) },
        },
        { fieldManager: FIELD_MANAGER.agent },
      );
      metrics.creates.inc();
      if (recovered) log.warn('reservation marker found with no NodeDisk; re-created it reserved', { nodeDisk: name, diskID, owner: RECOVERED_OWNER });
      else log.info('discovered disk', { nodeDisk: name, diskID, path: hostPath, sizeBytes });
    } catch (err) {
      if (!isApiError(err, 409)) {
        metrics.apiErrors.inc({ op: 'create' });
        throw err;
      }
      nd = await client.get(name); // created by an earlier run of ours: carry on with it
    }
    // Stored unless the watch already delivered a newer one: the cache never goes back in time.
    return this.informer.storeOwnWrite(lean(nd));
  }

  /** Adds or removes the agent's finalizer; a stale resourceVersion (409) is retried once from a fresh read. */
  private async setProtection(nd: NodeDisk, on: boolean): Promise<NodeDisk> {
    const { client, log, metrics } = this.o;
    const patch = (x: NodeDisk) => (on ? addProtection(client, x) : removeProtection(client, x));
    let updated: NodeDisk;
    try {
      try {
        updated = await patch(nd);
      } catch (err) {
        if (!isApiError(err, 409)) throw err;
        const fresh = await client.get(nd.metadata.name ?? '');
        // Nothing to do if it is already so, or if a reservation came back meanwhile (keep the finalizer).
        const settled = isProtected(fresh) === on || (!on && fresh.spec.desired?.state === 'Reserved');
        updated = settled ? fresh : await patch(fresh);
      }
    } catch (err) {
      metrics.apiErrors.inc({ op: 'finalizer' });
      throw err;
    }
    log.info(on ? 'reservation protection added' : 'reservation protection removed', { nodeDisk: nd.metadata.name, finalizer: FINALIZER });
    return this.informer.storeOwnWrite(lean(updated));
  }

  /**
   * NodeDisks of this node for this disk under a name that is not its canonical one (the API server refuses
   * those unless the name is long enough to end in a hash, which CEL cannot check): nothing acts on them,
   * and their status says so, so that neither people nor tools take them for the disk.
   */
  private async reportAliases(diskID: string, canonical: string): Promise<void> {
    for (const aliasName of [...(this.aliases.get(diskID) ?? [])]) {
      const alias = this.informer.cache.get(aliasName);
      if (!alias) continue;
      const next = {
        phase: 'Error' as const,
        message: `this NodeDisk's name is not the canonical name ${canonical} of disk ${diskID} on node ${this.o.nodeName}; nothing acts on it: delete it (kubectl delete nodedisk ${aliasName})`,
      };
      if (!statusChanged(alias.status?.node, next)) continue;
      this.o.log.warn('NodeDisk with a non-canonical name; not acting on it', { nodeDisk: aliasName, canonical });
      try {
        const updated = await this.o.client.applyStatus(
          { apiVersion: API_VERSION, kind: KIND, metadata: { name: aliasName }, status: { node: { ...next, lastSeenTime: now() } } },
          { fieldManager: FIELD_MANAGER.agent },
        );
        this.informer.storeOwnWrite(lean(updated));
      } catch (err) {
        // Never let an alias hold up the real disk; the log and the alias's missing status tell the story.
        this.o.metrics.apiErrors.inc({ op: 'status' });
        this.o.log.warn('cannot report the NodeDisk with a non-canonical name', { nodeDisk: aliasName, error: (err as Error).message });
      }
    }
  }

  private trackAlias(nd: NodeDisk, present: boolean): void {
    const name = nd.metadata.name ?? '';
    const diskID = nd.spec.diskID;
    if (name === nodeDiskName(this.o.nodeName, diskID)) return;
    const names = this.aliases.get(diskID) ?? new Set<string>();
    if (present) names.add(name);
    else names.delete(name);
    if (names.size > 0) this.aliases.set(diskID, names);
    else this.aliases.delete(diskID);
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

/**
 * What the agent keeps of a NodeDisk: all but metadata.managedFields, which it never reads (its writes are
 * server-side applies and merge patches that do not need them) and which are about half of each object.
 */
/** At most this many ignored files are named in the log per scan; the rest are counted in one line. */
const IGNORED_LOG_LIMIT = 10;
/** A full scan asked for by file events waits for this pause in them, and never longer than the max delay. */
const SCAN_QUIET_MS = 200;
const SCAN_MAX_DELAY_MS = 1000;

function lean(nd: NodeDisk): NodeDisk {
  delete nd.metadata.managedFields;
  return nd;
}

function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}

/** An error as readiness shows it: the HTTP status of an API refusal, then its message. */
function describe(err: Error): string {
  return err instanceof ApiError ? `${err.statusCode}${err.reason ? ` ${err.reason}` : ''}: ${err.message}` : err.message;
}
