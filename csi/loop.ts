// Loop devices over disk images, through losetup. Which device serves which image is asked of the kernel
// each time (`losetup --list --json`, which reads sysfs), never remembered: a restarted program finds the
// devices its predecessor attached.
import { NodeVolumeError } from './node-errors.ts';
import { runTool } from './run-tool.ts';

const LOSETUP_TIMEOUT_MS = 30_000;
/** How sysfs and losetup name a backing file that was removed while attached. */
const DELETED_SUFFIX = ' (deleted)';

export interface LoopDevice {
  /** The device node, `/dev/loopN`. */
  device: string;
  /** The backing file's path, without the ` (deleted)` the kernel appends to a removed file's. */
  backingFile: string;
  /** The backing file was removed (or replaced) while attached: the device serves a file no longer in the dir. */
  deleted: boolean;
  /** Set when a detach was asked while the device was still open: it goes when the last user closes it. */
  autoclear: boolean;
}

/** Parses `losetup --list --json --output NAME,BACK-FILE,AUTOCLEAR` (empty output: no loop device at all). */
export function parseLosetupList(json: string): LoopDevice[] {
  if (json.trim() === '') return [];
  const doc = JSON.parse(json) as { loopdevices?: { name?: unknown; 'back-file'?: unknown; autoclear?: unknown }[] };
  const out: LoopDevice[] = [];
  for (const d of doc.loopdevices ?? []) {
    if (typeof d.name !== 'string' || typeof d['back-file'] !== 'string') continue;
    const raw = d['back-file'];
    const deleted = raw.endsWith(DELETED_SUFFIX);
    out.push({
      device: d.name,
      backingFile: deleted ? raw.slice(0, -DELETED_SUFFIX.length) : raw,
      deleted,
      autoclear: d.autoclear === true || d.autoclear === '1' || d.autoclear === 1,
    });
  }
  return out;
}

export async function listLoopDevices(): Promise<LoopDevice[]> {
  const { stdout } = await runTool('losetup', ['--list', '--json', '--output', 'NAME,BACK-FILE,AUTOCLEAR'], { timeoutMs: LOSETUP_TIMEOUT_MS });
  try {
    return parseLosetupList(stdout);
  } catch (err) {
    throw new NodeVolumeError('internal', `cannot read losetup's list of loop devices: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * The loop devices serving this image (the exact path). A device whose file was removed since serves an
 * older file of that name: counted only with `includeDeleted` (what a cleanup detaches, never what a
 * volume is staged on).
 */
export function devicesOfImage(devices: LoopDevice[], image: string, o: { includeDeleted?: boolean } = {}): LoopDevice[] {
  return devices.filter((d) => d.backingFile === image && (o.includeDeleted === true || !d.deleted));
}

/**
 * Attaches the image to a free loop device and returns it. `--nooverlap` makes losetup give back the
 * device already serving this file instead of a second one, should another attach have won a race.
 */
export async function attachLoop(image: string): Promise<string> {
  const { stdout } = await runTool('losetup', ['--find', '--show', '--nooverlap', image], { timeoutMs: LOSETUP_TIMEOUT_MS });
  const device = stdout.trim();
  if (!/^\/dev\/loop\d+$/.test(device)) throw new NodeVolumeError('internal', `losetup attached ${image} but named no loop device (it printed ${JSON.stringify(stdout)})`);
  return device;
}

/**
 * Detaches a loop device. The kernel accepts a detach of a device still open (by a mount elsewhere, a
 * process) and only marks it to go at the last close, so the caller checks for mounts first.
 */
export async function detachLoop(device: string): Promise<void> {
  await runTool('losetup', ['--detach', device], { timeoutMs: LOSETUP_TIMEOUT_MS });
}
