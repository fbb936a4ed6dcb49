// List + watch into a local cache, as client-go's reflector and informer do. This file is the loop; the
// cache is informer-store.ts, the paged list informer-list.ts, one watch (plain or watch-list)
// informer-watch.ts, and what they read from informer-source.ts.
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
import { listAll } from './informer-list.ts';
import type { InformerSource } from './informer-source.ts';
import { type InformerHandlers, InformerStore } from './informer-store.ts';
import { type WatchContext, type WatchEnd, type WatchFallback, watchOnce } from './informer-watch.ts';
import type { KubeObject } from './types.ts';
import { MIN_WATCH_MS } from './watch.ts';

export { continueAtEnd } from './informer-list.ts';
export { INITIAL_EVENTS_END, type InformerSource, type Listed, type WatchListQuery } from './informer-source.ts';
export { type InformerHandlers, isOlder, keyOfNamespaced } from './informer-store.ts';

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

export class Informer<T extends KubeObject> {
  /** The cached objects by key. */
  readonly cache: Map<string, T>;
  private readonly store: InformerStore<T>;
  private lastError: Error | undefined;
  /** Whether lastError came from a watch: only a healthy watch clears it, not the relist before it. */
  private watchFailing = false;
  private readonly o: Required<Omit<InformerOptions<T>, 'transform' | 'key' | 'watchList'>>;
  private readonly useWatchList: boolean;
  /** Why the last watch-list fell back to a paged list, so the fallback is logged once, not every relist. */
  private fellBack: string | undefined;
  private readonly source: InformerSource<T>;
  private readonly watching: WatchContext<T>;

  constructor(source: InformerSource<T>, handlers: InformerHandlers<T>, o: InformerOptions<T>) {
    this.source = source;
    const { transform, key, watchList, ...rest } = o;
    this.useWatchList = watchList !== false && source.watchList !== undefined;
    this.store = new InformerStore(handlers, transform ?? ((obj) => obj), key ?? ((obj) => obj.metadata.name ?? ''));
    this.cache = this.store.cache;
    this.o = {
      pageSize: 500,
      watchTimeoutSeconds: 300,
      watchdogGraceMs: 30_000,
      minWatchMs: MIN_WATCH_MS,
      backoff: new Backoff({ initialMs: 500, maxMs: 30_000 }),
      ...rest,
    };
    this.watching = {
      source,
      store: this.store,
      log: this.o.log,
      watchTimeoutSeconds: this.o.watchTimeoutSeconds,
      watchdogGraceMs: this.o.watchdogGraceMs,
      minWatchMs: this.o.minWatchMs,
      // A healthy watch: the backoff starts over, and a watch error is cleared.
      onHealthy: () => {
        this.o.backoff.reset();
        if (this.watchFailing) this.lastError = undefined;
        this.watchFailing = false;
      },
      onSynced: () => {
        if (!this.watchFailing) this.lastError = undefined;
      },
    };
  }

  /** True once the first list has completed. */
  get hasSynced(): boolean {
    return this.store.synced;
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
   * cache already holds a newer one (InformerStore.storeOwnWrite). Returns the object now cached.
   */
  storeOwnWrite(obj: T): T {
    return this.store.storeOwnWrite(obj);
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
        const result: WatchEnd | WatchFallback = await watchOnce(this.watching, rv, signal);
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
    const result = await watchOnce(this.watching, '', signal, new Map<string, T>());
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

  /** A paged (re)list into the store; answers the list's resourceVersion. */
  private async relist(): Promise<string> {
    const { seen, rv } = await listAll(this.source, this.o.pageSize, this.store);
    this.store.replace(seen, rv);
    return rv;
  }
}
