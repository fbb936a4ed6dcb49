import test from 'ava';
// lib/kube/workqueue.ts: one test per property the agent and the controller rely on.
import { WorkQueue } from '../../lib/kube/workqueue.ts';

test('a key added twice while waiting is handed out once', async (t) => {
  const q = new WorkQueue();
  q.add('a');
  q.add('a');
  q.add('b');
  t.is(q.length, 2);
  t.is(await q.get(), 'a');
  t.is(await q.get(), 'b');
  q.shutDown();
});

test('a key added while it is processed comes back once after done, never concurrently', async (t) => {
  const q = new WorkQueue();
  q.add('a');
  const k = await q.get();
  q.add('a');
  q.add('a', 'sweep');
  q.add('a');
  t.is(q.length, 0, 'not handed to a second worker while processing');
  q.done(k!);
  t.is(q.length, 1, 'queued again once, however many adds came meanwhile');
  t.is(await q.get(), 'a');
  q.done('a');
  t.is(q.length, 0);
  q.shutDown();
});

test('a key that something happens to while it is processed comes back ahead of the sweep', async (t) => {
  const q = new WorkQueue();
  q.add('a');
  const k = await q.get();
  q.add('a', 'sweep');
  q.add('a'); // an event after the sweep asked: the event's priority wins
  q.add('s1', 'sweep');
  q.done(k!);
  t.is(await q.get(), 'a');
  t.is(await q.get(), 's1');
  q.shutDown();
});

test('keys something happened to come out before swept keys, each tier first in, first out', async (t) => {
  const q = new WorkQueue();
  q.add('s1', 'sweep');
  q.add('s2', 'sweep');
  q.add('e1');
  q.add('e2', 'event');
  q.add('s3', 'sweep');
  const got: (string | undefined)[] = [];
  for (let i = 0; i < 5; i++) got.push(await q.get());
  t.deepEqual(got, ['e1', 'e2', 's1', 's2', 's3']);
  q.shutDown();
});

test('a swept key that something happens to moves up, once, and a sweep never moves an event down', async (t) => {
  const q = new WorkQueue();
  q.add('s1', 'sweep');
  q.add('s2', 'sweep');
  q.add('e1');
  q.add('s2'); // moves up behind e1
  q.add('e1', 'sweep'); // stays an event
  t.is(q.length, 3);
  const got: (string | undefined)[] = [];
  for (let i = 0; i < 3; i++) got.push(await q.get());
  t.deepEqual(got, ['e1', 's2', 's1']);
  t.is(q.length, 0, 'the moved-up key left no second entry behind');
  q.add('s3', 'sweep');
  t.is(await q.get(), 's3');
  q.shutDown();
});

test('failures back off exponentially per item and success forgets them', (t) => {
  const q = new WorkQueue({ baseDelayMs: 100, maxDelayMs: 1000 });
  t.is(q.addRateLimited('a'), 100);
  t.is(q.addRateLimited('a'), 200);
  t.is(q.addRateLimited('a'), 400);
  t.is(q.addRateLimited('a'), 800);
  t.is(q.addRateLimited('a'), 1000, 'capped');
  t.is(q.addRateLimited('b'), 100, 'per item');
  t.is(q.retries('a'), 5);
  q.forget('a');
  t.is(q.retries('a'), 0);
  t.is(q.addRateLimited('a'), 100);
  q.shutDown();
});

test('backoff with jitter stays between the delay and the delay plus its jitter, the cap included', (t) => {
  const q = new WorkQueue({ baseDelayMs: 500, maxDelayMs: 4000, jitter: 0.2 });
  for (const base of [500, 1000, 2000, 4000, 4000]) {
    const delay = q.addRateLimited('a');
    t.true(delay >= base && delay <= base * 1.2, `${delay} not in [${base}, ${base * 1.2}]`);
  }
  q.shutDown();
});

test('a retry comes back as something that happened, ahead of the sweep', async (t) => {
  const q = new WorkQueue({ baseDelayMs: 1, maxDelayMs: 1 });
  q.add('a');
  const k = (await q.get())!;
  for (let i = 0; i < 100; i++) q.add(`s${i}`, 'sweep');
  q.addRateLimited(k);
  q.done(k);
  // Wait for the retry's timer to queue it (a condition, not a fixed sleep).
  while (q.length < 101) await new Promise((r) => setTimeout(r, 1));
  t.is(await q.get(), 'a');
  t.is(await q.get(), 's0');
  q.shutDown();
});

test('addAfter delivers later, and shutDown releases waiting workers', async (t) => {
  const q = new WorkQueue();
  const started = Date.now();
  q.addAfter('x', 50);
  t.is(await q.get(), 'x');
  t.true(Date.now() - started >= 45);
  const waiting = q.get();
  q.shutDown();
  t.is(await waiting, undefined);
});

test("addAfter keeps the sooner of two schedules for a key, as client-go's delaying queue does", async (t) => {
  const q = new WorkQueue();
  const within = (ms: number) => Promise.race([q.get(), new Promise<string>((r) => setTimeout(() => r(`nothing within ${ms} ms`), ms))]);
  // A later look asked first, a sooner one second: the sooner one is kept.
  q.addAfter('x', 10 * 60_000);
  q.addAfter('x', 20);
  t.is(await within(5_000), 'x');
  q.done('x');
  // A sooner look asked first, a later one second: the later one does not push it back.
  q.addAfter('y', 20);
  q.addAfter('y', 10 * 60_000);
  t.is(await within(5_000), 'y');
  q.shutDown();
});

test('with many workers, the same key is never processed by two at once, and a key added during its processing is processed again', async (t) => {
  const q = new WorkQueue();
  const inFlight = new Set<string>();
  const overlaps: string[] = [];
  // For each key: adds made while it was being processed, and whether a later processing followed.
  const addedWhileProcessing = new Map<string, number>();
  const processedAfterAdd = new Map<string, number>();
  let processed = 0;
  const worker = async () => {
    for (let key = await q.get(); key !== undefined; key = await q.get()) {
      if (inFlight.has(key)) overlaps.push(key);
      inFlight.add(key);
      if ((addedWhileProcessing.get(key) ?? 0) > 0) processedAfterAdd.set(key, (processedAfterAdd.get(key) ?? 0) + 1);
      addedWhileProcessing.set(key, 0);
      await new Promise((r) => setTimeout(r, Math.random() * 3));
      inFlight.delete(key);
      processed++;
      q.done(key);
    }
  };
  const workers = Array.from({ length: 8 }, worker);
  const keys = ['a', 'b', 'c'];
  for (let i = 0; i < 300; i++) {
    const key = keys[i % keys.length]!;
    if (inFlight.has(key)) addedWhileProcessing.set(key, (addedWhileProcessing.get(key) ?? 0) + 1);
    q.add(key);
    if (i % 5 === 0) await new Promise((r) => setTimeout(r, 1));
  }
  // Let the queue drain, then stop the workers.
  const deadline = Date.now() + 30_000;
  while ((q.length > 0 || inFlight.size > 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  q.shutDown();
  await Promise.all(workers);
  t.deepEqual(overlaps, [], 'a key was handed to a second worker while the first still had it');
  t.true(processed >= keys.length);
  for (const key of keys) t.is(addedWhileProcessing.get(key), 0, `an add of ${key} during its processing was not followed by another processing`);
});

test('keys come out first in, first out through 10,000 adds and gets interleaved, and the length counts only what waits', async (t) => {
  // Enough keys for the queue to drop what it has read more than once along the way (every 1,024+ gets).
  const q = new WorkQueue();
  const added: string[] = [];
  const got: string[] = [];
  for (let i = 0; i < 4000; i++) added.push(`a${i}`), q.add(`a${i}`);
  for (let i = 0; i < 7000; i++) {
    const key = (await q.get())!;
    got.push(key);
    q.done(key);
    if (i % 2 === 0) added.push(`b${i}`), q.add(`b${i}`);
    t.is(q.length, added.length - got.length);
  }
  while (q.length > 0) got.push((await q.get())!);
  t.deepEqual(got, added);
});
