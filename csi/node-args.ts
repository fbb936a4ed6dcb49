// The arguments of the node side's operations, checked before anything on the node is touched: paths,
// the volume mode, mount options (one option an element, none that changes what mount does), the
// filesystem type among those this node offers.
import { canonicalPath } from '../lib/runtime/mountinfo.ts';
import { NodeVolumeError } from './node-errors.ts';
import { hasTool } from './run-tool.ts';

export type VolumeMode = 'filesystem' | 'block';

/** Options that would make mount(8) do something else than mount the volume's filesystem (bind, move, set up its own loop device, …). */
const MOUNT_ACTIONS = /^(bind|rbind|move|remount|loop|offset|sizelimit|encryption|X-mount\.[\w-]+|x-mount\.[\w-]+)(=.*)?$/;

/** Per-mount flags a bind mount can carry (the rest of the mount options apply where the filesystem is mounted). */
export const PER_MOUNT_FLAGS = new Set(['ro', 'nosuid', 'nodev', 'noexec', 'noatime', 'nodiratime', 'relatime', 'strictatime']);

/** Filesystems this driver formats and mounts: ext4 and ext3 from e2fsprogs, xfs where mkfs.xfs is installed. */
export async function supportedFsTypes(): Promise<string[]> {
  return ['ext4', 'ext3', ...((await hasTool('mkfs.xfs')) ? ['xfs'] : [])];
}

export function absolutePath(what: string, p: unknown): string {
  if (typeof p !== 'string' || p === '') throw new NodeVolumeError('invalid', `${what} is missing`);
  if (!p.startsWith('/')) throw new NodeVolumeError('invalid', `${what} ${JSON.stringify(p)} is not an absolute path`);
  if (p.includes('\0')) throw new NodeVolumeError('invalid', `${what} contains a NUL character`);
  return p;
}

export async function pathArg(what: string, p: unknown): Promise<string> {
  return canonicalPath(absolutePath(what, p));
}

export function modeArg(mode: unknown): VolumeMode {
  if (mode === 'filesystem' || mode === 'block') return mode;
  throw new NodeVolumeError('invalid', `volume mode ${JSON.stringify(mode)} is neither 'filesystem' nor 'block'`);
}

/**
 * The mount options, one option an element: an element may join several with commas (mount(8) splits them
 * so), and each of those is checked on its own.
 */
export function mountOptionsArg(options: unknown): string[] {
  if (options === undefined) return [];
  if (!Array.isArray(options)) throw new NodeVolumeError('invalid', 'mount options must be a list');
  const out: string[] = [];
  for (const element of options) {
    if (typeof element !== 'string') throw new NodeVolumeError('invalid', `mount option ${JSON.stringify(element)} is not a string`);
    for (const o of element.split(',')) {
      if (o === '') throw new NodeVolumeError('invalid', `mount option ${JSON.stringify(element)} is empty or has an empty option between its commas`);
      if (/[\0-\x1f]/.test(o)) throw new NodeVolumeError('invalid', `mount option ${JSON.stringify(o)} contains a control character`);
      if (MOUNT_ACTIONS.test(o)) throw new NodeVolumeError('invalid', `mount option ${JSON.stringify(o)} changes what mount does, not how the filesystem is mounted: not accepted`);
      out.push(o);
    }
  }
  return out;
}

/** Whether mount(8) mounts read-only with these options: the last of ro and rw decides. */
export function readOnlyByOptions(options: string[]): boolean {
  return options.findLast((o) => o === 'ro' || o === 'rw') === 'ro';
}

export async function fsTypeArg(fsType: unknown): Promise<string> {
  const t = fsType === undefined || fsType === '' ? 'ext4' : fsType;
  const supported = await supportedFsTypes();
  if (typeof t !== 'string' || !supported.includes(t)) {
    throw new NodeVolumeError('invalid', `filesystem type ${JSON.stringify(t)} is not offered on this node (offered: ${supported.join(', ')})`);
  }
  return t;
}

export function errnoOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}
