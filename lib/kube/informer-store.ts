// An informer's cache: the objects by key, each as transformed for it, and the handlers told of every
// change. A (re)list or a watch-list's initial state replaces it whole (replace); each watch event after
// that changes one object (apply). It never goes back in time: an object older than the cached one (by
// resourceVersion) does not replace it, whether it comes from the list, a late watch event, or the
// owner's own write (storeOwnWrite).
import type { KubeObject, ObjectMeta } from './types.ts';

export interface InformerHandlers<T> {
  /** Called for adds and updates (old is undefined for an add). */
  onUpsert?(obj: T, old: T | undefined): void;
  onDelete?(obj: T): void;
  /** Called after every successful (re)list, with the whole cache. */
  onSync?(): void;
}

/** The cache key of a namespaced object, as client-go's MetaNamespaceKeyFunc: `namespace/name`. */
export function keyOfNamespaced(obj: { metadata: ObjectMeta }): string {
  return `${obj.metadata.namespace ?? ''}/${obj.metadata.name ?? ''}`;
}

export class InformerStore<T extends KubeObject> {
  readonly cache = new Map<string, T>();
  private filled = false;
  private readonly handlers: InformerHandlers<T>;
  /** Applied to every object before it is cached or handed to a handler (InformerOptions.transform). */
  readonly transform: (obj: T) => T;
  readonly keyOf: (obj: T) => string;

  constructor(handlers: InformerHandlers<T>, transform: (obj: T) => T, keyOf: (obj: T) => string) {
    this.handlers = handlers;
    this.transform = transform;
    this.keyOf = keyOf;
  }

  /** True once a first (re)list or watch-list's initial state is in. */
  get synced(): boolean {
    return this.filled;
  }

  /**
   * Stores an object its owner got back from its own write (or a fresh read) in the cache, unless the
   * cache already holds a newer one. The watch reports that write later, and may first report changes from
   * before it: those must not replace it, or the owner would act on an older spec than it has seen (remove
   * the marker of a disk just reserved again). Returns the object now cached.
   */
  storeOwnWrite(obj: T): T {
    const o = this.transform(obj);
    const name = this.keyOf(o);
    const cached = this.cache.get(name);
    if (cached && isOlder(o, cached)) return cached;
    this.cache.set(name, o);
    return o;
  }

  /**
   * The cache becomes what a (re)list or a watch-list's initial events found at `rv` (`seen`, transformed
   * and keyed): what is not there is deleted, what changed is upserted, and onSync follows.
   */
  replace(seen: Map<string, T>, rv: string): void {
    const listedAt = { metadata: { resourceVersion: rv } };
    for (const [name, old] of this.cache) {
      // Not listed, unless the owner stored it from a write newer than the list (created after it).
      if (!seen.has(name) && !isOlder(listedAt, old)) {
        this.cache.delete(name);
        this.handlers.onDelete?.(old);
      }
    }
    for (const [name, obj] of seen) {
      const old = this.cache.get(name);
      if (old && isOlder(obj, old)) continue; // the owner stored a newer one meanwhile (storeOwnWrite)
      this.cache.set(name, obj);
      if (!old || old.metadata.resourceVersion !== obj.metadata.resourceVersion) this.handlers.onUpsert?.(obj, old);
    }
    this.filled = true;
    this.handlers.onSync?.();
  }

  /** One watch event after the sync, its object transformed and keyed as `name`. */
  apply(type: 'ADDED' | 'MODIFIED' | 'DELETED', name: string, obj: T): void {
    const old = this.cache.get(name);
    // Older than what is cached: the owner stored its own, newer write (storeOwnWrite); a late event
    // must not take the cache back in time, nor a late DELETED drop an object re-created since.
    if (old && isOlder(obj, old)) return;
    if (type === 'DELETED') {
      this.cache.delete(name);
      this.handlers.onDelete?.(obj);
    } else {
      this.cache.set(name, obj);
      this.handlers.onUpsert?.(obj, old);
    }
  }
}

const DECIMAL = /^(0|[1-9]\d*)$/;

/**
 * Whether `a` is older than `b` by resourceVersion. resourceVersions are opaque to clients in general, but
 * the API server's etcd storage makes them integers that grow with every write; client-go's MutationCache
 * compares them as integers for exactly this (an object from our own write against a late watch event).
 * Anything that is not an integer cannot be ordered: then nothing is older and the newest event wins.
 */
export function isOlder(a: { metadata: ObjectMeta }, b: { metadata: ObjectMeta }): boolean {
  const x = a.metadata.resourceVersion;
  const y = b.metadata.resourceVersion;
  if (!x || !y || !DECIMAL.test(x) || !DECIMAL.test(y)) return false;
  // As numbers, without parsing: a relist compares every cached object, and may be 50,000 of them.
  return x.length !== y.length ? x.length < y.length : x < y;
}
