// The client-side rate limit (client-go's QPS and burst): a token bucket that lets a burst through at
// once and then paces at QPS, and the REST client waiting on it for every request it sends.
import { createServer } from 'node:http';
import test from 'ava';
import { TokenBucket } from '../../lib/kube/ratelimit.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import { tokenAccess } from './_access.ts';

test('the bucket lets `burst` requests go at once, then one every 1/qps, in the order they asked', (t) => {
  let now = 0;
  const bucket = new TokenBucket({ qps: 10, burst: 3 }, () => now);
  t.deepEqual([bucket.reserve(), bucket.reserve(), bucket.reserve()], [0, 0, 0]);
  // Empty: the next ones are spaced 100 ms apart, queued behind each other.
  t.deepEqual([bucket.reserve(), bucket.reserve()].map(Math.round), [100, 200]);
  // Time passes past all reservations and refills, never beyond the burst.
  now = 10_000;
  t.deepEqual([bucket.reserve(), bucket.reserve(), bucket.reserve(), bucket.reserve()].map(Math.round), [0, 0, 0, 100]);
});

test('a bad limit is refused with the value named', (t) => {
  t.throws(() => new TokenBucket({ qps: 0, burst: 1 }), { message: /qps must be a positive number, got 0/ });
  t.throws(() => new TokenBucket({ qps: 5, burst: 0.5 }), { message: /burst must be a positive integer, got 0.5/ });
});

test('a wait cancelled by its signal rejects and gives its token back', async (t) => {
  const bucket = new TokenBucket({ qps: 1, burst: 1 });
  await bucket.wait();
  const ac = new AbortController();
  const waiting = bucket.wait(ac.signal);
  ac.abort(new Error('term ended'));
  await t.throwsAsync(waiting, { message: 'term ended' });
});

test('the REST client sends no faster than QPS after the burst, all its copies sharing one bucket', async (t) => {
  const arrivals: number[] = [];
  const server = createServer((_req, res) => {
    arrivals.push(performance.now());
    res.setHeader('Content-Type', 'application/json');
    res.end('{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const unlimited = new RestClient(tokenAccess(url, 't'));
  // Unlimited first, to know what this (possibly loaded) machine takes without the limit.
  let t0 = performance.now();
  await Promise.all(Array.from({ length: 25 }, (_, i) => unlimited.request('GET', `/warm/${i}`)));
  const unlimitedMs = performance.now() - t0;
  arrivals.length = 0;
  const base = unlimited.with({ rateLimiter: new TokenBucket({ qps: 10, burst: 5 }) });
  // Two "workers", each with its own copy of the client (as each leader term gets one).
  const a = base.with({});
  const b = base.with({});
  const started = (t0 = performance.now());
  await Promise.all(Array.from({ length: 25 }, (_, i) => (i % 2 ? a : b).request('GET', `/x/${i}`)));
  const elapsed = performance.now() - t0;
  t.is(arrivals.length, 25);
  // 5 at once, then 20 more at 10/s: the last reaches the server no sooner than 2 s after the start
  // (a lower bound: a loaded machine only adds to it).
  const last = Math.max(...arrivals) - started;
  t.true(last >= 1950, `the 25th request reached the server ${last.toFixed(0)} ms after the start (${unlimitedMs.toFixed(0)} ms for 25 without the limit)`);
  t.log(`25 requests: ${elapsed.toFixed(0)} ms at qps 10 burst 5, ${unlimitedMs.toFixed(0)} ms without a limit`);
  base.close();
});
