// mkfs runs take turns: no more than --formats-at-once run at once, and the others start in the order
// they were asked, each as soon as one before it ends. A stand-in mkfs (a real process on PATH) writes
// when it starts and waits for the test's word before it ends, so the count is exact, not timed.
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
  let runs: Promise<void>[] = [];
  const log = join(dir, 'log');
  const go = join(dir, 'go');
  // A failed check must not leave the stand-ins waiting: they end once the word is given or the dir is gone.
  t.teardown(async () => {
    await writeFile(go, '').catch(() => undefined);
    await Promise.allSettled(runs);
    await rm(dir, { recursive: true, force: true });
  });
  await writeFile(join(dir, 'mkfs.turns'), `#!/bin/sh\necho "start $3" >> ${log}\nwhile [ ! -e ${go} ] && [ -d ${dir} ]; do sleep 0.05; done\necho "end $3" >> ${log}\n`, { mode: 0o755 });
  process.env.PATH = `${dir}:${process.env.PATH}`;
  const lines = async () => (existsSync(log) ? (await readFile(log, 'utf8')).trim().split('\n') : []);
  const started = async () => (await lines()).filter((l) => l.startsWith('start '));

  setFormatsAtOnce(2);
  const devices = ['d1', 'd2', 'd3', 'd4', 'd5', 'd6'];
  runs = devices.map((d) => format('turns', d));
  await until('two runs started', async () => (await started()).length === 2);
  // Nothing ends while the word is not given, so a third start now would be past the bound.
  await new Promise((r) => setTimeout(r, 300));
  t.deepEqual(await started(), ['start d1', 'start d2']);

  await writeFile(go, '');
  await Promise.all(runs);
  const all = await lines();
  t.deepEqual(
    all.filter((l) => l.startsWith('start ')),
    devices.map((d) => `start ${d}`),
  );
  let running = 0;
  let most = 0;
  for (const l of all) {
    running += l.startsWith('start ') ? 1 : -1;
    most = Math.max(most, running);
  }
  t.is(most, 2);
});
