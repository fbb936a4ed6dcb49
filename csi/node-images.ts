// The disk images a volume is served from: found by diskID in the disk dir, or by NodeDisk name for a call
// that carries only a volume ID; checked to be regular files, never followed through a link.
import { constants } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { basename, join } from 'node:path';
import { DISK_SUFFIX } from '../api/constants.ts';
import { diskIdFromFileName, diskIdProblem, nodeDiskName } from '../api/names.ts';
import { type ImageRef, imageRef } from './loop.ts';
import { absolutePath, errnoOf } from './node-args.ts';
import { NodeVolumeError } from './node-errors.ts';

const OPEN_IMAGE_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

/**
 * Checks that the image is a regular file, not a link or anything else, looked at without following a
 * link (lstat, then an O_NOFOLLOW open checked with fstat, so an entry swapped in between is caught).
 */
export async function checkImage(image: string): Promise<string> {
  const name = basename(image);
  let st;
  try {
    st = await fsp.lstat(image);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') throw new NodeVolumeError('not-found', `disk image ${image} does not exist on this node`, { cause: err });
    throw new NodeVolumeError('internal', `cannot inspect disk image ${image}: ${(err as Error).message}`, { cause: err });
  }
  if (st.isSymbolicLink()) throw new NodeVolumeError('failed-precondition', `disk image ${image} is a symbolic link: a disk image is never followed through a link`);
  if (!st.isFile()) throw new NodeVolumeError('failed-precondition', `disk image ${image} is not a regular file`);
  let fh;
  try {
    fh = await fsp.open(image, OPEN_IMAGE_FLAGS);
  } catch (err) {
    const code = errnoOf(err);
    if (code === 'ELOOP') throw new NodeVolumeError('failed-precondition', `disk image ${image} is a symbolic link: a disk image is never followed through a link`, { cause: err });
    if (code === 'ENOENT') throw new NodeVolumeError('not-found', `disk image ${image} does not exist on this node`, { cause: err });
    throw new NodeVolumeError('internal', `cannot open disk image ${name}: ${(err as Error).message}`, { cause: err });
  }
  try {
    const fst = await fh.stat();
    if (!fst.isFile() || fst.ino !== st.ino || fst.dev !== st.dev)
      throw new NodeVolumeError('failed-precondition', `disk image ${image} changed while it was looked at: not a stable regular file`);
  } finally {
    await fh.close();
  }
  return image;
}

/** The image as it is now; a missing one is not found. */
export async function existingImage(path: string): Promise<ImageRef> {
  const ref = await imageRef(path);
  if (ref.identity === undefined) throw new NodeVolumeError('not-found', `disk image ${path} does not exist on this node`);
  return ref;
}

/**
 * The disk image `<diskDir>/<diskID>.img`, checked: a valid diskID (the agent's rules, so never a path
 * out of the dir), a regular file that is not a link. The dir is resolved, so the path is the one the
 * kernel reports for the loop device's backing file.
 */
export async function openImage(diskDir: string, diskID: string): Promise<string> {
  if (typeof diskID !== 'string') throw new NodeVolumeError('invalid', 'diskID is missing');
  const problem = diskIdProblem(diskID);
  if (problem) throw new NodeVolumeError('invalid', problem);
  absolutePath('disk dir', diskDir);
  let dir;
  try {
    dir = await fsp.realpath(diskDir);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') throw new NodeVolumeError('not-found', `disk dir ${diskDir} does not exist on this node`, { cause: err });
    throw new NodeVolumeError('internal', `cannot resolve disk dir ${diskDir}: ${(err as Error).message}`, { cause: err });
  }
  return checkImage(join(dir, `${diskID}${DISK_SUFFIX}`));
}

/**
 * The images of the disk dir whose NodeDisk name (api/names.ts nodeDiskName) on this node is `name`:
 * what a request that carries only a volume ID (`<NodeDisk name>/…`: NodeUnstageVolume) is found by,
 * with no API access. Usually one; two files whose names make the same NodeDisk name give both (the
 * agent reports only one of them as a NodeDisk), none gives an empty list.
 */
export async function imagesNamed(diskDir: string, nodeName: string, name: string): Promise<string[]> {
  absolutePath('disk dir', diskDir);
  let dir;
  let entries;
  try {
    dir = await fsp.realpath(diskDir);
    entries = await fsp.readdir(dir);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return [];
    throw new NodeVolumeError('internal', `cannot read disk dir ${diskDir}: ${(err as Error).message}`, { cause: err });
  }
  return entries
    .filter((f) => {
      const id = diskIdFromFileName(f);
      return id !== undefined && diskIdProblem(id) === undefined && nodeDiskName(nodeName, id) === name;
    })
    .sort()
    .map((f) => join(dir, f));
}
