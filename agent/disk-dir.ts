// The agent's view of its disk dir: what the last scan found, kept current by file-system events.
//
// A file-system event names a file: that one file is looked at again (rediscover) before its disk is
// reconciled. The full scan (every file) is a safety net for missed events, asked for at the slow rescan
// period, and by events that one file cannot settle (debounced, ADR 29). An unreadable dir keeps the last
// discovery and says why (`problem`): the agent then does no disk work (ADR 12).
import { watch as fsWatch, type FSWatcher } from 'node:fs';
import { DISK_SUFFIX } from '../api/constants.ts';
import { diskIdProblem, nodeDiskName } from '../api/names.ts';
import type { Priority } from '../lib/kube/workqueue.ts';
import type { Logger } from '../lib/runtime/log.ts';
import { collision, discover, diskIdOfEntry, inspectDiskFile, type Discovery, type IgnoredFile, type NameHolder } from './discover.ts';
import type { AgentMetrics } from './metrics.ts';

export interface DiskDirOptions {
  /** The disk dir as this process sees it. */
  diskDir: string;
  nodeName: string;
  rescanMs: number;
  log: Logger;
  metrics: AgentMetrics;
  /** The diskID of this node's NodeDisk of that name, if the agent knows one: that disk keeps the name. */
  holderOf: NameHolder;
  /** A disk to reconcile: a file event named it, or a scan found it. */
  onDisk(diskID: string, priority: Priority): void;
  /** A full scan is wanted: the periodic rescan ('sweep'), or file events one file cannot settle ('event'). */
  onScanWanted(priority: Priority): void;
}

/** At most this many ignored files are named in the log per scan; the rest are counted in one line. */
const IGNORED_LOG_LIMIT = 10;
/** A full scan asked for by file events waits for this pause in them, and never longer than the max delay. */
const SCAN_QUIET_MS = 200;
const SCAN_MAX_DELAY_MS = 1000;

export class DiskDir {
  private readonly o: DiskDirOptions;
  private found: Discovery | undefined;
  private unreadable: string | undefined;
  /** Disks whose file a file-system event named, to be looked at again before they are reconciled. */
  private readonly changedFiles = new Set<string>();
  /** Ignored files already logged, with the reason logged: a file is named again only when its reason changes. */
  private readonly reportedIgnored = new Map<string, string>();
  /** A full scan asked for by file events, run once the burst is over (see requestScanSoon). */
  private scanSoon: { timer: NodeJS.Timeout; firstAt: number } | undefined;
  private fsWatcher: FSWatcher | undefined;
  private rescan: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(o: DiskDirOptions) {
    this.o = o;
  }

  /** What the last successful scan found, kept current by rediscover; undefined before the first. */
  get discovery(): Discovery | undefined {
    return this.found;
  }

  /** Why the dir cannot be read, while it cannot. */
  get problem(): string | undefined {
    return this.unreadable;
  }

  /** Watches the dir and asks for the periodic rescan, until close(). */
  start(): void {
    this.watch();
    this.rescan = setInterval(() => this.requestScan('sweep'), this.o.rescanMs);
  }

  close(): void {
    this.closed = true;
    clearInterval(this.rescan);
    if (this.scanSoon) clearTimeout(this.scanSoon.timer);
    this.fsWatcher?.close();
  }

  /** Whether a file event named this disk since it was last looked at; forgets it. */
  takeChanged(diskID: string): boolean {
    return this.changedFiles.delete(diskID);
  }

  private requestScan(priority: Priority): void {
    if (this.scanSoon) clearTimeout(this.scanSoon.timer);
    this.scanSoon = undefined;
    this.o.onScanWanted(priority);
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
    const timer = setTimeout(() => this.requestScan('event'), Math.max(0, Math.min(now + SCAN_QUIET_MS, firstAt + SCAN_MAX_DELAY_MS) - now));
    timer.unref();
    this.scanSoon = { timer, firstAt };
  }

  private watch(): void {
    if (this.closed) return;
    try {
      this.fsWatcher = fsWatch(this.o.diskDir, { persistent: false }, (_event, filename) => {
        // An event names the file: look at that file again (created, grown, removed, its marker changed).
        // One that names no file, or a *.img that cannot be a disk, asks for the full scan, which says why.
        const diskID = filename === null ? undefined : diskIdOfEntry(filename);
        if (diskID !== undefined && diskIdProblem(diskID) === undefined) {
          this.changedFiles.add(diskID);
          this.o.onDisk(diskID, 'event');
        } else if (filename === null || filename.endsWith(DISK_SUFFIX)) this.requestScanSoon();
      });
      this.fsWatcher.on('error', (err) => {
        this.o.log.warn('file-system watch failed; relying on the periodic rescan until it is re-established', { error: err.message });
        this.fsWatcher?.close();
        this.fsWatcher = undefined;
        setTimeout(() => this.watch(), this.o.rescanMs).unref();
      });
    } catch (err) {
      this.o.log.warn('cannot watch the disk dir; relying on the periodic rescan', { diskDir: this.o.diskDir, error: (err as Error).message });
      setTimeout(() => this.watch(), this.o.rescanMs).unref();
    }
  }

  /**
   * Scans the whole dir and queues every disk file found (as a sweep). Returns whether the dir could be
   * read: an unreadable or missing dir says nothing about the disks, so the last discovery is kept.
   */
  async scan(): Promise<boolean> {
    // The scan sees every file as it is now, so the changes named so far are covered by it.
    this.changedFiles.clear();
    const end = this.o.metrics.scanSeconds.startTimer();
    let found: Discovery;
    try {
      found = await discover(this.o.diskDir, this.o.nodeName, undefined, this.o.holderOf);
    } catch (err) {
      const msg = `cannot read disk dir ${this.o.diskDir}: ${(err as Error).message}`;
      if (msg !== this.unreadable) this.o.log.error(msg);
      this.unreadable = msg;
      end();
      return false;
    }
    end();
    if (this.unreadable) {
      this.o.log.info('disk dir readable again', { diskDir: this.o.diskDir });
      // The dir may be a new one (recreated, remounted): watch it afresh.
      this.fsWatcher?.close();
      this.watch();
    }
    this.unreadable = undefined;
    this.reportIgnored(found.ignored);
    this.o.metrics.ignoredFiles.set(found.ignored.length);
    this.found = found;
    for (const diskID of found.disks.keys()) this.o.onDisk(diskID, 'sweep');
    return true;
  }

  /**
   * Looks at one disk file again after an event named it and updates the last discovery with what it
   * found. Returns the disk to reconcile for it: this one, or the disk that keeps the NodeDisk name this
   * file's name makes (which says in its status which files collide with it); undefined when only the
   * whole dir can decide which of two files keeps a name: a full scan is asked for then.
   */
  async rediscover(diskID: string): Promise<string | undefined> {
    const found = this.found;
    if (!found) return undefined;
    const { diskDir, nodeName, holderOf } = this.o;
    const fileName = `${diskID}${DISK_SUFFIX}`;
    const seen = await inspectDiskFile(diskDir, fileName);
    const objectName = nodeDiskName(nodeName, diskID);
    // A NodeDisk already bearing the name settles a collision on its own: its disk keeps the name. Only
    // with none does the whole dir decide (the first in name order), which is a full scan's job.
    const held = holderOf(objectName);
    const collides =
      held === undefined &&
      (found.ignored.some((f) => f.collidesWith !== undefined && nodeDiskName(nodeName, f.collidesWith) === objectName) ||
        (seen.kind === 'disk' && !found.disks.has(diskID) && [...found.disks.keys()].some((other) => nodeDiskName(nodeName, other) === objectName)));
    if (collides) {
      this.requestScanSoon();
      return undefined;
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
    // A newcomer colliding with a held name has nothing to reconcile: the disk that keeps the name does.
    return held ?? diskID;
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
}
