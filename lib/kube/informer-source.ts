// What an informer (informer.ts) reads from: a resource's paged list, its watch, and where the API server
// offers it, its streaming watch-list (KEP-3157).
import type { KubeList } from './types.ts';
import type { WatchEvent } from './watch.ts';

/** A page of a list: the informer reads its items, resourceVersion and continue token. */
export type Listed<T> = Pick<KubeList<T>, 'metadata' | 'items'>;

export interface InformerSource<T> {
  list(o: { limit: number; continue?: string }): Promise<Listed<T>>;
  /**
   * The same page as the server's JSON text, unparsed. When given, the (re)list asks for the next page
   * before it parses this one (see informer-list.ts), so the server prepares page n+1 while we parse page n.
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
