// The node side's half of a drive's wipe (api/drive-wipe.ts): the agent asks with a request file in the disk
// dir; this privileged container wipes the drive and answers beside it. One wipe at a time per node.
//
// What it wipes is checked here, not taken from the request: the by-id name must lead, now, to a whole block
// device (not a partition) whose device number is the one the agent saw; and blkdiscard opens the device exclusively, which the kernel refuses while anything is mounted
// from it or holds it (a filesystem anywhere on the node, dm, md). The wipe is BLKZEROOUT (`blkdiscard
// --zeroout`): the kernel has the drive write zeroes, by deallocating where the drive guarantees zeroes
// after it (NVMe, SCSI UNMAP with LBPRZ, loop devices), else by writing them. It goes a step at a time
// (stepBytes), and says how far it got in `drive-<identity>.wiping` at most every progressMs: the agent shows
// it in status, and a node side restarted half way, or retrying after a failure, resumes there for the same
// request on the same device instead of starting over. A request withdrawn meanwhile (the drive reserved
// again) stops it between steps.
import { watch as fsWatch, type FSWatcher } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { basename, join } from 'node:path';
import {
  type DriveWipeAnswer,
  formatWipeAnswer,
  formatWipeProgress,
  parseWipeAnswer,
  parseWipeProgress,
  parseWipeRequest,
  WIPE_REQUEST_SUFFIX,
  wipeAnswerName,
  wipeProgressName,
  wipeRequestName,
} from '../api/drive-wipe.ts';
import { isDriveId } from '../api/names.ts';
import { splitDeviceNumber } from '../api/staged-record.ts';
import { readSmallFile, removeFile, writeFileAtomic } from '../lib/runtime/atomic-file.ts';
import type { Logger } from '../lib/runtime/log.ts';
import { runTool } from './run-tool.ts';

export interface DriveWiperOptions {
  diskDir: string;
  byIdDir: string;
  log: Logger;
  /** How often every open request is looked at again (a failed wipe is tried again then). */
  sweepMs: number;
  /** `/sys` (tests give a tree of their own). */
  sysRoot?: string;
  /** How long one step may take (an HDD is zeroed at its write speed). */
  stepTimeoutMs?: number;
  /** Bytes zeroed per step (a multiple of 4096): the granularity of progress and of a resume. */
  stepBytes?: number;
  /** The least time between two writes of the progress file. */
  progressMs?: number;
  /** Called after each step with the bytes zeroed so far (tests act between steps). */
  afterStep?: (doneBytes: number) => Promise<void>;
  /** Called when the kernel still shows partitions after an attempt to drop them (tests release a holder). */
  partitionsKept?: (attempt: number, partitions: string[]) => Promise<void>;
}

const GiB = 2 ** 30;

const METHOD = 'BLKZEROOUT (blkdiscard --zeroout)';

/** Pauses between attempts to drop a wiped drive's partitions: whatever has one open briefly lets go. */
const PARTITION_RETRY_MS = [100, 200, 400, 800, 1600, 3200];

export class DriveWiper {
  private readonly o: DriveWiperOptions;
  private watcher: FSWatcher | undefined;
  private sweep: NodeJS.Timeout | undefined;
  /** Wipes run one after another: a chain of looks. */
  private chain: Promise<void> = Promise.resolve();
  private readonly queued = new Set<string>();

  constructor(o: DriveWiperOptions) {
    this.o = o;
  }

  start(): void {
    try {
      this.watcher = fsWatch(this.o.diskDir, { persistent: false }, (_e, name) => {
        if (name?.endsWith(WIPE_REQUEST_SUFFIX) && isDriveId(name)) this.enqueue(name.slice(0, -WIPE_REQUEST_SUFFIX.length), false);
      });
      this.watcher.on('error', () => this.watcher?.close());
    } catch (err) {
      this.o.log.warn('cannot watch the disk dir for wipe requests; looking at the periodic sweep only', { error: (err as Error).message });
    }
    this.sweep = setInterval(() => void this.sweepAll(true), this.o.sweepMs);
    this.sweep.unref();
    void this.sweepAll(false);
  }

  close(): void {
    this.watcher?.close();
    clearInterval(this.sweep);
  }

  /** Resolves once every look queued so far is done (tests). */
  idle(): Promise<void> {
    return this.chain;
  }

  private async sweepAll(retryFailed: boolean): Promise<void> {
    const names = await fsp.readdir(this.o.diskDir).catch(() => [] as string[]);
    for (const n of names) if (n.endsWith(WIPE_REQUEST_SUFFIX) && isDriveId(n)) this.enqueue(n.slice(0, -WIPE_REQUEST_SUFFIX.length), retryFailed);
  }

  private enqueue(diskID: string, retryFailed: boolean): void {
    const key = `${diskID}\0${retryFailed}`;
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.chain = this.chain.then(async () => {
      this.queued.delete(key);
      try {
        await this.look(diskID, retryFailed);
      } catch (err) {
        this.o.log.error('cannot handle a drive wipe request', { diskID, error: (err as Error).message });
      }
    });
  }

  /** One request: wiped and answered, or answered with why not, or left alone (answered already). */
  async look(diskID: string, retryFailed: boolean): Promise<void> {
    const { diskDir, log } = this.o;
    const text = await readSmallFile(join(diskDir, wipeRequestName(diskID)));
    if (text === undefined) return;
    const request = parseWipeRequest(text);
    if (typeof request === 'string') {
      log.warn('ignored a wipe request that cannot be read', { diskID, problem: request });
      return;
    }
    const before = parseWipeAnswer((await readSmallFile(join(diskDir, wipeAnswerName(diskID))).catch(() => undefined)) ?? '');
    if (before?.token === request.token && (before.ok || !retryFailed)) return;
    const answer = async (a: DriveWipeAnswer) => {
      await writeFileAtomic(diskDir, wipeAnswerName(diskID), formatWipeAnswer(a));
      if (a.ok) log.info('drive wiped', { diskID, token: a.token, bytes: a.bytes, ms: a.ms, method: a.method });
      else log.warn('drive not wiped', { diskID, token: a.token, why: a.message });
    };
    const refuse = (message: string) => answer({ token: request.token, ok: false, message });

    // A released drive keeps its marker until it is wiped (the marker goes last, as an image's does): the
    // agent asks only for a drive whose reservation was released, and no one may reserve it meanwhile.
    const link = join(this.o.byIdDir, request.byIdName);
    // udev's links are relative to /dev/disk/by-id (`../../sdb`): the kernel name they end in is the device
    // node in /dev, wherever the by-id dir is (the local cluster's nodes have theirs elsewhere). The agent
    // named the drive the same way.
    let device: string;
    try {
      device = join('/dev', basename(await fsp.readlink(link)));
    } catch (err) {
      return refuse(`${link} does not lead to a device (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): the drive is gone`);
    }
    const st = await fsp.stat(device, { bigint: true }).catch(() => undefined);
    if (!st?.isBlockDevice()) return refuse(`${link} leads to ${device}, which is not a block device`);
    const { major, minor } = splitDeviceNumber(st.rdev);
    if (`${major}:${minor}` !== request.device)
      return refuse(`${link} now leads to device ${major}:${minor}, not ${request.device} as when the agent asked: not wiped; the agent asks again for the device it finds`);
    const sysDev = join(this.o.sysRoot ?? '/sys', 'dev', 'block', request.device);
    if ((await fsp.lstat(join(sysDev, 'partition')).catch(() => undefined)) !== undefined) return refuse(`${device} is a partition, not a whole drive`);
    const sectors = Number((await fsp.readFile(join(sysDev, 'size'), 'utf8').catch(() => '0')).trim());
    if (!(sectors > 0)) return refuse(`${device} has no size (no medium, or detached): nothing to wipe, and nothing said wiped`);
    const totalBytes = sectors * 512;
    const progressName = wipeProgressName(diskID);
    const sofar = parseWipeProgress((await readSmallFile(join(diskDir, progressName)).catch(() => undefined)) ?? '');
    let done = sofar?.token === request.token && sofar.device === request.device && sofar.totalBytes === totalBytes ? sofar.doneBytes : 0;
    if (done > 0) log.info('resuming a drive wipe where it stopped', { diskID, token: request.token, doneBytes: done, totalBytes });
    const step = this.o.stepBytes ?? GiB;
    const started = Date.now();
    let said = Date.now();
    while (done < totalBytes) {
      const length = Math.min(step, totalBytes - done);
      try {
        await runTool('blkdiscard', ['--zeroout', '--offset', String(done), '--length', String(length), device], { timeoutMs: this.o.stepTimeoutMs ?? 3600_000 });
      } catch (err) {
        if (done > 0) await writeFileAtomic(diskDir, progressName, formatWipeProgress({ token: request.token, device: request.device, doneBytes: done, totalBytes }));
        return refuse((err as Error).message);
      }
      done += length;
      await this.o.afterStep?.(done);
      if (done >= totalBytes) break;
      // Withdrawn (the drive reserved again, or asked with another token): stop before the next step, so
      // that nothing is zeroed under a new holder; a new request starts over.
      const now = parseWipeRequest((await readSmallFile(join(diskDir, wipeRequestName(diskID))).catch(() => undefined)) ?? '');
      if (typeof now === 'string' || now.token !== request.token) {
        log.info('a drive wipe stopped: its request was withdrawn', { diskID, token: request.token, doneBytes: done, totalBytes });
        await removeFile(join(diskDir, progressName));
        return;
      }
      if (Date.now() - said >= (this.o.progressMs ?? 30_000)) {
        await writeFileAtomic(diskDir, progressName, formatWipeProgress({ token: request.token, device: request.device, doneBytes: done, totalBytes }));
        said = Date.now();
      }
    }
    await this.dropPartitions(diskID, device, sysDev);
    await answer({ token: request.token, ok: true, bytes: totalBytes, ms: Date.now() - started, method: METHOD });
    await removeFile(join(diskDir, progressName));
  }

  /**
   * The partition table is zeroes now, but the kernel keeps the partitions it read (or was told of) until it
   * reads the table again: without that the drive would show partitions it no longer has, and be refused for
   * them. The kernel refuses the re-read while a partition is open or the drive is claimed by someone else,
   * so it is tried again a few times, and where it still fails each partition is deleted from the kernel's
   * table (BLKPG, which needs no partition parser in the kernel either).
   */
  private async dropPartitions(diskID: string, device: string, sysDev: string): Promise<void> {
    const kept = async () => (await fsp.readdir(sysDev).catch(() => [] as string[])).filter((n) => n.startsWith(basename(device)));
    let partitions = await kept();
    let lastError = '';
    for (let attempt = 0; partitions.length > 0; attempt++) {
      if (attempt > 0) {
        await this.o.partitionsKept?.(attempt, partitions);
        if (attempt > PARTITION_RETRY_MS.length) break;
        await new Promise((r) => setTimeout(r, PARTITION_RETRY_MS[attempt - 1]));
      }
      lastError = '';
      await runTool('blockdev', ['--rereadpt', device], { timeoutMs: 60_000 }).catch((err: Error) => {
        lastError = err.message;
      });
      partitions = await kept();
      if (partitions.length === 0) break;
      await runTool('partx', ['--delete', device], { timeoutMs: 60_000 }).catch((err: Error) => {
        lastError = `${lastError}; ${err.message}`;
      });
      partitions = await kept();
    }
    if (partitions.length > 0)
      this.o.log.warn('a wiped drive keeps partitions the kernel had before the wipe: something holds them open', {
        diskID,
        device,
        partitions: partitions.join(','),
        error: lastError,
      });
  }
}
