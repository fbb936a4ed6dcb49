// The claims binder's index of the NodeDisks it sees (docs/adr/0034-node-disk-claims.md): the free disks
// (api/free-disk.ts) in capacity order, all of them and per node, so that "the smallest free disk of at
// least minCapacity" is a binary search, not a scan of every NodeDisk; how many disks are not free for each
// reason, all of them and per node, for the cluster-wide count the controller logs; which disks are
// reserved for an owner; and how many are reserved for the claims of each namespace (its limit).
//
// It is kept up to date by `update(name, disk)` from the NodeDisk informer's events and after the binder's
// own writes, always with what the cache now holds. It is a guide, not the truth: the binder checks every
// candidate it takes from here against the cache and the claim before it writes, and the write is
// conditional on the version it chose from.
import { CLAIM_OWNER_PREFIX } from '../api/constants.ts';
import { type NotFreeKind, notFreeByRecord } from '../api/free-disk.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';

interface Entry {
  name: string;
  node: string;
  disk: NodeDisk;
  /** Why the disk is not free; undefined when it is. */
  notFree: NotFreeKind | undefined;
  /** Reported capacity in bytes (free disks always have one). */
  capacity: number;
  /** The owner it is reserved for, if any. */
  owner: string | undefined;
}

/** The disks of one node, or of all nodes. */
class Bucket {
  readonly all = new Map<string, Entry>();
  /** Free disks, smallest first, then by name (code-unit order, as NodeDisk names are lowercase). */
  readonly free: Entry[] = [];
  readonly notFree = new Map<NotFreeKind, number>();

  add(e: Entry): void {
    this.all.set(e.name, e);
    if (e.notFree === undefined) this.free.splice(lowerBound(this.free, e.capacity, e.name), 0, e);
    else this.notFree.set(e.notFree, (this.notFree.get(e.notFree) ?? 0) + 1);
  }

  remove(e: Entry): void {
    this.all.delete(e.name);
    if (e.notFree === undefined) {
      const at = lowerBound(this.free, e.capacity, e.name);
      if (this.free[at]?.name === e.name) this.free.splice(at, 1);
    } else {
      const n = (this.notFree.get(e.notFree) ?? 0) - 1;
      if (n > 0) this.notFree.set(e.notFree, n);
      else this.notFree.delete(e.notFree);
    }
  }
}

/** The first position in `free` whose entry is not before (capacity, name). */
function lowerBound(free: readonly Entry[], capacity: number, name = ''): number {
  let lo = 0;
  let hi = free.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const e = free[mid]!;
    if (e.capacity < capacity || (e.capacity === capacity && e.name < name)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const EMPTY = new Bucket();

/** The namespace of a claim's owner (`claim:<namespace>/<name>…`), or undefined for any other owner. */
function claimNamespace(owner: string): string | undefined {
  if (!owner.startsWith(CLAIM_OWNER_PREFIX)) return undefined;
  const slash = owner.indexOf('/', CLAIM_OWNER_PREFIX.length);
  return slash > CLAIM_OWNER_PREFIX.length ? owner.slice(CLAIM_OWNER_PREFIX.length, slash) : undefined;
}

export class FreeDiskIndex {
  private readonly entries = new Map<string, Entry>();
  private readonly everywhere = new Bucket();
  private readonly nodes = new Map<string, Bucket>();
  private readonly owners = new Map<string, Set<string>>();
  /** Disks reserved for a claim (`claim:<namespace>/…`), by namespace: bound, or retained with no claim left. */
  private readonly claimNamespaces = new Map<string, number>();
  private gen = 0;

  /** Grows with every change the index sees: what is derived from it holds while this stays the same. */
  get generation(): number {
    return this.gen;
  }

  /** How many NodeDisks it holds. */
  get size(): number {
    return this.entries.size;
  }

  /** A change it should know of without a disk's change (an agent turned stale, say): bumps the generation. */
  touch(): void {
    this.gen++;
  }

  /** The disk `name` is now `disk` (undefined: gone). */
  update(name: string, disk: NodeDisk | undefined): void {
    const old = this.entries.get(name);
    if (old && old.disk === disk) return;
    this.gen++;
    if (old) this.remove(old);
    if (!disk) return;
    const desired = disk.spec.desired;
    const e: Entry = {
      name,
      node: disk.spec.nodeName,
      disk,
      notFree: notFreeByRecord(disk)?.kind,
      capacity: disk.status?.node?.capacityBytes ?? 0,
      owner: desired?.state === 'Reserved' ? desired.owner : undefined,
    };
    this.entries.set(name, e);
    this.everywhere.add(e);
    const bucket = this.nodes.get(e.node) ?? new Bucket();
    this.nodes.set(e.node, bucket);
    bucket.add(e);
    if (e.owner !== undefined) {
      const names = this.owners.get(e.owner) ?? new Set<string>();
      this.owners.set(e.owner, names);
      names.add(name);
      const ns = claimNamespace(e.owner);
      if (ns !== undefined) this.claimNamespaces.set(ns, (this.claimNamespaces.get(ns) ?? 0) + 1);
    }
  }

  /** Everything in `disks` and nothing else (a cache that changed behind the index's back). */
  rebuild(disks: Iterable<[string, NodeDisk]>): void {
    const seen = new Set<string>();
    for (const [name, nd] of disks) {
      seen.add(name);
      this.update(name, nd);
    }
    for (const name of [...this.entries.keys()]) if (!seen.has(name)) this.update(name, undefined);
  }

  private remove(e: Entry): void {
    this.entries.delete(e.name);
    this.everywhere.remove(e);
    const bucket = this.nodes.get(e.node);
    bucket?.remove(e);
    if (bucket?.all.size === 0) this.nodes.delete(e.node);
    if (e.owner !== undefined) {
      const names = this.owners.get(e.owner);
      names?.delete(e.name);
      if (names?.size === 0) this.owners.delete(e.owner);
      const ns = claimNamespace(e.owner);
      if (ns !== undefined) {
        const n = (this.claimNamespaces.get(ns) ?? 0) - 1;
        if (n > 0) this.claimNamespaces.set(ns, n);
        else this.claimNamespaces.delete(ns);
      }
    }
  }

  private bucket(node: string | undefined): Bucket {
    return node === undefined ? this.everywhere : (this.nodes.get(node) ?? EMPTY);
  }

  /** Free disks of at least `minBytes` (of `node` if given), smallest first, then by name. */
  *candidates(minBytes: number, node?: string): Generator<NodeDisk> {
    const free = this.bucket(node).free;
    for (let i = lowerBound(free, minBytes); i < free.length; i++) yield free[i]!.disk;
  }

  /** How many free disks (of `node` if given) are smaller than `minBytes`. */
  freeSmallerThan(minBytes: number, node?: string): number {
    return lowerBound(this.bucket(node).free, minBytes);
  }

  /** How many disks (of `node` if given) there are. */
  count(node?: string): number {
    return this.bucket(node).all.size;
  }

  /** How many disks (of `node` if given) are not free, by why. */
  notFreeCounts(node?: string): ReadonlyMap<NotFreeKind, number> {
    return this.bucket(node).notFree;
  }

  /** Every disk (of `node` if given), in no particular order. */
  *disks(node?: string): Generator<NodeDisk> {
    for (const e of this.bucket(node).all.values()) yield e.disk;
  }

  /** The disk `name` as the index last saw it. */
  disk(name: string): NodeDisk | undefined {
    return this.entries.get(name)?.disk;
  }

  /** How many disks are reserved for the claims of `namespace`, bound or retained. */
  reservedForNamespace(namespace: string): number {
    return this.claimNamespaces.get(namespace) ?? 0;
  }

  /** The names of the disks reserved for `owner`. */
  reservedFor(owner: string): ReadonlySet<string> {
    return this.owners.get(owner) ?? new Set();
  }
}
