// Every page of a list, `limit` items at a time, following the continue token (client-go's pager): large
// collections are never loaded in one response.
//
// Errors are the caller's, unchanged: a page that fails ends the pages with that error, and nothing here
// retries. In particular a continue token that expired between two pages (410 Gone: the list changed too
// much while it was read) is not restarted from the first page, because the caller may already have used
// the pages before it: the informer relists from scratch after its backoff, the plugin explains (pages it
// printed cannot be taken back), the typed client passes it on.

type Page = { metadata?: { continue?: string } };

export interface PagerOptions {
  /**
   * When the next page is asked for. 'after' (the default): once the consumer asks for it, one request at a
   * time. 'early': as soon as this page has arrived, before the consumer handles it, so the server prepares
   * page n+1 while page n is used.
   */
  ask?: 'after' | 'early';
}

export interface RawPagerOptions<R, P> extends PagerOptions {
  /** Turns what `fetch` answered into the page (the server's JSON text parsed, say). */
  parse: (raw: R) => P;
  /**
   * A continue token read from the raw answer before it is parsed (implies 'early'): the next page is asked
   * for with it before `parse` runs. Only a guess: the parsed page's token decides, and a request made with
   * a wrong guess is dropped and the page asked for again.
   */
  guess?: (raw: R) => string | undefined;
}

/**
 * The pages of a list in order. `fetch(cont)` asks for one page (cont undefined for the first); a page's
 * `metadata.continue` names the next one, and an empty or missing token ends the list.
 */
export function listPages<P extends Page>(fetch: (cont: string | undefined) => Promise<P>, o?: PagerOptions): AsyncGenerator<P>;
/** The same over answers that are parsed into pages (`parse`), with the next token guessed before (`guess`). */
export function listPages<R, P extends Page>(fetch: (cont: string | undefined) => Promise<R>, o: RawPagerOptions<R, P>): AsyncGenerator<P>;
export async function* listPages<R, P extends Page>(fetch: (cont: string | undefined) => Promise<R>, o: PagerOptions & Partial<RawPagerOptions<R, P>> = {}): AsyncGenerator<P> {
  const parse = o.parse ?? ((raw: R) => raw as unknown as P);
  const early = o.ask === 'early' || o.guess !== undefined;
  const ask = (cont: string | undefined) => {
    const p = fetch(cont);
    p.catch(() => {}); // awaited below or dropped; a request left in flight must not be an unhandled rejection
    return p;
  };
  let next: Promise<R> | undefined = ask(undefined);
  while (next) {
    const raw: R = await next;
    next = undefined;
    const guessed = o.guess?.(raw);
    if (guessed) next = ask(guessed);
    const page = parse(raw);
    const cont = page.metadata?.continue || undefined;
    if (early) {
      if (cont !== guessed) next = cont ? ask(cont) : undefined;
      yield page;
    } else {
      yield page;
      if (cont) next = ask(cont);
    }
  }
}
