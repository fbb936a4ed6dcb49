import test from 'ava';
import { TickBatch } from '../../lib/runtime/tick-batch.ts';

const nextTurn = () => new Promise((r) => setImmediate(r));

test('keys added in one turn are handed over once, together and without repeats; a later add starts a new batch', async (t) => {
  const flushed: string[][] = [];
  const b = new TickBatch<string>((keys) => flushed.push([...keys]));
  b.add('node-a');
  b.add('node-b');
  b.add('node-a');
  t.deepEqual(flushed, [], 'nothing before the next turn');
  await nextTurn();
  t.deepEqual(flushed, [['node-a', 'node-b']]);
  b.add('node-c');
  await nextTurn();
  t.deepEqual(flushed, [['node-a', 'node-b'], ['node-c']]);
});
