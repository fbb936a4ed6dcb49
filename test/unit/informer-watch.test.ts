// The informer against watches that misbehave: a real HTTP server that ends every watch at once (a proxy
// or load balancer that closes long requests), and watch events older than what the cache already holds
// (the agent stores the objects its own writes return).
import { createServer, type Server } from 'node:http';
import test from 'ava';
import { NodeDiskClient, NODEDISKS_PATH } from '../../api/client.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { Informer, isOlder, type InformerSource, type Listed } from '../../lib/kube/informer.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import type { WatchEvent } from '../../lib/kube/watch.ts';
import { Backoff } from '../../lib/runtime/backoff.ts';
import { createLogger } from '../../lib/runtime/log.ts';
import { tokenAccess } from './_access.ts';

const silent = createLogger('test', { write: () => {} });

const nd = (name: string, rv: string, desired: 'Available' | 'Reserved' = 'Available'): NodeDisk => ({
  apiVersion: 'localtest.example.com/v1alpha1',
  kind: 'NodeDisk',
  metadata: { name, resourceVersion: rv },
  spec: { nodeName: 'n', diskID: name, path: `/d/${name}.img`, desired: { state: desired, ...(desired === 'Reserved' ? { owner: 'team-db' } : {}) } },
});

const until = async (what: string, cond: () => boolean, timeoutMs = 5000) => {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`${what}: not reached in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
};

/** An HTTP server that lists one NodeDisk and ends every watch at once, with no event. */
async function closingServer(): Promise<{ server: Server; url: string; watches: () => number; lists: () => number }> {
  let watches = 0;
  let lists = 0;
  const server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    if (u.pathname !== NODEDISKS_PATH) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    if (u.searchParams.get('watch') === 'true') {
      watches++;
      res.end(); // what a proxy that closes long requests does: 200, then nothing
    } else {
      lists++;
      res.end(JSON.stringify({ apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDiskList', metadata: { resourceVersion: '7' }, items: [nd('a', '7')] }));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return { server, url: `http://127.0.0.1:${port}`, watches: () => watches, lists: () => lists };
}

test('a watch that ends at once with no events is not re-opened at once: the informer backs off', async (t) => {
  const s = await closingServer();
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        s.server.close(() => resolve());
        s.server.closeAllConnections();
      }),
  );
  const c = new NodeDiskClient(new RestClient(tokenAccess(s.url, 't'), { timeoutMs: 2000 }));
  // The informer's own default backoff: the one the agent and the controller run with.
  const inf = new Informer<NodeDisk>({ list: (o) => c.list(o), watch: (o, sig) => c.watch(o, sig) }, {}, { log: silent });
  const stop = new AbortController();
  const done = inf.run(stop.signal);
  await until('synced', () => inf.hasSynced);
  const windowMs = 3000;
  const deadline = Date.now() + windowMs;
  await until('the window to pass', () => Date.now() >= deadline, windowMs + 1000);
  stop.abort();
  await done;
  // 500 ms doubling (with up to 20 % jitter): watches near 0, 0.5, 1.5 and 3.5 s; without backoff, hundreds.
  t.true(s.watches() <= 6, `${s.watches()} watches in ${windowMs} ms`);
  t.true(s.watches() >= 2, `${s.watches()} watches: the informer did watch again`);
  t.regex(inf.error?.message ?? '', /watch ended at once with no events/, 'the informer says it cannot watch');
});

test('with the watch-list too, watches that end at once back off: the informer syncs from the paged list and does not spin', async (t) => {
  const s = await closingServer();
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        s.server.close(() => resolve());
        s.server.closeAllConnections();
      }),
  );
  const c = new NodeDiskClient(new RestClient(tokenAccess(s.url, 't'), { timeoutMs: 2000 }));
  const inf = new Informer<NodeDisk>({ list: (o) => c.list(o), watch: (o, sig) => c.watch(o, sig), watchList: (o, sig) => c.watch(o, sig) }, {}, { log: silent });
  const stop = new AbortController();
  const done = inf.run(stop.signal);
  await until('synced', () => inf.hasSynced);
  const windowMs = 3000;
  const deadline = Date.now() + windowMs;
  await until('the window to pass', () => Date.now() >= deadline, windowMs + 1000);
  stop.abort();
  await done;
  // Each round is a watch-list cut at once, the paged list, and its watch cut at once: then the backoff.
  t.true(s.lists() <= 6, `${s.lists()} lists in ${windowMs} ms`);
  t.true(s.lists() >= 2, `${s.lists()} lists: the informer did try again`);
  t.deepEqual([...inf.cache.keys()], ['a'], 'synced from the paged list');
  t.regex(inf.error?.message ?? '', /watch ended at once with no events/, 'the informer says it cannot watch');
});

/** An informer source whose list and watch events the test hands out one by one. */
function scripted(listed: NodeDisk[]) {
  const queue: WatchEvent<NodeDisk>[] = [];
  let wake: (() => void) | undefined;
  const source: InformerSource<NodeDisk> = {
    list: async (): Promise<Listed<NodeDisk>> => ({ metadata: { resourceVersion: '10' }, items: listed.map((x) => structuredClone(x)) }),
    watch: async function* (_o, signal) {
      while (!signal.aborted) {
        const ev = queue.shift();
        if (ev) {
          yield ev;
          continue;
        }
        await new Promise<void>((resolve) => {
          wake = resolve;
          signal.addEventListener('abort', () => resolve(), { once: true });
        });
      }
    },
  };
  const send = (ev: WatchEvent<NodeDisk>) => {
    queue.push(ev);
    wake?.();
  };
  return { source, send, pending: () => queue.length };
}

test('a late watch event never replaces the newer object the owner stored from its own write', async (t) => {
  const src = scripted([nd('a', '10')]);
  const seen: string[] = [];
  const inf = new Informer<NodeDisk>(src.source, { onUpsert: (o) => seen.push(`${o.metadata.name}@${o.metadata.resourceVersion}`) }, { log: silent });
  const stop = new AbortController();
  const done = inf.run(stop.signal);
  await until('synced', () => inf.hasSynced);
  // The owner reserved it again and stored what its write returned (resourceVersion 13).
  inf.storeOwnWrite(nd('a', '13', 'Reserved'));
  // Then the watch catches up with a change from before that write (12: released), and one after it (14).
  src.send({ type: 'MODIFIED', object: nd('a', '12', 'Available') });
  src.send({ type: 'MODIFIED', object: nd('b', '9') });
  await until('both events handled', () => src.pending() === 0 && inf.cache.has('b'));
  t.is(inf.cache.get('a')?.metadata.resourceVersion, '13', 'the older event did not replace the newer object');
  t.is(inf.cache.get('a')?.spec.desired?.state, 'Reserved');
  src.send({ type: 'MODIFIED', object: nd('a', '14', 'Reserved') });
  await until('the newer event applied', () => inf.cache.get('a')?.metadata.resourceVersion === '14');
  // Nor does a write's answer that the watch has already overtaken go back in time.
  inf.storeOwnWrite(nd('a', '11', 'Available'));
  t.is(inf.cache.get('a')?.metadata.resourceVersion, '14');
  // A late DELETED of an older object does not drop a newer one of the same name (re-created meanwhile).
  src.send({ type: 'DELETED', object: nd('a', '12') });
  src.send({ type: 'MODIFIED', object: nd('c', '15') });
  await until('the delete handled', () => inf.cache.has('c'));
  t.is(inf.cache.get('a')?.metadata.resourceVersion, '14');
  stop.abort();
  await done;
  t.deepEqual(seen, ['a@10', 'b@9', 'a@14', 'c@15']);
});

test('a relist keeps what the owner stored from a write newer than the list, and drops what is gone', async (t) => {
  let lists = 0;
  let expire: () => void = () => {};
  const expired = new Promise<void>((resolve) => (expire = resolve));
  const source: InformerSource<NodeDisk> = {
    // The first list has a and b; the second (at 20) a older than the owner's write, and no c: c was
    // created by the owner after that list's snapshot (25), b was deleted before it.
    list: async () => (++lists === 1 ? { metadata: { resourceVersion: '10' }, items: [nd('a', '10'), nd('b', '9')] } : { metadata: { resourceVersion: '20' }, items: [nd('a', '18')] }),
    watch: async function* () {
      await new Promise((r) => setImmediate(r));
      if (lists === 1) await expired; // the owner writes first
      if (lists === 1) yield { type: 'ERROR', object: { kind: 'Status', code: 410, message: 'too old' } } as WatchEvent<NodeDisk>;
      else await new Promise((r) => setTimeout(r, 50));
    },
  };
  const inf = new Informer<NodeDisk>(source, {}, { log: silent, backoff: new Backoff({ initialMs: 1000, maxMs: 1000 }) });
  const stop = new AbortController();
  const done = inf.run(stop.signal);
  await until('synced', () => inf.hasSynced);
  inf.storeOwnWrite(nd('a', '19', 'Reserved'));
  inf.storeOwnWrite(nd('c', '25'));
  expire();
  await until('relisted', () => lists >= 2 && !inf.cache.has('b'));
  stop.abort();
  await done;
  t.is(inf.cache.get('a')?.metadata.resourceVersion, '19');
  t.is(inf.cache.get('c')?.metadata.resourceVersion, '25');
});

test('resourceVersions that are not integers cannot be ordered: the newest event wins, as before', async (t) => {
  const src = scripted([nd('a', 'x1')]);
  const inf = new Informer<NodeDisk>(src.source, {}, { log: silent });
  const stop = new AbortController();
  const done = inf.run(stop.signal);
  await until('synced', () => inf.hasSynced);
  inf.storeOwnWrite(nd('a', 'x3'));
  src.send({ type: 'MODIFIED', object: nd('a', 'x2') });
  await until('event handled', () => inf.cache.get('a')?.metadata.resourceVersion === 'x2');
  stop.abort();
  await done;
  t.pass();
});

/** A backoff of 1 ms that records each next() and reset() into `calls`. */
function recordingBackoff(calls: string[]): Backoff {
  return new (class extends Backoff {
    override next(): number {
      calls.push('next');
      return 1;
    }
    override reset(): void {
      calls.push('reset');
    }
  })({ initialMs: 1, maxMs: 1 });
}

test('the backoff grows while watches end at once, and is reset by a watch that delivered events', async (t) => {
  let watches = 0;
  const calls: string[] = [];
  const source: InformerSource<NodeDisk> = {
    list: async () => ({ metadata: { resourceVersion: '10' }, items: [nd('a', '10')] }),
    watch: async function* () {
      watches++;
      await new Promise((r) => setImmediate(r)); // a watch is I/O: never a loop of microtasks only
      if (watches === 3) yield { type: 'MODIFIED', object: nd('a', String(10 + watches)) };
    },
  };
  const inf = new Informer<NodeDisk>(source, {}, { log: silent, backoff: recordingBackoff(calls) });
  const stop = new AbortController();
  const done = inf.run(stop.signal);
  await until('five watches', () => watches >= 5);
  stop.abort();
  await done;
  // Two short watches back off twice in a row (no reset by the relist between them), the third delivered
  // an event: reset; the fourth ends at once again and backs off from the start.
  t.deepEqual(calls.slice(0, 4), ['next', 'next', 'reset', 'next']);
});

test('a watch that is told at once that its version expired backs off before relisting again, as client-go does', async (t) => {
  let lists = 0;
  let watches = 0;
  const calls: string[] = [];
  const source: InformerSource<NodeDisk> = {
    list: async () => {
      lists++;
      return { metadata: { resourceVersion: '10' }, items: [nd('a', '10')] };
    },
    watch: async function* () {
      watches++;
      await new Promise((r) => setImmediate(r));
      // The third watch works (an event, then the server's 410 after it): that relist needs no backoff.
      if (watches === 3) yield { type: 'MODIFIED', object: nd('a', '11') };
      yield { type: 'ERROR', object: { kind: 'Status', code: 410, message: 'too old resource version' } } as WatchEvent<NodeDisk>;
    },
  };
  const inf = new Informer<NodeDisk>(source, {}, { log: silent, backoff: recordingBackoff(calls) });
  const stop = new AbortController();
  const done = inf.run(stop.signal);
  await until('five relists', () => lists >= 5);
  stop.abort();
  await done;
  // Watches 1 and 2 expire at once: a backoff each; watch 3 delivered an event: reset, and its 410 relists
  // at once; watch 4 expires at once again: a backoff.
  t.deepEqual(calls.slice(0, 4), ['next', 'next', 'reset', 'next']);
});

test('resourceVersions compare as integers, not as text', (t) => {
  const at = (rv: string) => ({ metadata: { resourceVersion: rv } });
  t.true(isOlder(at('9'), at('10')));
  t.false(isOlder(at('10'), at('9')));
  t.true(isOlder(at('123'), at('124')));
  t.false(isOlder(at('124'), at('124')));
  t.true(isOlder(at('99999999999999999998'), at('99999999999999999999')));
  t.false(isOlder(at('x1'), at('2')), 'not an integer: not ordered');
  t.false(isOlder(at(''), at('2')));
});
