// The one pager (lib/kube/pager.ts): when each page is asked for, how the token guessed from a raw answer
// is checked, and that an error (an expired continue token) reaches the caller unchanged, never restarted.
import test from 'ava';
import { listPages } from '../../lib/kube/pager.ts';

type P = { items: string[]; metadata: { continue?: string } };

/** Pages keyed by continue token ('-' is the first); a missing token answers an expired-token error. */
function server(pages: Record<string, P>, calls: string[]) {
  return (cont: string | undefined): Promise<P> => {
    calls.push(`ask ${cont ?? '-'}`);
    const page = pages[cont ?? '-'];
    return page ? Promise.resolve(page) : Promise.reject(Object.assign(new Error(`continue token ${cont} expired`), { statusCode: 410 }));
  };
}

const THREE: Record<string, P> = {
  '-': { items: ['a'], metadata: { continue: 'c1' } },
  c1: { items: ['b'], metadata: { continue: 'c2' } },
  c2: { items: ['c'], metadata: { continue: '' } },
};

test('by default the next page is asked for only when the consumer wants it, and an empty token ends the list', async (t) => {
  const calls: string[] = [];
  for await (const page of listPages(server(THREE, calls))) calls.push(`use ${page.items.join()}`);
  t.deepEqual(calls, ['ask -', 'use a', 'ask c1', 'use b', 'ask c2', 'use c']);
});

test("with ask: 'early' the next page is asked for as soon as a page arrives, before the consumer uses it", async (t) => {
  const calls: string[] = [];
  for await (const page of listPages(server(THREE, calls), { ask: 'early' })) calls.push(`use ${page.items.join()}`);
  t.deepEqual(calls, ['ask -', 'ask c1', 'use a', 'ask c2', 'use b', 'use c']);
});

test('a guessed token asks before parsing; a wrong guess is dropped and the parsed token asked for', async (t) => {
  const calls: string[] = [];
  const raw: Record<string, string> = {
    '-': JSON.stringify({ items: ['a'], metadata: { continue: 'c1' } }),
    c1: JSON.stringify({ items: ['b'], metadata: { continue: 'c2' } }),
    c2: JSON.stringify({ items: ['c'], metadata: {} }),
    decoy: JSON.stringify({ items: ['x'], metadata: {} }),
  };
  const fetch = (cont: string | undefined) => {
    calls.push(`ask ${cont ?? '-'}`);
    return Promise.resolve(raw[cont ?? '-']!);
  };
  // Right for the first page, wrong (a decoy) for the second, none for the last.
  const guesses: Record<string, string | undefined> = { [raw['-']!]: 'c1', [raw.c1!]: 'decoy' };
  const parse = (text: string) => {
    const page = JSON.parse(text) as P;
    calls.push(`parse ${page.items.join()}`);
    return page;
  };
  const names: string[] = [];
  for await (const page of listPages(fetch, { parse, guess: (text) => guesses[text] })) names.push(...page.items);
  t.deepEqual(names, ['a', 'b', 'c']);
  t.deepEqual(calls, ['ask -', 'ask c1', 'parse a', 'ask decoy', 'parse b', 'ask c2', 'parse c']);
});

for (const ask of ['after', 'early'] as const) {
  test(`an expired continue token (410) ends the pages with that error, after the pages before it, and is not restarted (ask: ${ask})`, async (t) => {
    const calls: string[] = [];
    const seen: string[] = [];
    const err = await t.throwsAsync(async () => {
      for await (const page of listPages(server({ '-': THREE['-']!, c1: THREE.c1! }, calls), { ask })) seen.push(...page.items);
    });
    t.is((err as Error & { statusCode?: number }).statusCode, 410);
    t.deepEqual(seen, ['a', 'b']);
    t.deepEqual(calls, ['ask -', 'ask c1', 'ask c2']);
  });
}

test('a page requested early and left unused when the consumer stops is no unhandled rejection', async (t) => {
  const calls: string[] = [];
  const rejections: unknown[] = [];
  const onRejection = (reason: unknown) => rejections.push(reason);
  process.on('unhandledRejection', onRejection);
  try {
    for await (const page of listPages(server({ '-': THREE['-']! }, calls), { ask: 'early' })) {
      t.deepEqual(page.items, ['a']);
      // The early request for c1 fails while this page is used; the consumer then stops.
      await new Promise((r) => setImmediate(r));
      break;
    }
    await new Promise((r) => setImmediate(r));
    t.deepEqual(calls, ['ask -', 'ask c1']);
    t.deepEqual(rejections, []);
  } finally {
    process.off('unhandledRejection', onRejection);
  }
});
