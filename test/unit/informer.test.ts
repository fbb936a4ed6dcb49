// The informer's recovery paths against nock: 410 on a watch relists, a server-closed watch resumes
// from the last resourceVersion, and a failing list backs off and retries.
import test from 'ava';
import nock from 'nock';
import { NodeDiskClient, NODEDISKS_PATH } from '../../api/client.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { Informer, keyOfNamespaced } from '../../lib/kube/informer.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import { tokenAccess } from './_access.ts';
import { Backoff } from '../../lib/runtime/backoff.ts';
import { createLogger } from '../../lib/runtime/log.ts';

const SERVER = 'https://k8s.informer.test:6443';
const silent = createLogger('test', { write: () => {} });

function client(): NodeDiskClient {
  return new NodeDiskClient(new RestClient(tokenAccess(SERVER, 't'), { timeoutMs: 2000 }));
}

const nd = (name: string, rv: string) => ({
  apiVersion: 'localtest.example.com/v1alpha1',
  kind: 'NodeDisk',
  metadata: { name, resourceVersion: rv },
  spec: { nodeName: 'n', diskID: name, path: `/d/${name}.img` },
});
const list = (rv: string, ...items: object[]) => ({ apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDiskList', metadata: { resourceVersion: rv }, items });
const lines = (...events: object[]) => events.map((e) => JSON.stringify(e)).join('\n') + '\n';

test.before(() => nock.disableNetConnect());
test.afterEach.always(() => nock.cleanAll());

function run(handlers: { upserts: string[]; deletes: string[] }) {
  const c = client();
  const inf = new Informer<NodeDisk>(
    { list: (o) => c.list(o), watch: (o, s) => c.watch(o, s) },
    { onUpsert: (o) => handlers.upserts.push(`${o.metadata.name}@${o.metadata.resourceVersion}`), onDelete: (o) => handlers.deletes.push(o.metadata.name ?? '') },
    { log: silent, backoff: new Backoff({ initialMs: 10, maxMs: 20 }), watchTimeoutSeconds: 60 },
  );
  const stop = new AbortController();
  return { inf, stop, done: inf.run(stop.signal) };
}

const until = async (cond: () => boolean) => {
  const deadline = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 10));
  }
};

test.serial('a 410 during the watch relists, and objects gone meanwhile are deleted from the cache', async (t) => {
  nock(SERVER)
    .get(NODEDISKS_PATH)
    .query({ limit: '500' })
    .reply(200, list('10', nd('a', '5'), nd('b', '6')))
    .get(NODEDISKS_PATH)
    .query((q) => q.watch === 'true' && q.resourceVersion === '10')
    .reply(200, lines({ type: 'MODIFIED', object: nd('a', '11') }, { type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' } }))
    .get(NODEDISKS_PATH)
    .query({ limit: '500' })
    .reply(200, list('20', nd('a', '11')))
    .get(NODEDISKS_PATH)
    .query((q) => q.watch === 'true' && q.resourceVersion === '20')
    .delay(3000)
    .reply(200, '');
  const seen = { upserts: [] as string[], deletes: [] as string[] };
  const { inf, stop, done } = run(seen);
  await until(() => seen.deletes.includes('b'));
  stop.abort();
  await done;
  t.deepEqual(seen.upserts.slice(0, 3), ['a@5', 'b@6', 'a@11']);
  t.deepEqual([...inf.cache.keys()], ['a']);
});

test.serial('a failing list backs off and retries until it succeeds', async (t) => {
  nock(SERVER)
    .get(NODEDISKS_PATH)
    .query({ limit: '500' })
    .reply(503, { kind: 'Status', code: 503, message: 'unavailable' })
    .get(NODEDISKS_PATH)
    .query({ limit: '500' })
    .reply(429, { kind: 'Status', code: 429, message: 'slow down' }, { 'Retry-After': '1' })
    .get(NODEDISKS_PATH)
    .query({ limit: '500' })
    .reply(200, list('7', nd('a', '7')))
    .get(NODEDISKS_PATH)
    .query((q) => q.watch === 'true')
    .delay(3000)
    .reply(200, '');
  const seen = { upserts: [] as string[], deletes: [] as string[] };
  const { inf, stop, done } = run(seen);
  await until(() => inf.hasSynced);
  stop.abort();
  await done;
  t.deepEqual(seen.upserts, ['a@7']);
  t.is(inf.error, undefined);
});

test.serial('a watch that goes silent is cut by the watchdog and the informer lists again', async (t) => {
  const { PassThrough } = await import('node:stream');
  let lists = 0;
  const silent = new PassThrough(); // headers and one byte arrive, then nothing: a half-dead connection
  silent.write(' ');
  nock(SERVER)
    .get(NODEDISKS_PATH)
    .query({ limit: '500' })
    .times(2)
    .reply(200, () => {
      lists++;
      return list(String(lists), nd('a', String(lists)));
    })
    .get(NODEDISKS_PATH)
    .query((q) => q.watch === 'true' && q.resourceVersion === '1')
    .reply(200, () => silent)
    .get(NODEDISKS_PATH)
    .query((q) => q.watch === 'true' && q.resourceVersion === '2')
    .delay(3000)
    .reply(200, '');
  const c = client();
  const seen: string[] = [];
  const inf = new Informer<NodeDisk>(
    { list: (o) => c.list(o), watch: (o, s) => c.watch(o, s) },
    { onUpsert: (o) => seen.push(`${o.metadata.name}@${o.metadata.resourceVersion}`) },
    { log: createLogger('test', { write: () => {} }), backoff: new Backoff({ initialMs: 10, maxMs: 20 }), watchTimeoutSeconds: 1, watchdogGraceMs: 100 },
  );
  const stop = new AbortController();
  const done = inf.run(stop.signal);
  const started = Date.now();
  await until(() => lists === 2);
  stop.abort();
  await done;
  silent.end();
  t.deepEqual(seen, ['a@1', 'a@2']);
  t.true(Date.now() - started < 4000, 'cut after the watch timeout plus the grace, not left hanging');
});

test.serial('a transform is applied before anything is cached or handed on, from the list and from the watch', async (t) => {
  const withFields = (name: string, rv: string) => ({ ...nd(name, rv), metadata: { name, resourceVersion: rv, managedFields: [{ manager: 'x', operation: 'Apply' }] } });
  nock(SERVER)
    .get(NODEDISKS_PATH)
    .query({ limit: '500' })
    .reply(200, list('10', withFields('a', '5')))
    .get(NODEDISKS_PATH)
    .query((q) => q.watch === 'true' && q.resourceVersion === '10')
    .reply(200, lines({ type: 'ADDED', object: withFields('b', '11') }))
    .get(NODEDISKS_PATH)
    .query((q) => q.watch === 'true')
    .delay(3000)
    .reply(200, '');
  const c = client();
  const handed: object[] = [];
  const inf = new Informer<NodeDisk>(
    { list: (o) => c.list(o), watch: (o, s) => c.watch(o, s) },
    { onUpsert: (o) => handed.push(o) },
    {
      log: silent,
      backoff: new Backoff({ initialMs: 10, maxMs: 20 }),
      watchTimeoutSeconds: 60,
      transform: (o) => ({ ...o, metadata: { name: o.metadata.name, resourceVersion: o.metadata.resourceVersion } }),
    },
  );
  const stop = new AbortController();
  const done = inf.run(stop.signal);
  await until(() => inf.cache.has('b'));
  stop.abort();
  await done;
  t.deepEqual(
    [...inf.cache.values()].map((o) => o.metadata),
    [
      { name: 'a', resourceVersion: '5' },
      { name: 'b', resourceVersion: '11' },
    ],
  );
  t.true(
    handed.every((o) => !('managedFields' in (o as NodeDisk).metadata)),
    'a handler saw managedFields',
  );
});

/** A source serving pages as text (as the API server lays them out unless `layout` says otherwise). */
function textSource(pages: Record<string, string>, calls: string[]) {
  return {
    list: () => Promise.reject(new Error('list() must not be used when listText is given')),
    listText: (o: { continue?: string }) => {
      calls.push(`ask ${o.continue ?? '-'}`);
      const text = pages[o.continue ?? '-'];
      return text === undefined ? Promise.reject(new Error(`410 Gone: continue token ${o.continue} expired`)) : Promise.resolve(text);
    },
    watch: async function* (_o: unknown, signal: AbortSignal): AsyncGenerator<never> {
      await new Promise((r) => signal.addEventListener('abort', r));
    },
  };
}
const itemsText = (...names: string[]) => names.map((n) => JSON.stringify(nd(n, '5'))).join(',');

async function listWith(pages: Record<string, string>) {
  const calls: string[] = [];
  const inf = new Informer<NodeDisk>(
    textSource(pages, calls),
    {},
    {
      log: silent,
      backoff: new Backoff({ initialMs: 10, maxMs: 20 }),
      transform: (o) => (calls.push(`item ${o.metadata.name}`), o),
    },
  );
  const stop = new AbortController();
  const done = inf.run(stop.signal);
  await until(() => inf.hasSynced);
  stop.abort();
  await done;
  return { calls, names: [...inf.cache.keys()] };
}

test.serial('a relist asks for the next page before it parses the one that arrived (the server encodes while we parse)', async (t) => {
  // The API server's layout: apiVersion, items, kind, then metadata with the continue token.
  const { calls, names } = await listWith({
    '-': `{"apiVersion":"v","items":[${itemsText('a', 'b')}],"kind":"NodeDiskList","metadata":{"continue":"c1","resourceVersion":"9"}}`,
    c1: `{"apiVersion":"v","items":[${itemsText('c')}],"kind":"NodeDiskList","metadata":{"resourceVersion":"9"}}`,
  });
  t.deepEqual(calls, ['ask -', 'ask c1', 'item a', 'item b', 'item c']);
  t.deepEqual(names, ['a', 'b', 'c']);
});

test.serial('a page laid out otherwise is still listed whole: the token read from the text is checked against the parsed page', async (t) => {
  // Metadata first, and an item whose own field looks like a continue token at the end of the text.
  const decoy = JSON.stringify({ ...nd('b', '5'), status: { note: { continue: 'decoy' } } });
  const { calls, names } = await listWith({
    '-': `{"metadata":{"continue":"c1","resourceVersion":"9"},"kind":"NodeDiskList","items":[${itemsText('a')},${decoy}]}`,
    c1: `{"metadata":{"resourceVersion":"9"},"items":[${itemsText('c')}]}`,
  });
  // The wrong guess was asked for and dropped (its failure is no unhandled rejection: ava would fail).
  t.deepEqual(calls, ['ask -', 'ask decoy', 'ask c1', 'item a', 'item b', 'item c']);
  t.deepEqual(names, ['a', 'b', 'c']);
});

test('a namespaced resource is cached by namespace/name: same names in two namespaces are two objects', async (t) => {
  const claim = (namespace: string, rv: string) => ({ metadata: { name: 'db', namespace, resourceVersion: rv } });
  const upserts: string[] = [];
  const stop = new AbortController();
  const inf = new Informer<{ metadata: { name: string; namespace: string; resourceVersion: string } }>(
    {
      list: async () => ({ metadata: { resourceVersion: '3' }, items: [claim('team-a', '1'), claim('team-b', '2')] }),
      watch: async function* (_o, signal) {
        yield { type: 'MODIFIED' as const, object: claim('team-a', '4') };
        await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
      },
    },
    { onUpsert: (o) => upserts.push(`${keyOfNamespaced(o)}@${o.metadata.resourceVersion}`) },
    { log: silent, key: keyOfNamespaced },
  );
  const done = inf.run(stop.signal);
  await until(() => upserts.length === 3);
  stop.abort();
  await done;
  t.deepEqual(upserts, ['team-a/db@1', 'team-b/db@2', 'team-a/db@4']);
  t.deepEqual([...inf.cache.keys()].sort(), ['team-a/db', 'team-b/db']);
  t.is(inf.cache.get('team-b/db')?.metadata.resourceVersion, '2');
});

// The API server answers an empty PartialObjectMetadataList (Nodes as metadata, in a cluster with no Node
// at all) with "items": null: the informer syncs on it as on an empty list.
test.serial('a list whose items are null is an empty list: the informer syncs and watches', async (t) => {
  nock(SERVER)
    .get(NODEDISKS_PATH)
    .query({ limit: '500' })
    .reply(200, { apiVersion: 'meta.k8s.io/v1', kind: 'PartialObjectMetadataList', metadata: { resourceVersion: '7' }, items: null })
    .get(NODEDISKS_PATH)
    .query((q) => q.watch === 'true' && q.resourceVersion === '7')
    .reply(200, lines({ type: 'ADDED', object: nd('a', '8') }))
    .get(NODEDISKS_PATH)
    .query((q) => q.watch === 'true')
    .delay(5000)
    .reply(200, '');
  const h = { upserts: [] as string[], deletes: [] as string[] };
  const { inf, stop, done } = run(h);
  await until(() => inf.hasSynced && h.upserts.length === 1);
  t.deepEqual(h.upserts, ['a@8']);
  t.is(inf.error, undefined);
  stop.abort();
  await done;
});
