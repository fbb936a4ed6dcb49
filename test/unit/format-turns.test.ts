// mkfs runs take turns: no more than --formats-at-once run at once, and the others start in the order
// they were asked, each as soon as one before it ends. A stand-in mkfs (a real process on PATH) writes
// when it starts and ends only when the test lets that run go, one at a time, so each start the queue
// makes is seen alone and the count is exact, not timed.
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { format, setFormatsAtOnce } from '../../csi/node-devices.ts';

async function until(what: string, ok: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('at most N mkfs runs at once; the rest start first asked first run, as each one ends', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'nodedisks-formats-'));
  const devices = ['d1', 'd2', 'd3', 'd4', 'd5', 'd6'];
  let runs: Promise<void>[] = [];
  const log = join(dir, 'log');
  const letGo = (device: string) => writeFile(join(dir, `go-${device}`), '');
  // A failed check must not leave the stand-ins waiting: they end once let go or once the dir is gone.
  t.teardown(async () => {
    await Promise.all(devices.map((d) => letGo(d).catch(() => undefined)));
    await Promise.allSettled(runs);
    await rm(dir, { recursive: true, force: true });
  });
  await writeFile(join(dir, 'mkfs.turns'), `#!/bin/sh\necho "start $3" >> ${log}\nwhile [ ! -e ${dir}/go-$3 ] && [ -d ${dir} ]; do sleep 0.05; done\necho "end $3" >> ${log}\n`, {
    mode: 0o755,
  });
  process.env.PATH = `${dir}:${process.env.PATH}`;
  const lines = async () => (existsSync(log) ? (await readFile(log, 'utf8')).trim().split('\n') : []);
  const started = async () => (await lines()).filter((l) => l.startsWith('start '));

  setFormatsAtOnce(2);
  runs = devices.map((d) => format('turns', d));
  await until('two runs started', async () => (await started()).length === 2);
  // Nothing ends until it is let go, so a third start now would be past the bound.
  await new Promise((r) => setTimeout(r, 300));
  t.deepEqual(await started(), ['start d1', 'start d2']);

  // Each run let go frees one place, which the next run asked takes.
  for (const [i, d] of devices.entries()) {
    await letGo(d);
    const want = devices.slice(0, Math.min(i + 3, devices.length)).map((x) => `start ${x}`);
    await until(`${want.at(-1)} after ${d} ended`, async () => (await started()).length === want.length);
    t.deepEqual(await started(), want);
  }
  await Promise.all(runs);
  let running = 0;
  let most = 0;
  for (const l of await lines()) {
    running += l.startsWith('start ') ? 1 : -1;
    most = Math.max(most, running);
  }
  t.is(most, 2);
});
