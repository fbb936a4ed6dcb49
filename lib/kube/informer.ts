// List + watch into a local cache, as client-go's reflector and informer do:
// - a paged list, then a watch from the list's resourceVersion, with bookmarks;
// - 410 Gone (resourceVersion too old) → relist; a watch the server ends → rewatch from the last version;
// - other errors → backoff with jitter, then relist;
// - a watchdog aborts a watch that has been silent for longer than the server was asked to keep it open,
//   so a half-dead connection (API server gone without a FIN) cannot stall us forever.
import type { ObjectMeta } from '../../api/v1alpha1/types.ts';
import { Backoff, sleep } from '../runtime/backoff.ts';
import type { Logger } from '../runtime/log.ts';
import { isApiError } from './errors.ts';
import type { WatchEvent } from './watch.ts';

export interface Listed<T> {
  metadata: { resourceVersion?: string; continue?: string };
  items: T[];
}

export interface InformerSource<T> {
  list(o: { limit: number; continue?: string }): Promise<Listed<T>>;
  /**
   * The same page as the server's JSON text, unparsed. When given, the (re)list asks for the next page
   * before it parses this one (see relist), so the server prepares page n+1 while we parse page n.
   */
  listText?(o: { limit: number; continue?: string }): Promise<string>;
  watch(o: { resourceVersion: string; allowWatchBookmarks: boolean; timeoutSeconds: number }, signal: AbortSignal): AsyncGenerator<WatchEvent<T>>;
}

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
  backoff?: Backoff;
  /**
   * Applied to every object from the list and the watch before it is cached or handed to a handler, as
   * client-go's SetTransform: the cache keeps only what its user reads (no managedFields, say), so its
   * memory is that of the fields used, not of whole objects. The list's page is dropped right after.
   */
  transform?: (obj: T) => T;
}

type Obj = { metadata: ObjectMeta };

export class Informer<T extends Obj> {
  readonly cache = new Map<string, T>();
  private synced = false;
  private lastError: Error | undefined;
  private readonly o: Required<Omit<InformerOptions<T>, 'transform'>>;
  private readonly transform: (obj: T) => T;
  private readonly source: InformerSource<T>;
  private readonly handlers: InformerHandlers<T>;

  constructor(source: InformerSource<T>, handlers: InformerHandlers<T>, o: InformerOptions<T>) {
    this.source = source;
    this.handlers = handlers;
    const { transform, ...rest } = o;
    this.transform = transform ?? ((obj) => obj);
    this.o = {
      pageSize: 500,
      watchTimeoutSeconds: 300,
      watchdogGraceMs: 30_000,
      backoff: new Backoff({ initialMs: 500, maxMs: 30_000 }),
      ...rest,
    };
  }

  /** True once the first list has completed. */
  get hasSynced(): boolean {
    return this.synced;
  }

  /** The error of the last failed list or watch, cleared by the next success. */
  get error(): Error | undefined {
    return this.lastError;
  }

  /** Runs until `signal` aborts. Never throws: errors are logged and retried. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let rv: string;
      try {
        rv = await this.relist();
        this.o.backoff.reset();
        this.lastError = undefined;
      } catch (err) {
        this.fail('list failed', err as Error);
        await sleep(this.o.backoff.next(), signal);
        continue;
      }
      // Watch until something forces a relist.
      while (!signal.aborted) {
        const result = await this.watchOnce(rv, signal);
        if (result.kind === 'relist') break;
        if (result.kind === 'error') {
          this.fail('watch failed', result.error);
          await sleep(this.o.backoff.next(), signal);
          break;
        }
        rv = result.resourceVersion;
      }
    }
  }

  private fail(what: string, err: Error): void {
    this.lastError = err;
    this.o.log.warn(what, { error: err.message });
  }

  /**
   * The list's pages in order. With `listText`, the next page is asked for as soon as this page's text
   * has arrived, before it is parsed: the API server serializes a CR list with its metadata last, so the
   * continue token is read from the text's end. On 2 cores at 50,000 NodeDisks the server's encoding and
   * our parsing were each about half of a restart, one after the other (docs/benchmarks.md). The token
   * read from the text is only a guess: the parsed page decides, and a wrong guess is dropped and the
   * page asked for again, so correctness never rests on the text's layout.
   */
  private async *pages(): AsyncGenerator<Listed<T>> {
    const limit = this.o.pageSize;
    const listText = this.source.listText?.bind(this.source);
    if (!listText) {
      let cont: string | undefined;
      do {
        const page = await this.source.list({ limit, ...(cont ? { continue: cont } : {}) });
        yield page;
        cont = page.metadata.continue || undefined;
      } while (cont);
      return;
    }
    const ask = (cont: string | undefined) => {
      const p = listText({ limit, ...(cont ? { continue: cont } : {}) });
      p.catch(() => {}); // awaited below or dropped; a dropped prefetch must not be an unhandled rejection
      return p;
    };
    let next: Promise<string> | undefined = ask(undefined);
    while (next) {
      const text: string = await next;
      const guess = continueAtEnd(text);
      next = guess ? ask(guess) : undefined;
      const page = JSON.parse(text) as Listed<T>;
      const cont = page.metadata.continue || undefined;
      if (cont !== guess) next = cont ? ask(cont) : undefined;
      yield page;
    }
  }

  private async relist(): Promise<string> {
    const seen = new Map<string, T>();
    let rv = '';
    for await (const page of this.pages()) {
      for (const item of page.items) seen.set(item.metadata.name ?? '', this.transform(item));
      rv = page.metadata.resourceVersion ?? rv;
    }
    for (const [name, old] of this.cache) {
      if (!seen.has(name)) {
        this.cache.delete(name);
        this.handlers.onDelete?.(old);
      }
    }
    for (const [name, obj] of seen) {
      const old = this.cache.get(name);
      this.cache.set(name, obj);
      if (!old || old.metadata.resourceVersion !== obj.metadata.resourceVersion) this.handlers.onUpsert?.(obj, old);
    }
    this.synced = true;
    this.handlers.onSync?.();
    return rv;
  }

  private async watchOnce(
    resourceVersion: string,
    outer: AbortSignal,
  ): Promise<{ kind: 'continue'; resourceVersion: string } | { kind: 'relist' } | { kind: 'error'; error: Error }> {
    const timeoutSeconds = Math.round(this.o.watchTimeoutSeconds * (0.5 + Math.random()));
    const inner = new AbortController();
    const abort = () => inner.abort();
    outer.addEventListener('abort', abort, { once: true });
    let silentTimer: NodeJS.Timeout | undefined;
    let watchdogFired = false;
    const arm = () => {
      clearTimeout(silentTimer);
      silentTimer = setTimeout(() => {
        watchdogFired = true;
        this.o.log.warn('watch silent for too long; reconnecting', { timeoutSeconds });
        inner.abort();
      }, timeoutSeconds * 1000 + this.o.watchdogGraceMs);
    };
    let rv = resourceVersion;
    try {
      arm();
      for await (const ev of this.source.watch({ resourceVersion: rv, allowWatchBookmarks: true, timeoutSeconds }, inner.signal)) {
        arm();
        if (ev.type === 'ERROR') {
          if (ev.object.code === 410) return { kind: 'relist' };
          return { kind: 'error', error: new Error(ev.object.message ?? 'watch error') };
        }
        rv = ev.object.metadata.resourceVersion ?? rv;
        if (ev.type === 'BOOKMARK') continue;
        const obj = this.transform(ev.object);
        const name = obj.metadata.name ?? '';
        if (ev.type === 'DELETED') {
          this.cache.delete(name);
          this.handlers.onDelete?.(obj);
        } else {
          const old = this.cache.get(name);
          this.cache.set(name, obj);
          this.handlers.onUpsert?.(obj, old);
        }
      }
      this.o.backoff.reset();
      this.lastError = undefined;
      // The server closed the watch (its timeout) or the watchdog did: watch again from where we are.
      return watchdogFired ? { kind: 'relist' } : { kind: 'continue', resourceVersion: rv };
    } catch (err) {
      if (outer.aborted) return { kind: 'continue', resourceVersion: rv };
      if (watchdogFired) return { kind: 'relist' };
      if (isApiError(err, 410)) return { kind: 'relist' };
      return { kind: 'error', error: err as Error };
    } finally {
      clearTimeout(silentTimer);
      outer.removeEventListener('abort', abort);
    }
  }
}

/** The continue token of a list's JSON text when its metadata comes last (the API server's layout). */
export function continueAtEnd(text: string): string | undefined {
  const key = '"continue":"';
  const at = text.lastIndexOf(key);
  if (at < 0 || at < text.lastIndexOf('"items":[')) return undefined;
  const end = text.indexOf('"', at + key.length);
  return end < 0 ? undefined : text.slice(at + key.length, end) || undefined;
}
