// The CSI Controller service: a PersistentVolume is a NodeDisk reserved for it. CreateVolume reserves, on
// the node the scheduler chose, the smallest free disk that fits, through the allocator the claims binder
// uses (controller/allocator.ts: the same index, the same conditional write); DeleteVolume releases it with
// a wipe request, so the next owner gets it only after its node agent has wiped it (ADR 38); GetCapacity
// tells the scheduler, per node, what is free and the largest disk (docs/adr/0039-csi-driver.md).
//
// Every call is idempotent: the truth is the NodeDisk's owner (`pv:<name>`), found again by any replica
// after any restart; a call repeated after its answer was lost gets the same answer.
import { createHash } from 'node:crypto';
import { CSI_TOPOLOGY_KEY, PV_OWNER_PREFIX } from '../api/constants.ts';
import { type AgentView, notFree } from '../api/free-disk.ts';
import { labelSelectorOf, matchesSelector, selectorWords } from '../api/label-selector.ts';
import type { LabelSelector } from '../api/v1alpha1/claim-types.ts';
import { holdsData } from '../api/wipe.ts';
import { isDriveId } from '../api/names.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import type { NodeDiskClient } from '../api/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import type { Logger } from '../lib/runtime/log.ts';
import type { Allocator } from '../controller/allocator.ts';
import { checkCapabilities, fsTypeOf, minDiskBytes } from './capabilities.ts';
import { CsiError, invalid } from './errors.ts';
import type { CreateVolumeRequest, DeleteVolumeRequest, GetCapacityRequest, Topology, ValidateVolumeCapabilitiesRequest, Volume } from './types.ts';
import { parseVolumeId, volumeId } from './volume-id.ts';

/** A CreateVolume name we accept: a Kubernetes object name (the PV's), which the owner string and the volume ID carry. */
const VOLUME_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,198}[A-Za-z0-9])?$/;
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export interface ControllerServiceOptions {
  allocator: Allocator;
  disks: NodeDiskClient;
  log: Logger;
  /** Why the service cannot answer yet (its informer has not synced), or undefined. */
  notReady: () => string | undefined;
  /** The agents' heartbeats as this program sees them; without, an agent is judged by its disks' Ready condition. */
  agents?: () => AgentView;
}

/** The owner string of a PV's reservation. */
export function pvOwner(volumeName: string): string {
  return `${PV_OWNER_PREFIX}${volumeName}`;
}

/**
 * The UID recorded with a PV's reservation: the PVC's, which the provisioner puts in the PV's name
 * (`pvc-<uid>`, whatever the prefix); for a name without one (a test's), a digest of the name, so the
 * reservation still names one request and no other.
 */
export function pvOwnerUID(volumeName: string): string {
  return UUID.exec(volumeName)?.[0] ?? `name-${createHash('sha256').update(volumeName).digest('hex').slice(0, 32)}`;
}

/**
 * The wipe token of a PV's release: unique to the reservation, not only to the request. A name without a
 * PVC UID (csi-sanity's, a person's) gives the same UID each time it is reserved again, and a release
 * with a token its agent already reported done is refused (a release asks for a new wipe): the
 * NodeDisk's generation while reserved tells one reservation from the next, and stays the same for a
 * DeleteVolume repeated after its answer was lost.
 */
export function pvWipeToken(nd: NodeDisk, volumeName: string): string {
  return `pv-${nd.spec.desired?.ownerUID || pvOwnerUID(volumeName)}-g${nd.metadata.generation ?? 0}`;
}

/**
 * The StorageClass parameter that makes a class of disks: a label selector in kubectl's words
 * (`localtest.example.com/media=nvme`, `tier in (fast)`), matched against the NodeDisks' labels. A volume of
 * the class gets, and the capacity of the class counts, only the disks it selects.
 */
export const DISK_SELECTOR_PARAMETER = 'diskSelector';

/** The class's disk selector from the request's parameters; a parameter this driver does not know is refused, a typo never ignored. */
export function classSelector(parameters: Record<string, string> | undefined): LabelSelector | undefined {
  let selector: LabelSelector | undefined;
  for (const [key, value] of Object.entries(parameters ?? {})) {
    // The external-provisioner's own (csi.storage.k8s.io/pv/name, …): not the class's.
    if (key.startsWith('csi.storage.k8s.io/')) continue;
    if (key !== DISK_SELECTOR_PARAMETER) throw invalid(`StorageClass parameter ${JSON.stringify(key)} is not one this driver takes (${DISK_SELECTOR_PARAMETER}: a label selector of NodeDisks)`);
    try {
      selector = labelSelectorOf(value);
    } catch (err) {
      throw invalid(`StorageClass parameter ${DISK_SELECTOR_PARAMETER} ${JSON.stringify(value)}: ${(err as Error).message}`);
    }
  }
  return selector;
}

/** The filesystem types a request's capabilities name, for a message. */
function fsTypesOf(req: CreateVolumeRequest): string {
  return [...new Set(req.volume_capabilities.filter((c) => c.access_type === 'mount').map(fsTypeOf))].join(' or ');
}

/** The nodes a request may be placed on, preferred first; undefined: anywhere. */
function nodesOf(req: CreateVolumeRequest): string[] | undefined {
  const r = req.accessibility_requirements;
  if (!r || (r.preferred.length === 0 && r.requisite.length === 0)) return undefined;
  const nodes: string[] = [];
  for (const t of [...r.preferred, ...r.requisite]) {
    const node = t.segments[CSI_TOPOLOGY_KEY];
    if (node === undefined) throw invalid(`accessibility requirement ${JSON.stringify(t.segments)} has no ${CSI_TOPOLOGY_KEY} segment: this driver places volumes by node only`);
    if (!nodes.includes(node)) nodes.push(node);
  }
  return nodes;
}

function topologyOf(nd: NodeDisk): Topology[] {
  return [{ segments: { [CSI_TOPOLOGY_KEY]: nd.spec.nodeName } }];
}

/**
 * The CSI route's own filter beside the one predicate: a disk that may go to a new holder and holds no
 * earlier owner's bytes (a disk released without a wipe keeps them, ADR 38): the node side formats only a
 * blank disk, and a pod would otherwise mount the old filesystem as its own.
 */
function blank(nd: NodeDisk): boolean {
  return !holdsData(nd);
}

function capacityOf(nd: NodeDisk): number {
  return nd.status?.node?.capacityBytes ?? 0;
}

function volumeOf(nd: NodeDisk, volumeName: string): Volume {
  return {
    volume_id: volumeId(nd.metadata.name ?? '', volumeName),
    capacity_bytes: capacityOf(nd),
    // A drive's by-id name: how the node side finds the device (spec.path is its host path in the by-id dir).
    volume_context: {
      nodeDisk: nd.metadata.name ?? '',
      diskID: nd.spec.diskID,
      node: nd.spec.nodeName,
      ...(isDriveId(nd.spec.diskID) ? { byIdName: nd.spec.path.slice(nd.spec.path.lastIndexOf('/') + 1) } : {}),
    },
    accessible_topology: topologyOf(nd),
  };
}

export class ControllerService {
  private readonly o: ControllerServiceOptions;
  /**
   * Volume names with a CreateVolume or DeleteVolume in progress: the provisioner may send the same request
   * again before the first has answered, and two lookups of "already reserved?" must not both say no.
   */
  private readonly busy = new Set<string>();
  constructor(o: ControllerServiceOptions) {
    this.o = o;
  }

  private ready(): void {
    const problem = this.o.notReady();
    if (problem) throw new CsiError('UNAVAILABLE', `not ready: ${problem}`);
  }

  /** The disks reserved for `owner`, as the cache has them now. */
  private held(owner: string): NodeDisk[] {
    const out: NodeDisk[] = [];
    for (const name of this.o.allocator.index.reservedFor(owner)) {
      const nd = this.o.allocator.cached(name);
      if (nd?.spec.desired?.state === 'Reserved' && nd.spec.desired.owner === owner) out.push(nd);
    }
    return out;
  }

  /** The disks reserved for `owner` as the API server has them now (a consistent list by the owner field), stored into the cache. */
  private async heldByServer(owner: string): Promise<NodeDisk[]> {
    const found = (await this.o.disks.list({ fieldSelector: `spec.desired.owner=${owner}` })).items;
    return found.map((nd) => this.o.allocator.store(nd)).filter((nd) => nd.spec.desired?.state === 'Reserved' && nd.spec.desired.owner === owner);
  }

  private async exclusive<T>(name: string, work: () => Promise<T>): Promise<T> {
    if (this.busy.has(name)) throw new CsiError('ABORTED', `an operation on volume ${name} is in progress`);
    this.busy.add(name);
    try {
      return await work();
    } finally {
      this.busy.delete(name);
    }
  }

  /** CreateVolume once checked: the disk already reserved for the name, or a new one. */
  private async create(req: CreateVolumeRequest, nodes: string[] | undefined, min: number, max: number, selector: LabelSelector | undefined): Promise<{ volume: Volume }> {
    const owner = pvOwner(req.name);
    const fitsSize = (nd: NodeDisk) => capacityOf(nd) >= min && (max === 0 || capacityOf(nd) <= max);

    // Asked before: the same answer, if the request is the same. The cache may lag behind a reservation
    // another replica made before it lost its leadership and its answer (a provisioner failover): before a
    // new disk is taken, the API server itself is asked, so one volume never gets two disks.
    const existing = this.held(owner)[0] ?? (await this.heldByServer(owner))[0];
    if (existing) {
      if (!fitsSize(existing))
        throw new CsiError('ALREADY_EXISTS', `volume ${req.name} exists with ${capacityOf(existing)} bytes, which the requested capacity range (${min}..${max || 'any'}) excludes`);
      if (!matchesSelector(selector, existing.metadata.labels))
        throw new CsiError(
          'ALREADY_EXISTS',
          `volume ${req.name} exists on NodeDisk ${existing.metadata.name}, which the class's ${DISK_SELECTOR_PARAMETER} ${selectorWords(selector!)} does not select`,
        );
      return { volume: volumeOf(existing, req.name) };
    }
    const holder = { owner, ownerUID: pvOwnerUID(req.name) };
    const alloc = this.o.allocator;
    const agents = this.o.agents?.();
    for (const node of nodes ?? [undefined]) {
      const outcome = await alloc.reserve({
        holder,
        candidates: () => alloc.index.candidates(min, node),
        fits: (nd) => (node === undefined || nd.spec.nodeName === node) && fitsSize(nd) && matchesSelector(selector, nd.metadata.labels) && blank(nd) && notFree(nd, agents) === undefined,
      });
      if (outcome.kind === 'reserved') {
        this.o.log.info('volume provisioned', { volume: req.name, nodeDisk: outcome.disk.metadata.name, node: outcome.disk.spec.nodeName, bytes: capacityOf(outcome.disk) });
        return { volume: volumeOf(outcome.disk, req.name) };
      }
      if (outcome.kind === 'busy' || outcome.kind === 'conflicts') throw new CsiError('ABORTED', 'the disks that fit are being reserved right now: try again');
    }
    const where = nodes ? `node ${nodes.join(' or ')}` : 'any node';
    const floor = minDiskBytes(req.volume_capabilities);
    const because = floor > 0 && floor >= min ? ` (a ${fsTypesOf(req)} filesystem cannot be made on less)` : '';
    const labelled = selector ? ` labelled ${selectorWords(selector)}` : '';
    throw new CsiError('RESOURCE_EXHAUSTED', `no free NodeDisk${labelled} of at least ${min} bytes${because}${max ? ` and at most ${max}` : ''} that holds no earlier data on ${where}`);
  }

  readonly handlers = {
    ControllerGetCapabilities: async () => ({
      capabilities: [{ rpc: { type: 'CREATE_DELETE_VOLUME' } }, { rpc: { type: 'GET_CAPACITY' } }],
    }),

    CreateVolume: async (req: CreateVolumeRequest) => {
      if (!req.name) throw invalid('name is required');
      if (!VOLUME_NAME.test(req.name)) throw invalid(`name ${JSON.stringify(req.name)} is not an object name (letters, digits, '-', '_', '.'; at most 200)`);
      if (req.volume_capabilities.length === 0) throw invalid('volume_capabilities is required');
      checkCapabilities(req.volume_capabilities);
      if (req.volume_content_source) throw invalid('this driver cannot create a volume from a snapshot or another volume (no content source)');
      const min = Math.max(0, req.capacity_range?.required_bytes ?? 0);
      const max = req.capacity_range?.limit_bytes ?? 0;
      const floor = minDiskBytes(req.volume_capabilities);
      if (max > 0 && max < floor) throw new CsiError('OUT_OF_RANGE', `capacity_range limit_bytes ${max} is below the ${floor} bytes a ${fsTypesOf(req)} filesystem needs`);
      if (max < 0 || (max > 0 && max < min)) throw new CsiError('OUT_OF_RANGE', `capacity_range limit_bytes ${max} is below required_bytes ${min}`);
      const nodes = nodesOf(req);
      const selector = classSelector(req.parameters);
      this.ready();
      return await this.exclusive(req.name, () => this.create(req, nodes, Math.max(min, floor), max, selector));
    },

    DeleteVolume: async (req: DeleteVolumeRequest) => {
      if (!req.volume_id) throw invalid('volume_id is required');
      const id = parseVolumeId(req.volume_id);
      // Not an ID this driver gave: no such volume, so nothing to delete (the spec's answer is success).
      if (!id) return {};
      this.ready();
      const owner = pvOwner(id.volumeName);
      // A fresh read, not the cache: this is the one write that gives a disk back.
      const nd = await this.o.disks.get(id.nodeDisk).catch((err: unknown) => {
        if (isApiError(err, 404)) return undefined;
        throw err;
      });
      if (nd?.spec.desired?.state !== 'Reserved' || nd.spec.desired.owner !== owner) return {};
      return await this.exclusive(id.volumeName, async () => {
        const wipe = pvWipeToken(nd, id.volumeName);
        await this.o.allocator.release(nd, { wipe, why: `volume ${id.volumeName} deleted` });
        // Any other disk reserved under the same name (nothing should be) goes back too, wiped.
        for (const other of this.held(owner)) await this.o.allocator.release(other, { wipe, why: `volume ${id.volumeName} deleted` });
        return {};
      });
    },

    ValidateVolumeCapabilities: async (req: ValidateVolumeCapabilitiesRequest) => {
      if (!req.volume_id) throw invalid('volume_id is required');
      if (req.volume_capabilities.length === 0) throw invalid('volume_capabilities is required');
      const id = parseVolumeId(req.volume_id);
      this.ready();
      const nd = id ? this.o.allocator.cached(id.nodeDisk) : undefined;
      if (!id || !nd || nd.spec.desired?.owner !== pvOwner(id.volumeName)) throw new CsiError('NOT_FOUND', `volume ${req.volume_id} does not exist`);
      try {
        checkCapabilities(req.volume_capabilities);
      } catch (err) {
        if (err instanceof CsiError && err.code === 'INVALID_ARGUMENT') return { message: err.message };
        throw err;
      }
      return { confirmed: { volume_context: req.volume_context, volume_capabilities: req.volume_capabilities, parameters: req.parameters } };
    },

    GetCapacity: async (req: GetCapacityRequest) => {
      checkCapabilities(req.volume_capabilities);
      const selector = classSelector(req.parameters);
      this.ready();
      const segments = req.accessible_topology?.segments;
      const node = segments ? segments[CSI_TOPOLOGY_KEY] : undefined;
      // A topology of other keys is no node of ours: nothing there.
      if (segments && Object.keys(segments).length > 0 && node === undefined) return { available_capacity: 0, maximum_volume_size: { value: 0 } };
      // A class whose filesystem needs a disk of some size (xfs) counts only the disks it could be made on.
      const floor = minDiskBytes(req.volume_capabilities);
      let available = 0;
      let largest = 0;
      const agents = this.o.agents?.();
      for (const nd of this.o.allocator.index.candidates(floor, node)) {
        if (!matchesSelector(selector, nd.metadata.labels) || !blank(nd) || notFree(nd, agents)) continue;
        available += capacityOf(nd);
        largest = Math.max(largest, capacityOf(nd));
      }
      return { available_capacity: available, maximum_volume_size: { value: largest } };
    },
  };
}
