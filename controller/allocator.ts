// The one place a program hands out a free disk and takes it back: the claims binder (a NodeDiskClaim) and
// the CSI driver's controller service (a PersistentVolume) both reserve through here, from the same index
// of free disks (./free-disk-index.ts, api/free-disk.ts's notion of free), with the same conditional write.
//
// - A disk is chosen from the index (a guide), judged again as the informer's cache has it, and reserved by a
//   server-side apply of spec.desired conditional on the resourceVersion it was chosen from: if anyone (a
//   person, the label policy, another program) wrote the disk since, the API server refuses it, the cache
//   gets a fresh read and the next candidate is tried (ADR 11). Two programs in two processes cannot both
//   win a disk; two workers of one process do not even try (the disks in flight are skipped).
// - A release is conditional the same way, and only of the reservation the caller holds (owner and UID):
//   a disk someone else took since is left alone. It may carry a wipe request (ADR 38).
import type { NodeDiskClient } from '../api/client.ts';
import { API_VERSION, KIND } from '../api/constants.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import { isApiError, isStaleVersionConflict } from '../lib/kube/errors.ts';
import type { Informer } from '../lib/kube/informer.ts';
import type { Logger } from '../lib/runtime/log.ts';
import { FreeDiskIndex } from './free-disk-index.ts';

/** Disks tried, each from a fresh read after a conflict, before the caller is told to come back. */
export const MAX_ATTEMPTS = 5;

export interface AllocatorOptions {
  disks: NodeDiskClient;
  /** The program's NodeDisk informer: candidates are judged on its cache, and the writes stored in it. */
  diskInformer: Informer<NodeDisk>;
  /** The field manager of the writes (the controller's, the CSI controller's): each writer owns its own. */
  fieldManager: string;
  log: Logger;
}

/** Who a reservation is for. */
export interface Holder {
  owner: string;
  ownerUID: string;
}

export type ReserveOutcome =
  /** Reserved: the disk as the API server returned it. */
  | { kind: 'reserved'; disk: NodeDisk }
  /** No candidate fits. */
  | { kind: 'none' }
  /** The only fitting disks are being reserved by this program's other workers: look again soon. */
  | { kind: 'busy' }
  /** Every attempt met a disk that changed since it was chosen: look again soon. */
  | { kind: 'conflicts' };

export interface ReserveRequest {
  holder: Holder;
  /** The disks to try, best first (read again after each conflict). */
  candidates: () => Iterable<NodeDisk>;
  /** Whether a disk (as the cache has it now) may be given to this holder. */
  fits: (nd: NodeDisk) => boolean;
}

export class Allocator {
  /** The NodeDisks by what a holder asks of them: a reservation looks at candidates only. */
  readonly index = new FreeDiskIndex();
  /** Disks being reserved right now: the other workers choose another one rather than collide. */
  private readonly inFlight = new Set<string>();
  private readonly o: AllocatorOptions;

  constructor(o: AllocatorOptions) {
    this.o = o;
  }

  get informer(): Informer<NodeDisk> {
    return this.o.diskInformer;
  }

  /** The disk `name` as the cache has it (the index's copy may be older). */
  cached(name: string): NodeDisk | undefined {
    return this.o.diskInformer.cache.get(name);
  }

  /** A NodeDisk changed or is gone (the informer's event): the index follows the cache. */
  diskChanged(name: string): void {
    this.index.update(name, this.o.diskInformer.cache.get(name));
  }

  /**
   * The index holds what the cache holds. Every change reaches it as the informer's event or the allocator's
   * own write; a cache that differs in size changed some other way, and the index is built again from it.
   */
  syncIndex(): void {
    if (this.index.size !== this.o.diskInformer.cache.size) this.index.rebuild(this.o.diskInformer.cache);
  }

  /** Reserves the first fitting candidate for the holder, conditional on the version it was chosen from. */
  async reserve(r: ReserveRequest): Promise<ReserveOutcome> {
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      let pick: NodeDisk | undefined;
      let busy = false;
      for (const seen of r.candidates()) {
        const nd = this.o.diskInformer.cache.get(seen.metadata.name ?? '');
        if (!nd || !r.fits(nd)) continue;
        if (this.inFlight.has(nd.metadata.name ?? '')) {
          busy = true;
          continue;
        }
        pick = nd;
        break;
      }
      if (!pick) return busy ? { kind: 'busy' } : { kind: 'none' };
      const disk = await this.reserveDisk(pick, r.holder);
      if (disk) return { kind: 'reserved', disk };
      this.o.log.debug('the NodeDisk changed since it was chosen; choosing again', { owner: r.holder.owner, nodeDisk: pick.metadata.name, attempt });
    }
    return { kind: 'conflicts' };
  }

  /** Whether one of this program's workers is reserving the disk right now. */
  busy(name: string): boolean {
    return this.inFlight.has(name);
  }

  /**
   * Reserves `pick` (as the cache has it) for the holder, conditional on the version it was chosen from:
   * the disk as the API server returned it, or undefined when anyone wrote it since (the cache then has a
   * fresh read, so the next choice sees what won). Marked busy from the call on, before anything is awaited.
   */
  async reserveDisk(pick: NodeDisk, holder: Holder): Promise<NodeDisk | undefined> {
    const name = pick.metadata.name ?? '';
    this.inFlight.add(name);
    try {
      // force: the default Available belongs to the agent (ADR 4); the resourceVersion keeps force from
      // taking a disk anyone wrote since it was chosen.
      const updated = await this.o.disks.apply(
        {
          apiVersion: API_VERSION,
          kind: KIND,
          metadata: { name, resourceVersion: pick.metadata.resourceVersion },
          spec: { desired: { state: 'Reserved', owner: holder.owner, ownerUID: holder.ownerUID } },
        },
        { fieldManager: this.o.fieldManager, force: true },
      );
      return this.store(updated);
    } catch (err) {
      if (!isStaleVersionConflict(err) && !isApiError(err, 404)) throw err;
      await this.refresh(name);
      return undefined;
    } finally {
      this.inFlight.delete(name);
    }
  }

  /**
   * Records `holder` on a disk already reserved for its owner (a UID not recorded yet), conditional on the
   * version read; the disk as it is now when that write fails.
   */
  async adopt(nd: NodeDisk, holder: Holder): Promise<NodeDisk> {
    const name = nd.metadata.name ?? '';
    try {
      const updated = await this.o.disks.apply(
        {
          apiVersion: API_VERSION,
          kind: KIND,
          metadata: { name, resourceVersion: nd.metadata.resourceVersion },
          spec: { desired: { state: 'Reserved', owner: holder.owner, ownerUID: holder.ownerUID } },
        },
        { fieldManager: this.o.fieldManager, force: true },
      );
      return this.store(updated);
    } catch (err) {
      if (!isStaleVersionConflict(err) && !isApiError(err, 404)) throw err;
      return (await this.refresh(name)) ?? nd;
    }
  }

  /**
   * Back to Available with no owner, as long as the disk is still reserved as `nd` says (same owner and
   * UID), conditional on the version read: a disk someone else took is left alone. With `wipe`, a wipe
   * request too: nobody gets the disk before its agent has wiped it. True when this released it.
   */
  async release(nd: NodeDisk, o: { wipe?: string; why: string }): Promise<boolean> {
    let current: NodeDisk | undefined = nd;
    for (let attempt = 1; current && attempt <= MAX_ATTEMPTS; attempt++) {
      const [was, now] = [nd.spec.desired, current.spec.desired];
      if (now?.owner !== was?.owner || (now?.ownerUID ?? '') !== (was?.ownerUID ?? '') || now?.state !== 'Reserved') return false;
      const name = current.metadata.name ?? '';
      try {
        const updated = await this.o.disks.apply(
          {
            apiVersion: API_VERSION,
            kind: KIND,
            metadata: { name, resourceVersion: current.metadata.resourceVersion },
            spec: { desired: { state: 'Available', ...(o.wipe ? { wipe: o.wipe } : {}) } },
          },
          { fieldManager: this.o.fieldManager, force: true },
        );
        this.store(updated);
        this.o.log.info('released a disk', { nodeDisk: name, owner: was?.owner, why: o.why, ...(o.wipe ? { wipe: o.wipe } : {}) });
        return true;
      } catch (err) {
        if (isApiError(err, 404)) return false;
        if (!isStaleVersionConflict(err)) throw err;
        current = await this.refresh(name);
      }
    }
    if (current) throw new Error(`could not release NodeDisk ${current.metadata.name}: it kept changing`);
    return false;
  }

  /** A fresh read of a disk into the cache (a write found it changed): the next choice sees what won. */
  async refresh(name: string): Promise<NodeDisk | undefined> {
    try {
      return this.store(await this.o.disks.get(name));
    } catch (err) {
      if (!isApiError(err, 404)) throw err;
      this.o.diskInformer.cache.delete(name);
      this.index.update(name, undefined);
      return undefined;
    }
  }

  /** What the allocator itself put in the disk cache, into the index too. */
  store(nd: NodeDisk): NodeDisk {
    const stored = this.o.diskInformer.storeOwnWrite(nd);
    this.index.update(stored.metadata.name ?? '', stored);
    return stored;
  }
}
