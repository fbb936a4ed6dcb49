// The informer's streaming watch-list (KEP-3157) against nock: the initial state arrives as events and
// ends at the initial-events-end bookmark, the same watch then goes on; where the API server does not offer
// it (422 from a server whose WatchList gate is off, a 400, a plain watch, a stream cut before the
// bookmark) the informer lists in pages, as before.
import { Readable } from 'node:stream';
import test from 'ava';
import nock from 'nock';
import { NodeDiskClient, NODEDISKS_PATH } from '../../api/client.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { INITIAL_EVENTS_END, Informer, type InformerOptions } from '../../lib/kube/informer.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import { Backoff } from '../../lib/runtime/backoff.ts';
import { createLogger } from '../../lib/runtime/log.ts';
import { tokenAccess } from './_access.ts';

const SERVER = 'https://k8s.watchlist.test:6443';

const nd = (name: string, rv: string, state: 'Available' | 'Reserved' = 'Available') => ({
  apiVersion: 'localtest.example.com/v1alpha1',
  kind: 'NodeDisk',
  metadata: { name, resourceVersion: rv, managedFields: [{ manager: 'x' }] },
  spec: { nodeName: 'n', diskID: name, path: `/d/${name}.img`, desired: { state, ...(state === 'Reserved' ? { owner: 'team-db' } : {}) } },
});
const list = (rv: string, ...items: object[]) => ({ apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDiskList', metadata: { resourceVersion: rv }, items });
const lines = (...events: object[]) => events.map((e) => JSON.stringify(e)).join('\n') + '\n';
/** The bookmark that ends the initial events, as kube-apiserver sends it. */
const endBookmark = (rv: string) => ({
  type: 'BOOKMARK',
  object: { kind: 'NodeDisk', apiVersion: 'localtest.example.com/v1alpha1', metadata: { resourceVersion: rv, creationTimestamp: null, annotations: { [INITIAL_EVENTS_END]: 'true' } }, spec: {} },
});
const plainBookmark = (rv: string) => ({ type: 'BOOKMARK', object: { kind: 'NodeDisk', apiVersion: 'localtest.example.com/v1alpha1', metadata: { resourceVersion: rv } } });
/** kube-apiserver 1.35's answer to a watch-list when its WatchList feature gate is off. */
const gateOff = {
  kind: 'Status',
  apiVersion: 'v1',
  metadata: {},
  status: 'Failure',
  message: 'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled',
  reason: 'Invalid',
  details: { group: 'meta.k8s.io', kind: 'ListOptions', causes: [{ reason: 'FieldValueForbidden', field: 'sendInitialEvents' }] },
  code: 422,
};

const isWatchList = (q: Record<string, unknown>) =>
  q.watch === 'true' && q.sendInitialEvents === 'true' && q.resourceVersionMatch === 'NotOlderThan' && q.allowWatchBookmarks === 'true' && q.resourceVersion === undefined;
const isPlainWatch = (rv: string) => (q: Record<string, unknown>) => q.watch === 'true' && q.resourceVersion === rv && q.sendInitialEvents === undefined && q.resourceVersionMatch === undefined;
const isList = (q: Record<string, unknown>) => q.watch === undefined && q.limit === '500';

test.before(() => nock.disableNetConnect());
// An informer left running by a failed test must not take the next test's replies.
const running: AbortController[] = [];
test.afterEach.always(() => {
  for (const stop of running.splice(0)) stop.abort();
  nock.cleanAll();
});

interface Seen {
  upserts: string[];
  deletes: string[];
  syncs: number;
  logs: string[];
}

function run(o: Partial<InformerOptions<NodeDisk>> = {}) {
  const seen: Seen = { upserts: [], deletes: [], syncs: 0, logs: [] };
  const c = new NodeDiskClient(new RestClient(tokenAccess(SERVER, 't'), { timeoutMs: 2000 }));
  const inf = new Informer<NodeDisk>(
    { list: (l) => c.list(l), watch: (w, s) => c.watch(w, s), watchList: (w, s) => c.watch(w, s) },
    {
      onUpsert: (x) => seen.upserts.push(`${x.metadata.name}@${x.metadata.resourceVersion}`),
      onDelete: (x) => seen.deletes.push(x.metadata.name ?? ''),
      onSync: () => seen.syncs++,
    },
    {
      log: createLogger('test', { level: 'debug', write: (line) => seen.logs.push(line) }),
      backoff: new Backoff({ initialMs: 10, maxMs: 20 }),
      watchTimeoutSeconds: 60,
      ...o,
    },
  );
  const stop = new AbortController();
  running.push(stop);
  return { inf, seen, stop, done: inf.run(stop.signal) };
}

const until = async (what: string, cond: () => boolean) => {
  const deadline = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`${what}: not reached`);
    await new Promise((r) => setTimeout(r, 10));
  }
};

test.serial('the initial state arrives through the watch-list, syncs at its end bookmark, and the same watch goes on', async (t) => {
  const scope = nock(SERVER)
    .get(NODEDISKS_PATH)
    .query(isWatchList)
    .reply(
      200,
      lines(
        { type: 'ADDED', object: nd('a', '5') },
        { type: 'ADDED', object: nd('b', '6') },
        { type: 'ADDED', object: nd('c', '7') },
        endBookmark('9'),
        { type: 'MODIFIED', object: nd('a', '10', 'Reserved') },
        { type: 'DELETED', object: nd('c', '11') },
      ),
    )
    // The server closed the stream (its timeout): a plain watch from the last event's version.
    .get(NODEDISKS_PATH)
    .query(isPlainWatch('11'))
    .delay(3000)
    .reply(200, '');
  const transformed: string[] = [];
  const { inf, seen, stop, done } = run({
    transform: (x) => {
      transformed.push(x.metadata.name ?? '');
      const { managedFields: _, ...metadata } = x.metadata;
      return { ...x, metadata };
    },
  });
  await until('the second watch', () => scope.isDone());
  stop.abort();
  await done;
  t.true(inf.hasSynced);
  t.is(seen.syncs, 1, 'one sync, at the end bookmark');
  t.deepEqual(seen.upserts, ['a@5', 'b@6', 'c@7', 'a@10'], 'the initial objects are handed on at the bookmark, then the later events');
  t.deepEqual(seen.deletes, ['c']);
  t.deepEqual([...inf.cache.keys()].sort(), ['a', 'b']);
  t.is(inf.cache.get('a')?.spec.desired?.state, 'Reserved');
  t.is(inf.cache.get('a')?.metadata.managedFields, undefined, 'the transform applies to the initial events');
  t.deepEqual(transformed, ['a', 'b', 'c', 'a', 'c'], 'every object, never the bookmark');
  t.is(inf.error, undefined);
});

test.serial('an initial state never replaces a newer object the owner stored from its own write meanwhile', async (t) => {
  let release: () => void = () => {};
  const held = new Promise<void>((r) => (release = r));
  nock(SERVER)
    .get(NODEDISKS_PATH)
    .query(isWatchList)
    .reply(200, () =>
      Readable.from(
        (async function* () {
          yield lines({ type: 'ADDED', object: nd('a', '5') });
          await held;
          yield lines(endBookmark('6'));
        })(),
      ),
    )
    .get(NODEDISKS_PATH)
    .query(isPlainWatch('6'))
    .delay(3000)
    .reply(200, '');
  const { inf, stop, done } = run();
  await new Promise((r) => setTimeout(r, 100));
  inf.storeOwnWrite(nd('a', '8', 'Reserved') as NodeDisk);
  release();
  await until('synced', () => inf.hasSynced);
  stop.abort();
  await done;
  t.is(inf.cache.get('a')?.metadata.resourceVersion, '8');
  t.is(inf.cache.get('a')?.spec.desired?.state, 'Reserved');
});

for (const [what, code, body] of [
  ['422 Invalid (the WatchList feature gate off)', 422, gateOff],
  ['400 Bad Request', 400, { kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'unknown parameter sendInitialEvents', reason: 'BadRequest', code: 400 }],
] as const) {
  test.serial(`a watch-list refused with ${what} falls back to the paged list and its watch`, async (t) => {
    const scope = nock(SERVER)
      .get(NODEDISKS_PATH)
      .query(isWatchList)
      .reply(code, body)
      .get(NODEDISKS_PATH)
      .query(isList)
      .reply(200, list('20', nd('a', '5'), nd('b', '6')))
      .get(NODEDISKS_PATH)
      .query(isPlainWatch('20'))
      .delay(3000)
      .reply(200, '');
    const { inf, seen, stop, done } = run();
    await until('the watch after the list', () => scope.isDone());
    stop.abort();
    await done;
    t.true(inf.hasSynced);
    t.deepEqual([...inf.cache.keys()], ['a', 'b']);
    t.is(inf.error, undefined, 'a refusal is no error: it is how an older server answers');
    t.true(
      seen.logs.some((l) => l.includes('no streaming watch-list; listing in pages') && l.includes(String(code))),
      seen.logs.join('\n'),
    );
  });
}

test.serial('a watch that answers the watch-list as a plain watch (a bookmark without the annotation) falls back to the paged list', async (t) => {
  const scope = nock(SERVER)
    .get(NODEDISKS_PATH)
    .query(isWatchList)
    .reply(200, lines({ type: 'ADDED', object: nd('a', '5') }, plainBookmark('8'), { type: 'ADDED', object: nd('z', '9') }))
    .get(NODEDISKS_PATH)
    .query(isList)
    .reply(200, list('20', nd('a', '5'), nd('b', '6')))
    .get(NODEDISKS_PATH)
    .query(isPlainWatch('20'))
    .delay(3000)
    .reply(200, '');
  const { inf, seen, stop, done } = run();
  await until('the watch after the list', () => scope.isDone());
  stop.abort();
  await done;
  t.deepEqual([...inf.cache.keys()], ['a', 'b'], 'nothing of the plain watch was kept');
  t.is(seen.syncs, 1);
  t.true(seen.logs.some((l) => l.includes('without the initial-events-end annotation')));
});

test.serial('a watch-list cut before its end bookmark falls back to the paged list, without caching the part that came', async (t) => {
  const scope = nock(SERVER)
    .get(NODEDISKS_PATH)
    .query(isWatchList)
    .reply(200, lines({ type: 'ADDED', object: nd('a', '5') }, { type: 'ADDED', object: nd('x', '6') }))
    .get(NODEDISKS_PATH)
    .query(isList)
    .reply(200, list('20', nd('a', '5'), nd('b', '6')))
    .get(NODEDISKS_PATH)
    .query(isPlainWatch('20'))
    .delay(3000)
    .reply(200, '');
  const { inf, seen, stop, done } = run();
  await until('the watch after the list', () => scope.isDone());
  stop.abort();
  await done;
  t.deepEqual([...inf.cache.keys()], ['a', 'b']);
  t.deepEqual(seen.upserts, ['a@5', 'b@6'], 'no handler saw the partial state');
  t.true(seen.logs.some((l) => l.includes('ended before its initial-events-end bookmark (after 2 events)')));
});

test.serial('a 410 on the continued watch syncs again through the watch-list, and what is gone is deleted', async (t) => {
  const scope = nock(SERVER)
    .get(NODEDISKS_PATH)
    .query(isWatchList)
    .reply(200, lines({ type: 'ADDED', object: nd('a', '5') }, { type: 'ADDED', object: nd('b', '6') }, endBookmark('7')))
    .get(NODEDISKS_PATH)
    .query(isPlainWatch('7'))
    .reply(200, lines({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' } }))
    .get(NODEDISKS_PATH)
    .query(isWatchList)
    .reply(200, lines({ type: 'ADDED', object: nd('a', '12') }, endBookmark('30')))
    .get(NODEDISKS_PATH)
    .query(isPlainWatch('30'))
    .delay(3000)
    .reply(200, '');
  const { inf, seen, stop, done } = run();
  await until('the last watch', () => scope.isDone());
  stop.abort();
  await done;
  t.deepEqual([...inf.cache.keys()], ['a']);
  t.deepEqual(seen.deletes, ['b']);
  t.deepEqual(seen.upserts, ['a@5', 'b@6', 'a@12']);
  t.is(seen.syncs, 2);
});

test.serial('an error before the end bookmark is a list error: backed off, then the watch-list is asked again', async (t) => {
  const scope = nock(SERVER)
    .get(NODEDISKS_PATH)
    .query(isWatchList)
    .reply(503, { kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'the server is shutting down', code: 503 })
    .get(NODEDISKS_PATH)
    .query(isWatchList)
    .reply(200, lines({ type: 'ADDED', object: nd('a', '5') }, endBookmark('7')))
    .get(NODEDISKS_PATH)
    .query(isPlainWatch('7'))
    .delay(3000)
    .reply(200, '');
  const { inf, seen, stop, done } = run();
  await until('the last watch', () => scope.isDone());
  stop.abort();
  await done;
  t.true(inf.hasSynced);
  t.is(inf.error, undefined, 'cleared by the sync');
  t.true(seen.logs.some((l) => l.includes('list failed') && l.includes('shutting down')));
});

test.serial('watchList false lists in pages and never asks for a watch-list', async (t) => {
  const scope = nock(SERVER)
    .get(NODEDISKS_PATH)
    .query(isList)
    .reply(200, list('20', nd('a', '5')))
    .get(NODEDISKS_PATH)
    .query(isPlainWatch('20'))
    .delay(3000)
    .reply(200, '');
  const { inf, stop, done } = run({ watchList: false });
  await until('the watch after the list', () => scope.isDone());
  stop.abort();
  await done;
  t.deepEqual([...inf.cache.keys()], ['a']);
});
