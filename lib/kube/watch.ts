// Streaming watch: one JSON event per line, as the API server sends them.
import type { Status } from './errors.ts';
import type { Query, RestClient } from './rest.ts';

/**
 * A watch shorter than this that delivered no event did not work, as client-go's reflector judges one
 * ("very short watch"): a proxy or load balancer that closes long requests ends every watch at once, and
 * re-opening it at once would spin. Its callers back off then, and start over after a healthy watch.
 */
export const MIN_WATCH_MS = 1000;

/** Whether a watch opened at `openedMs` that delivered `events` events ended too soon to count as working. */
export function endedAtOnce(openedMs: number, events: number, minMs = MIN_WATCH_MS, now = Date.now()): boolean {
  return events === 0 && now - openedMs < minMs;
}

export type WatchEvent<T> = { type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK'; object: T } | { type: 'ERROR'; object: Status };

/**
 * Yields watch events until the server closes the stream or `signal` aborts.
 * An ERROR event (410 Gone when the resourceVersion is too old) is yielded, not thrown: the caller relists.
 * `accept` asks for another form of the objects (metadata only, PartialObjectMetadata, say).
 */
export async function* watch<T>(client: RestClient, path: string, query: Query, signal?: AbortSignal, accept?: string): AsyncGenerator<WatchEvent<T>> {
  const res = await client.open('GET', path, { query: { ...query, watch: true }, stream: true, ...(signal ? { signal } : {}), ...(accept ? { accept } : {}) });
  let buffered = '';
  try {
    for await (const chunk of res) {
      buffered += (chunk as Buffer).toString('utf8');
      let newline: number;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, newline).trim();
        buffered = buffered.slice(newline + 1);
        if (line) yield JSON.parse(line) as WatchEvent<T>;
      }
    }
  } catch (err) {
    if ((err as Error).name !== 'AbortError' && !signal?.aborted) throw err;
  } finally {
    res.destroy();
  }
}
