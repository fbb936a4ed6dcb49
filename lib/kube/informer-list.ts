// An informer's paged (re)list: every page of the source in order, each object transformed and keyed
// for the store, and the list's resourceVersion, from which the watch then starts.
import type { InformerSource, Listed } from './informer-source.ts';
import type { InformerStore } from './informer-store.ts';
import { listPages } from './pager.ts';
import type { KubeObject } from './types.ts';

/**
 * The list's pages in order. With `listText`, the next page is asked for as soon as this page's text
 * has arrived, before it is parsed: the API server serializes a CR list with its metadata last, so the
 * continue token is read from the text's end. On a large fleet the server's encoding and our parsing
 * were each about half of a restart, one after the other (docs/benchmarks.md). The token
 * read from the text is only a guess: the parsed page decides, and a wrong guess is dropped and the
 * page asked for again, so correctness never rests on the text's layout.
 */
function pages<T>(source: InformerSource<T>, limit: number): AsyncGenerator<Listed<T>> {
  const at = (cont: string | undefined) => ({ limit, ...(cont ? { continue: cont } : {}) });
  const listText = source.listText?.bind(source);
  if (!listText) return listPages((cont) => source.list(at(cont)));
  return listPages((cont) => listText(at(cont)), { parse: (text) => JSON.parse(text) as Listed<T>, guess: continueAtEnd });
}

/** Lists everything, in pages of `pageSize`: the objects as the store keys and keeps them, and the list's resourceVersion. */
export async function listAll<T extends KubeObject>(source: InformerSource<T>, pageSize: number, store: InformerStore<T>): Promise<{ seen: Map<string, T>; rv: string }> {
  const seen = new Map<string, T>();
  let rv = '';
  for await (const page of pages(source, pageSize)) {
    // An empty list of metadata (PartialObjectMetadataList) comes as "items": null.
    for (const item of page.items ?? []) {
      const obj = store.transform(item);
      seen.set(store.keyOf(obj), obj);
    }
    rv = page.metadata.resourceVersion ?? rv;
  }
  return { seen, rv };
}

/** The continue token of a list's JSON text when its metadata comes last (the API server's layout). */
export function continueAtEnd(text: string): string | undefined {
  const key = '"continue":"';
  const at = text.lastIndexOf(key);
  if (at < 0 || at < text.lastIndexOf('"items":[')) return undefined;
  const end = text.indexOf('"', at + key.length);
  return end < 0 ? undefined : text.slice(at + key.length, end) || undefined;
}
