// One watch of an informer, until it ends or something forces a relist: a plain watch from a
// resourceVersion, or a watch-list (KEP-3157), whose events up to the initial-events-end BOOKMARK are the
// current state, put in the store at that bookmark as a relist would, and which then goes on as any
// watch. A watchdog aborts a watch that has been silent for longer than the server was asked to keep it
// open, so a half-dead connection (API server gone without a FIN) cannot stall the informer forever.
import type { Logger } from '../runtime/log.ts';
import { ApiError, isApiError } from './errors.ts';
import { INITIAL_EVENTS_END, type InformerSource } from './informer-source.ts';
import type { InformerStore } from './informer-store.ts';
import type { KubeObject } from './types.ts';
import { endedAtOnce } from './watch.ts';

/** How a watch ended: go on watching from a version, relist, or an error (before or after the cache synced). */
export type WatchEnd = { kind: 'continue'; resourceVersion: string } | { kind: 'relist'; atOnce: boolean } | { kind: 'error'; error: Error; synced: boolean };

/** A watch-list's answer where the API server does not offer it: the informer lists in pages instead. */
export type WatchFallback = { kind: 'fallback'; reason: string };

/** What one watch works with: the informer's source, store and settings, and what it tells the informer. */
export interface WatchContext<T extends KubeObject> {
  source: InformerSource<T>;
  store: InformerStore<T>;
  log: Logger;
  /** How long the server keeps one watch open, in seconds; randomized ±50% like client-go. */
  watchTimeoutSeconds: number;
  /** Extra silence tolerated beyond the watch timeout before the watchdog aborts it. */
  watchdogGraceMs: number;
  /** A watch that ends sooner than this with no event failed (client-go's reflector: one second). */
  minWatchMs: number;
  /** The watch proved healthy: it delivered an event, or stayed open minWatchMs. */
  onHealthy(): void;
  /** A watch-list's initial state is in the store. */
  onSynced(): void;
}

/**
 * One watch from `resourceVersion`, until it ends or something forces a relist. With `initial`, the
 * watch is a watch-list: its events up to the initial-events-end BOOKMARK are the current state, gathered
 * there and put in the store at that bookmark as a relist would; then it goes on as any watch.
 */
export async function watchOnce<T extends KubeObject>(c: WatchContext<T>, resourceVersion: string, outer: AbortSignal, initial?: Map<string, T>): Promise<WatchEnd | WatchFallback> {
  const timeoutSeconds = Math.round(c.watchTimeoutSeconds * (0.5 + Math.random()));
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
        c.log.warn('watch silent for too long; reconnecting', { timeoutSeconds });
        inner.abort();
      },
      timeoutSeconds * 1000 + c.watchdogGraceMs,
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
    c.onHealthy();
  };
  const provenTimer = setTimeout(proven, c.minWatchMs);
  try {
    arm();
    const stream = initial
      ? c.source.watchList!({ sendInitialEvents: true, resourceVersionMatch: 'NotOlderThan', allowWatchBookmarks: true, timeoutSeconds }, inner.signal)
      : c.source.watch({ resourceVersion: rv, allowWatchBookmarks: true, timeoutSeconds }, inner.signal);
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
        c.store.replace(initial!, rv);
        initial!.clear();
        c.onSynced();
        continue;
      }
      const obj = c.store.transform(ev.object);
      const name = c.store.keyOf(obj);
      if (gathering) {
        if (ev.type === 'DELETED') initial!.delete(name);
        else initial!.set(name, obj);
        continue;
      }
      c.store.apply(ev.type, name, obj);
    }
    if (watchdogFired) return { kind: 'relist', atOnce: false };
    if (gathering && !outer.aborted) return { kind: 'fallback', reason: `the watch ended before its initial-events-end bookmark (after ${events} events)` };
    if (endedAtOnce(opened, events, c.minWatchMs) && !outer.aborted) {
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
