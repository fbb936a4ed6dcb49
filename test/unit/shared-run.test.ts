// lib/runtime/shared-run.ts: callers arriving together share one run of the probe, and no caller gets
// the result of a run that started before it asked.
import test from 'ava';
import { SharedRun } from '../../lib/runtime/shared-run.ts';

/** A probe whose runs end when the test says, each answering with its own number. */
function controlled() {
  const runs: { n: number; end: () => void; fail: (e: Error) => void }[] = [];
  const probe = () =>
    new Promise<number>((resolve, reject) => {
      const n = runs.length + 1;
      runs.push({ n, end: () => resolve(n), fail: reject });
    });
  return { runs, probe };
}

const tick = () => new Promise<void>((r) => setImmediate(r));

test('the first caller starts a run at once; callers arriving while it runs share the next run, started once it ends', async (t) => {
  const { runs, probe } = controlled();
  const s = new SharedRun(probe);
  const first = s.get();
  t.is(runs.length, 1);
  // Asked after the run started, even in the same tick: what they must see may postdate its start.
  const sameTick = s.get();
  await tick();
  const later = s.get();
  t.is(runs.length, 1, 'no second run while the first is under way');
  runs[0]!.end();
  t.is(await first, 1);
  await tick();
  t.is(runs.length, 2, 'one run for every caller that waited');
  const duringSecond = s.get();
  runs[1]!.end();
  t.deepEqual(await Promise.all([sameTick, later]), [2, 2]);
  await tick();
  t.is(runs.length, 3, 'a caller arriving during the second run gets a third');
  runs[2]!.end();
  t.is(await duringSecond, 3);
});

test('a failed run fails its callers, and the callers waiting for the next one get a run of their own', async (t) => {
  const { runs, probe } = controlled();
  const s = new SharedRun(probe);
  const first = s.get();
  await tick();
  const next = s.get();
  runs[0]!.fail(new Error('losetup failed'));
  await t.throwsAsync(first, { message: 'losetup failed' });
  await tick();
  t.is(runs.length, 2);
  runs[1]!.end();
  t.is(await next, 2);
});

test('once every run has settled, the next caller starts a new run: nothing is kept', async (t) => {
  const { runs, probe } = controlled();
  const s = new SharedRun(probe);
  const a = s.get();
  runs[0]!.end();
  t.is(await a, 1);
  await tick();
  const b = s.get();
  t.is(runs.length, 2);
  runs[1]!.end();
  t.is(await b, 2);
});
