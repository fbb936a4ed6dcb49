// The CSI Node service: the kubelet's calls that put a NodeDisk in front of a pod. The work on the node
// (loop device, filesystem, mounts) is ./node-volumes.ts; this layer checks each request, finds the image
// of the volume in the disk dir, and answers in the spec's terms. It keeps nothing in memory but the calls
// in progress: what is staged and published is found again on the node, so a restart under running pods
// loses nothing. It needs no Kubernetes API access: the volume's disk comes with the request.
import { basename } from 'node:path';
import { CSI_TOPOLOGY_KEY, DEFAULT_BY_ID_DIR } from '../api/constants.ts';
import { diskIdFromFileName, isDriveId, nodeDiskName } from '../api/names.ts';
import { checkCapability, fsTypeOf } from './capabilities.ts';
import { OneAtATime } from '../lib/runtime/one-at-a-time.ts';
import { CsiError, invalid } from './errors.ts';
import type { VolumeStats } from './node-volumes.ts';
import type { NodeGetVolumeStatsRequest, NodePublishVolumeRequest, NodeStageVolumeRequest, NodeUnpublishVolumeRequest, NodeUnstageVolumeRequest, VolumeCapability } from './types.ts';
import { parseVolumeId } from './volume-id.ts';
import type { VolumeUsage } from './types.ts';

/** The work on the node (./node-volumes.ts), each operation idempotent. */
export interface NodeVolumes {
  /** The image `<diskDir>/<diskID>.img`, checked to be a regular file reached by no symlink. */
  openImage(diskDir: string, diskID: string): Promise<string>;
  /** The images of the disk dir whose NodeDisk name on `nodeName` is `name` (a call with only a volume ID). */
  imagesNamed(diskDir: string, nodeName: string, name: string): Promise<string[]>;
  stage(o: { image: string; stagingPath: string; mode: 'filesystem' | 'block'; fsType: string; mountOptions: string[]; readOnly: boolean }): Promise<unknown>;
  /** A drive's device node, from the by-id name its NodeDisk was made from (./node-drive-volumes.ts). */
  openDrive(byIdDir: string, byIdName: string): Promise<string>;
  stageDrive(o: {
    device: string;
    diskID: string;
    diskDir: string;
    stagingPath: string;
    mode: 'filesystem' | 'block';
    fsType: string;
    mountOptions: string[];
    readOnly: boolean;
  }): Promise<unknown>;
  unstage(o: { stagingPath: string; diskDir: string; image?: string }): Promise<void>;
  publish(o: { image?: string; device?: string; stagingPath: string; targetPath: string; mode: 'filesystem' | 'block'; readOnly: boolean; mountOptions: string[] }): Promise<void>;
  unpublish(targetPath: string): Promise<void>;
  volumeStats(path: string): Promise<VolumeStats>;
}

/** The kinds of failure the node work reports (a `code` on its errors). */
const VOLUME_ERROR_CODES = {
  invalid: 'INVALID_ARGUMENT',
  'not-found': 'NOT_FOUND',
  'failed-precondition': 'FAILED_PRECONDITION',
  'already-exists': 'ALREADY_EXISTS',
  internal: 'INTERNAL',
} as const;

export interface NodeServiceOptions {
  nodeName: string;
  diskDir: string;
  /** Where drives are named (a drive volume's context names one of them). */
  byIdDir?: string;
  volumes: NodeVolumes;
}

/** What a volume is on: a disk image, or a drive's device. */
type VolumeSource = { image: string } | { device: string; diskID: string };

function mapVolumeError(err: unknown): never {
  if (err instanceof CsiError) throw err;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && code in VOLUME_ERROR_CODES) throw new CsiError(VOLUME_ERROR_CODES[code as keyof typeof VOLUME_ERROR_CODES], (err as Error).message);
  throw err;
}

function modeOf(cap: VolumeCapability): 'filesystem' | 'block' {
  return cap.access_type === 'block' ? 'block' : 'filesystem';
}

function readOnlyMode(cap: VolumeCapability): boolean {
  const m = cap.access_mode?.mode;
  return m === 'SINGLE_NODE_READER_ONLY' || m === 'MULTI_NODE_READER_ONLY';
}

export class NodeService {
  private readonly o: NodeServiceOptions;
  /**
   * Calls on one volume run one at a time: a second one (the kubelet publishing one volume to two pods of
   * a node, or repeating a call that timed out) waits for the first, then finds its work done or does it.
   */
  private readonly perVolume = new OneAtATime();

  constructor(o: NodeServiceOptions) {
    this.o = o;
  }

  private async exclusive<T>(volumeId: string, work: () => Promise<T>): Promise<T> {
    try {
      return await this.perVolume.run(volumeId, work);
    } catch (err) {
      return mapVolumeError(err);
    }
  }

  /** What a volume is on: a drive named by its context, else its image (./imageOf). */
  private async sourceOf(volumeIdText: string, context: Record<string, string> | undefined): Promise<VolumeSource> {
    const diskID = context?.diskID;
    if (diskID === undefined || !isDriveId(diskID)) return { image: await this.imageOf(volumeIdText, context) };
    const id = parseVolumeId(volumeIdText);
    if (!id) throw new CsiError('NOT_FOUND', `volume ${volumeIdText} is not a NodeDisks volume`);
    if (context?.node !== undefined && context.node !== this.o.nodeName) throw new CsiError('FAILED_PRECONDITION', `volume ${volumeIdText} is on node ${context.node}, not on ${this.o.nodeName}`);
    if (nodeDiskName(this.o.nodeName, diskID) !== id.nodeDisk)
      throw new CsiError('NOT_FOUND', `volume ${volumeIdText}: its context names disk ${JSON.stringify(diskID)}, which is not NodeDisk ${id.nodeDisk} of node ${this.o.nodeName}`);
    const byIdName = context?.byIdName;
    if (byIdName === undefined) throw new CsiError('INVALID_ARGUMENT', `volume ${volumeIdText}: a drive's volume context names its by-id name (byIdName); this one has none`);
    try {
      return { device: await this.o.volumes.openDrive(this.o.byIdDir ?? DEFAULT_BY_ID_DIR, byIdName), diskID };
    } catch (err) {
      return mapVolumeError(err);
    }
  }

  /** The image of a volume: from its context (stage, publish) or, when there is none, by its NodeDisk name among this node's disks. */
  private async imageOf(volumeIdText: string, context: Record<string, string> | undefined): Promise<string> {
    const id = parseVolumeId(volumeIdText);
    if (!id) throw new CsiError('NOT_FOUND', `volume ${volumeIdText} is not a NodeDisks volume`);
    let diskID = context?.diskID;
    if (context?.node !== undefined && context.node !== this.o.nodeName) throw new CsiError('FAILED_PRECONDITION', `volume ${volumeIdText} is on node ${context.node}, not on ${this.o.nodeName}`);
    if (diskID === undefined) {
      let images: string[];
      try {
        images = await this.o.volumes.imagesNamed(this.o.diskDir, this.o.nodeName, id.nodeDisk);
      } catch (err) {
        return mapVolumeError(err);
      }
      if (images.length === 0) throw new CsiError('NOT_FOUND', `volume ${volumeIdText}: NodeDisk ${id.nodeDisk} is not a disk of node ${this.o.nodeName}`);
      // Two file names that make the same NodeDisk name: the agent reports one of them; which is not known here.
      if (images.length > 1) throw new CsiError('FAILED_PRECONDITION', `volume ${volumeIdText}: images ${images.join(', ')} all make NodeDisk ${id.nodeDisk}: rename all but one`);
      diskID = diskIdFromFileName(basename(images[0] ?? ''));
      if (diskID === undefined) throw new CsiError('INTERNAL', `volume ${volumeIdText}: ${images[0]} is not a disk image name`);
    } else if (nodeDiskName(this.o.nodeName, diskID) !== id.nodeDisk) {
      throw new CsiError('NOT_FOUND', `volume ${volumeIdText}: its context names disk ${JSON.stringify(diskID)}, which is not NodeDisk ${id.nodeDisk} of node ${this.o.nodeName}`);
    }
    try {
      return await this.o.volumes.openImage(this.o.diskDir, diskID);
    } catch (err) {
      return mapVolumeError(err);
    }
  }

  readonly handlers = {
    NodeGetInfo: async () => ({
      node_id: this.o.nodeName,
      max_volumes_per_node: 0,
      accessible_topology: { segments: { [CSI_TOPOLOGY_KEY]: this.o.nodeName } },
    }),

    NodeGetCapabilities: async () => ({
      capabilities: [{ rpc: { type: 'STAGE_UNSTAGE_VOLUME' } }, { rpc: { type: 'GET_VOLUME_STATS' } }, { rpc: { type: 'VOLUME_CONDITION' } }],
    }),

    NodeStageVolume: async (req: NodeStageVolumeRequest) => {
      if (!req.volume_id) throw invalid('volume_id is required');
      if (!req.staging_target_path) throw invalid('staging_target_path is required');
      const cap = req.volume_capability;
      if (!cap) throw invalid('volume_capability is required');
      checkCapability(cap);
      return this.exclusive(req.volume_id, async () => {
        const source = await this.sourceOf(req.volume_id, req.volume_context);
        const how = { stagingPath: req.staging_target_path, mode: modeOf(cap), fsType: fsTypeOf(cap), mountOptions: cap.mount?.mount_flags ?? [], readOnly: readOnlyMode(cap) };
        if ('device' in source) await this.o.volumes.stageDrive({ ...source, diskDir: this.o.diskDir, ...how });
        else await this.o.volumes.stage({ image: source.image, ...how });
        return {};
      });
    },

    NodeUnstageVolume: async (req: NodeUnstageVolumeRequest) => {
      if (!req.volume_id) throw invalid('volume_id is required');
      if (!req.staging_target_path) throw invalid('staging_target_path is required');
      return this.exclusive(req.volume_id, async () => {
        const image = await this.imageOf(req.volume_id, undefined).catch((err: unknown) => {
          // The disk is gone from the node: nothing of it can be attached any more; unmount what is left.
          if (err instanceof CsiError && err.code === 'NOT_FOUND') return undefined;
          throw err;
        });
        await this.o.volumes.unstage({ stagingPath: req.staging_target_path, diskDir: this.o.diskDir, ...(image ? { image } : {}) });
        return {};
      });
    },

    NodePublishVolume: async (req: NodePublishVolumeRequest) => {
      if (!req.volume_id) throw invalid('volume_id is required');
      if (!req.staging_target_path) throw invalid('staging_target_path is required (this driver stages volumes)');
      if (!req.target_path) throw invalid('target_path is required');
      const cap = req.volume_capability;
      if (!cap) throw invalid('volume_capability is required');
      checkCapability(cap);
      return this.exclusive(req.volume_id, async () => {
        const source = await this.sourceOf(req.volume_id, req.volume_context);
        await this.o.volumes.publish({
          ...('device' in source ? { device: source.device } : { image: source.image }),
          stagingPath: req.staging_target_path,
          targetPath: req.target_path,
          mode: modeOf(cap),
          readOnly: req.readonly || readOnlyMode(cap),
          mountOptions: cap.mount?.mount_flags ?? [],
        });
        return {};
      });
    },

    NodeUnpublishVolume: async (req: NodeUnpublishVolumeRequest) => {
      if (!req.volume_id) throw invalid('volume_id is required');
      if (!req.target_path) throw invalid('target_path is required');
      return this.exclusive(req.volume_id, async () => {
        await this.o.volumes.unpublish(req.target_path);
        return {};
      });
    },

    NodeGetVolumeStats: async (req: NodeGetVolumeStatsRequest) => {
      if (!req.volume_id) throw invalid('volume_id is required');
      if (!req.volume_path) throw invalid('volume_path is required');
      if (!parseVolumeId(req.volume_id)) throw new CsiError('NOT_FOUND', `volume ${req.volume_id} is not a NodeDisks volume`);
      // The kubelet gives the absolute path it published to; anything else is no place a volume of ours is.
      if (!req.volume_path.startsWith('/')) throw new CsiError('NOT_FOUND', `volume ${req.volume_id} is not at ${JSON.stringify(req.volume_path)} (not an absolute path)`);
      try {
        const stats = await this.o.volumes.volumeStats(req.volume_path);
        const usage: VolumeUsage[] =
          stats.kind === 'filesystem'
            ? [
                { unit: 'BYTES', ...stats.bytes },
                { unit: 'INODES', ...stats.inodes },
              ]
            : [{ unit: 'BYTES', total: stats.bytes.total, available: 0, used: 0 }];
        return { usage, volume_condition: stats.condition };
      } catch (err) {
        return mapVolumeError(err);
      }
    },
  };
}
