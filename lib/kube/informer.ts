// List + watch into a local cache, as client-go's reflector and informer do:
// - where the source offers it, a streaming watch-list (KEP-3157): one watch with sendInitialEvents that
//   streams the current objects as ADDED events, ends that initial state with a BOOKMARK annotated
//   k8s.io/initial-events-end, and goes on as a plain watch, so the API server encodes no LIST pages;
// - else, or when the API server does not offer it (see watchList), a paged list, then a watch from the
//   list's resourceVersion, with bookmarks;
// - 410 Gone (resourceVersion too old) → relist; a watch the server ends → rewatch from the last version;
// - other errors → backoff with jitter, then relist;
// - a watch that ends at once with no events (a proxy or load balancer that closes long requests) is an
//   error too, as client-go's reflector judges a watch of under a second with no items: without that, the
//   informer would re-open it in a tight loop. The backoff grows until a watch proves healthy (an event, or
//   open for that second), not at each successful relist between two such watches;
// - the cache never goes back in time: an object older than the cached one (by resourceVersion) does not
//   replace it (see storeOwnWrite);
// - a watchdog aborts a watch that has been silent for longer than the server was asked to keep it open,
//   so a half-dead connection (API server gone without a FIN) cannot stall us forever.
import { Backoff, sleep } from '../runtime/backoff.ts';
import type { Logger } from '../runtime/log.ts';
import { ApiError, isApiError } from './errors.ts';
import { listPages } from './pager.ts';
import type { KubeList, KubeObject, ObjectMeta } from './types.ts';
import { endedAtOnce, MIN_WATCH_MS, type WatchEvent } from './watch.ts';

/** A page of a list: the informer reads its items, resourceVersion and continue token. */
export type Listed<T> = Pick<KubeList<T>, 'metadata' | 'items'>;

export interface InformerSource<T> {
  list(o: { limit: number; continue?: string }): Promise<Listed<T>>;
  /**
   * The same page as the server's JSON text, unparsed. When given, the (re)list asks for the next page
   * before it parses this one (see relist), so the server prepares page n+1 while we parse page n.
   */
  listText?(o: { limit: number; continue?: string }): Promise<string>;
  watch(o: { resourceVersion: string; allowWatchBookmarks: boolean; timeoutSeconds: number }, signal: AbortSignal): AsyncGenerator<WatchEvent<T>>;
  /**
   * The same watch with the watch-list's parameters passed on as query parameters, for the initial state
   * (KEP-3157). Without it the informer lists in pages.
   */
  watchList?(o: WatchListQuery, signal: AbortSignal): AsyncGenerator<WatchEvent<T>>;
}

/** A streaming list's query: the current state as events, from the API server's watch cache. */
export type WatchListQuery = {
  sendInitialEvents: true;
  resourceVersionMatch: 'NotOlderThan';
  allowWatchBookmarks: true;
  timeoutSeconds: number;
};

/** The annotation of the BOOKMARK that ends a watch-list's initial events. */
export const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

export interface InformerHandlers<T> {
  /** Called for adds and updates (old is undefined for an add). */
  onUpsert?(obj: T, old: T | undefined): void;
  onDelete?(obj: T): void;
  /** Called after every successful (re)list, with the whole cache. */
  onSync?(): void;
}

export interface InformerOptions<T = unknown> {
  log: Logger;
  pageSize?: number;
  /** How long the server keeps one watch open, in seconds; randomized ±50% like client-go. */
  watchTimeoutSeconds?: number;
  /** Extra silence tolerated beyond the watch timeout before the watchdog aborts it. */
  watchdogGraceMs?: number;
  /** A watch that ends sooner than this with no event failed (client-go's reflector: one second). */
  minWatchMs?: number;
  backoff?: Backoff;
  /**
   * Applied to every object from the list and the watch before it is cached or handed to a handler, as
   * client-go's SetTransform: the cache keeps only what its user reads (no managedFields, say), so its
   * memory is that of the fields used, not of whole objects. The list's page is dropped right after.
   */
  transform?: (obj: T) => T;
  /** The cache key of an object: its name by default; `namespace/name` for a namespaced resource (keyOfNamespaced). */
  key?: (obj: T) => string;
  /**
   * Sync through the source's watchList when it has one (the default), falling back to the paged list
   * where the API server does not offer it; false lists in pages always.
   */
  watchList?: boolean;
}

/** The cache key of a namespaced object, as client-go's MetaNamespaceKeyFunc: `namespace/name`. */
export function keyOfNamespaced(obj: { metadata: ObjectMeta }): string {
  return `${obj.metadata.namespace ?? ''}/${obj.metadata.name ?? ''}`;
}

export class Informer<T extends KubeObject> {
  readonly cache = new Map<string, T>();
  private synced = false;
  private lastError: Error | undefined;
  /** Whether lastError came from a watch: only a healthy watch clears it, not the relist before it. */
  private watchFailing = false;
  private readonly o: Required<Omit<InformerOptions<T>, 'transform' | 'key' | 'watchList'>>;
  private readonly useWatchList: boolean;
  /** Why the last watch-list fell back to a paged list, so the fallback is logged once, not every relist. */
  private fellBack: string | undefined;
  private readonly transform: (obj: T) => T;
  private readonly keyOf: (obj: T) => string;
  private readonly source: InformerSource<T>;
  private readonly handlers: InformerHandlers<T>;

  constructor(source: InformerSource<T>, handlers: InformerHandlers<T>, o: InformerOptions<T>) {
    this.source = source;
    this.handlers = handlers;
    const { transform, key, watchList, ...rest } = o;
    this.useWatchList = watchList !== false && source.watchList !== undefined;
    this.transform = transform ?? ((obj) => obj);
    this.keyOf = key ?? ((obj) => obj.metadata.name ?? '');
    this.o = {
      pageSize: 500,
      watchTimeoutSeconds: 300,
      watchdogGraceMs: 30_000,
      minWatchMs: MIN_WATCH_MS,
      backoff: new Backoff({ initialMs: 500, maxMs: 30_000 }),
      ...rest,
    };
  }

  /** True once the first list has completed. */
  get hasSynced(): boolean {
    return this.synced;
  }

  /**
   * The error of the last failed list or watch, cleared by the next success: a list error by a list, a
   * watch error by a healthy watch (so a watch that keeps failing after good lists stays an error).
   */
  get error(): Error | undefined {
    return this.lastError;
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

  /** Runs until `signal` aborts. Never throws: errors are logged and retried. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let rv: string | undefined;
      if (this.useWatchList) {
        const result = await this.watchList(signal);
        if (signal.aborted) break;
        if (result.kind === 'continue') rv = result.resourceVersion;
        else if (result.kind !== 'fallback') {
          await this.afterWatch(result, signal);
          continue;
        }
      }
      if (rv === undefined) {
        try {
          rv = await this.relist();
          // Not a backoff reset: a list that works between watches that end at once proves nothing.
          if (!this.watchFailing) this.lastError = undefined;
        } catch (err) {
          this.fail('list failed', err as Error);
          await sleep(this.o.backoff.next(), signal);
          continue;
        }
      }
      // Watch until something forces a relist.
      while (!signal.aborted) {
        const result = await this.watchOnce(rv, signal);
        if (result.kind === 'continue') {
          rv = result.resourceVersion;
          continue;
        }
        // (A plain watch never falls back: that is only the watch-list's answer.)
        if (result.kind !== 'fallback') await this.afterWatch(result, signal);
        break;
      }
    }
  }

  /** What a watch that forces a relist leaves behind: a log line, an error, a backoff. */
  private async afterWatch(result: WatchEnd & { kind: 'relist' | 'error' }, signal: AbortSignal): Promise<void> {
    if (result.kind === 'relist') {
      // Expired before it proved healthy: the list's version was already gone (a server that compacts
      // faster than we list, or an etcd that lost history). Relisting at once would hammer it with
      // whole lists, so the backoff applies, as client-go's reflector backs off between list-and-watches.
      if (result.atOnce) {
        this.o.log.info('watch expired at once; relisting after a backoff');
        await sleep(this.o.backoff.next(), signal);
      }
      return;
    }
    if (result.synced) {
      this.fail('watch failed', result.error);
      this.watchFailing = true;
    } else this.fail('list failed', result.error);
    await sleep(this.o.backoff.next(), signal);
  }

  /**
   * A sync through the streaming watch-list, which then goes on as the watch. It falls back to the paged
   * list, for this sync, where the API server does not offer it: it refuses the parameters (a server whose
   * WatchList feature gate is off answers 422 Invalid, "sendInitialEvents is forbidden for watch unless
   * the WatchList feature gate is enabled"; servers before it forbid resourceVersionMatch on a watch the
   * same way), or it serves a plain watch (a BOOKMARK without the initial-events-end annotation before
   * it), or the stream ends before that bookmark (a proxy that cuts long requests: the paged list still
   * works there, as it did before watch-list). The next sync asks again: the server may have been
   * upgraded meanwhile, and a refusal costs one small request.
   */
  private async watchList(signal: AbortSignal): Promise<WatchEnd | { kind: 'fallback' }> {
    const initial = new Map<string, T>();
    const result = await this.watchOnce('', signal, initial);
    if (result.kind !== 'fallback') return result;
    // Logged once per reason: an old API server refuses at every sync, and that is how it is meant to work.
    if (this.fellBack !== result.reason) this.o.log.info('no streaming watch-list; listing in pages', { reason: result.reason });
    else this.o.log.debug('no streaming watch-list; listing in pages', { reason: result.reason });
    this.fellBack = result.reason;
    return result;
  }

  private fail(what: string, err: Error): void {
    this.lastError = err;
    this.watchFailing = false;
    this.o.log.warn(what, { error: err.message });
  }

  /**
   * The list's pages in order. With `listText`, the next page is asked for as soon as this page's text
   * has arrived, before it is parsed: the API server serializes a CR list with its metadata last, so the
   * continue token is read from the text's end. On a large fleet the server's encoding and our parsing
   * were each about half of a restart, one after the other (docs/benchmarks.md). The token
   * read from the text is only a guess: the parsed page decides, and a wrong guess is dropped and the
   * page asked for again, so correctness never rests on the text's layout.
   */
  private pages(): AsyncGenerator<Listed<T>> {
    const limit = this.o.pageSize;
    const at = (cont: string | undefined) => ({ limit, ...(cont ? { continue: cont } : {}) });
    const listText = this.source.listText?.bind(this.source);
    if (!listText) return listPages((cont) => this.source.list(at(cont)));
    return listPages((cont) => listText(at(cont)), { parse: (text) => JSON.parse(text) as Listed<T>, guess: continueAtEnd });
  }

  private async relist(): Promise<string> {
    const seen = new Map<string, T>();
    let rv = '';
    for await (const page of this.pages()) {
      // An empty list of metadata (PartialObjectMetadataList) comes as "items": null.
      for (const item of page.items ?? []) {
        const obj = this.transform(item);
        seen.set(this.keyOf(obj), obj);
      }
      rv = page.metadata.resourceVersion ?? rv;
    }
    this.replace(seen, rv);
    return rv;
  }

  /**
   * The cache becomes what a (re)list or a watch-list's initial events found at `rv`: what is not there
   * is deleted, what changed is upserted, and onSync follows.
   */
  private replace(seen: Map<string, T>, rv: string): void {
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
    this.synced = true;
    this.handlers.onSync?.();
  }

  /**
   * One watch from `resourceVersion`, until it ends or something forces a relist. With `initial`, the
   * watch is a watch-list: its events up to the initial-events-end BOOKMARK are the current state, gathered
   * there and put in the cache at that bookmark as a relist would; then it goes on as any watch.
   */
  private async watchOnce(resourceVersion: string, outer: AbortSignal, initial?: Map<string, T>): Promise<WatchEnd | { kind: 'fallback'; reason: string }> {
    const timeoutSeconds = Math.round(this.o.watchTimeoutSeconds * (0.5 + Math.random()));
    const inner = new AbortController();
    const abort = () => inner.abort();
    outer.addEventListener('abort', abort, { once: true });
    let silentTimer: NodeJS.Timeout | undefined;
    let watchdogFired = false;
    const arm = () => {
      clearTimeout(silentTimer);
      silentTimer = setTimeout(
        () => {
          watchdogFired = true;
          this.o.log.warn('watch silent for too long; reconnecting', { timeoutSeconds });
          inner.abort();
        },
        timeoutSeconds * 1000 + this.o.watchdogGraceMs,
      );
    };
    let rv = resourceVersion;
    const opened = Date.now();
    let events = 0;
    let healthy = false;
    /** Whether the initial state is still arriving (a watch-list before its end bookmark). */
    let gathering = initial !== undefined;
    // A watch is healthy once it delivered an event or stayed open minWatchMs: the backoff starts over, and
    // a watch error is cleared.
    const proven = () => {
      if (healthy) return;
      healthy = true;
      clearTimeout(provenTimer);
      this.o.backoff.reset();
      if (this.watchFailing) this.lastError = undefined;
      this.watchFailing = false;
    };
    const provenTimer = setTimeout(proven, this.o.minWatchMs);
    try {
      arm();
      const stream = initial
        ? this.source.watchList!({ sendInitialEvents: true, resourceVersionMatch: 'NotOlderThan', allowWatchBookmarks: true, timeoutSeconds }, inner.signal)
        : this.source.watch({ resourceVersion: rv, allowWatchBookmarks: true, timeoutSeconds }, inner.signal);
      for await (const ev of stream) {
        arm();
        if (ev.type !== 'ERROR') events++;
        // Part of an initial state proves nothing (a proxy may cut every stream after some bytes): the
        // watch-list is healthy from its end bookmark on, or once it has been open for minWatchMs.
        if (ev.type !== 'ERROR' && !gathering) proven();
        if (ev.type === 'ERROR') {
          if (ev.object.code === 410) return { kind: 'relist', atOnce: !healthy };
          return { kind: 'error', error: new Error(ev.object.message ?? 'watch error'), synced: !gathering };
        }
        rv = ev.object.metadata.resourceVersion ?? rv;
        if (ev.type === 'BOOKMARK') {
          if (!gathering) continue;
          // Before the end of the initial state an API server that honours sendInitialEvents sends no other
          // bookmark: one without the annotation is a plain watch, from a server that ignored the request.
          if (ev.object.metadata.annotations?.[INITIAL_EVENTS_END] !== 'true') return { kind: 'fallback', reason: 'the watch had a BOOKMARK without the initial-events-end annotation' };
          gathering = false;
          proven();
          this.replace(initial!, rv);
          initial!.clear();
          if (!this.watchFailing) this.lastError = undefined;
          continue;
        }
        const obj = this.transform(ev.object);
        const name = this.keyOf(obj);
        if (gathering) {
          if (ev.type === 'DELETED') initial!.delete(name);
          else initial!.set(name, obj);
          continue;
        }
        const old = this.cache.get(name);
        // Older than what is cached: the owner stored its own, newer write (storeOwnWrite); a late event
        // must not take the cache back in time, nor a late DELETED drop an object re-created since.
        if (old && isOlder(obj, old)) continue;
        if (ev.type === 'DELETED') {
          this.cache.delete(name);
          this.handlers.onDelete?.(obj);
        } else {
          this.cache.set(name, obj);
          this.handlers.onUpsert?.(obj, old);
        }
      }
      if (watchdogFired) return { kind: 'relist', atOnce: false };
      if (gathering && !outer.aborted) return { kind: 'fallback', reason: `the watch ended before its initial-events-end bookmark (after ${events} events)` };
      if (endedAtOnce(opened, events, this.o.minWatchMs) && !outer.aborted) {
        return {
          kind: 'error',
          error: new Error(`the watch ended at once with no events (after ${Date.now() - opened} ms); a proxy or load balancer may be closing it`),
          synced: true,
        };
      }
      // The server closed the watch (its timeout): watch again from where we are.
      return { kind: 'continue', resourceVersion: rv };
    } catch (err) {
      if (outer.aborted) return { kind: 'continue', resourceVersion: rv };
      if (watchdogFired) return { kind: 'relist', atOnce: false };
      if (isApiError(err, 410)) return { kind: 'relist', atOnce: !healthy };
      // The API server refused the watch-list's parameters (422 where the WatchList gate is off, a 400 from
      // something in between): the paged list. 429 is the server asking for time, not a refusal.
      if (gathering && err instanceof ApiError && err.statusCode >= 400 && err.statusCode < 500 && err.statusCode !== 429) {
        return { kind: 'fallback', reason: `${err.statusCode}: ${err.message}` };
      }
      return { kind: 'error', error: err as Error, synced: !gathering };
    } finally {
      clearTimeout(silentTimer);
      clearTimeout(provenTimer);
      outer.removeEventListener('abort', abort);
    }
  }
}

/** How a watch ended: go on watching from a version, relist, or an error (before or after the cache synced). */
type WatchEnd = { kind: 'continue'; resourceVersion: string } | { kind: 'relist'; atOnce: boolean } | { kind: 'error'; error: Error; synced: boolean };

/** The continue token of a list's JSON text when its metadata comes last (the API server's layout). */
export function continueAtEnd(text: string): string | undefined {
  const key = '"continue":"';
  const at = text.lastIndexOf(key);
  if (at < 0 || at < text.lastIndexOf('"items":[')) return undefined;
  const end = text.indexOf('"', at + key.length);
  return end < 0 ? undefined : text.slice(at + key.length, end) || undefined;
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
