import test from 'ava';
import { WorkQueue } from '../../controller/queue.ts';

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

test('a key added while it is processed comes back after done, never concurrently', async (t) => {
  const q = new WorkQueue();
  q.add('a');
  const k = await q.get();
  q.add('a');
  t.is(q.length, 0, 'not handed to a second worker while processing');
  q.done(k!);
  t.is(q.length, 1);
  t.is(await q.get(), 'a');
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
  q.forget('a');
  t.is(q.addRateLimited('a'), 100);
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
