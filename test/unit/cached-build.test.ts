// A binary built once into a cache entry (hack/lib/cached-build.ts): two builders at once build it once
// (the second waits for the first's lock, then finds the entry), a lock left by a process that is gone is
// taken over, and a failed build leaves neither an entry, a temp dir nor a lock behind.
import { chmod, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { ensureCachedBuild } from '../../hack/lib/cached-build.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function work(t: import('ava').ExecutionContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'nodedisks-cached-build-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A build that takes `ms` and writes an executable script; counts its runs. */
function slowBuild(ms: number) {
  const runs = { n: 0 };
  const build = async (out: string) => {
    runs.n++;
    await sleep(ms);
    await writeFile(out, '#!/bin/sh\necho built\n');
    await chmod(out, 0o755);
  };
  return { runs, build };
}

test('two builders of one entry at once: one builds, the other waits for its lock and finds the binary', async (t) => {
  const w = await work(t);
  const { runs, build } = slowBuild(1500);
  const lines: string[] = [];
  const b = { what: 'a tool v1', takes: 'a moment', dir: join(w, 'tool-v1'), name: 'tool', build, log: (l: string) => lines.push(l) };
  const [first, second] = await Promise.all([ensureCachedBuild(b), sleep(100).then(() => ensureCachedBuild(b))]);
  t.is(runs.n, 1, lines.join('\n'));
  t.is(first, join(w, 'tool-v1', 'tool'));
  t.is(second, first);
  t.true(
    lines.some((l) => l.startsWith(`waiting for process ${process.pid}, which is building a tool v1`)),
    lines.join('\n'),
  );
  t.deepEqual(await readdir(w), ['tool-v1'], 'no lock or temp dir left beside the entry');
  // Cached afterwards: no build at all.
  t.is(await ensureCachedBuild(b), first);
  t.is(runs.n, 1);
});

test('a lock left by a process that is gone is taken over', async (t) => {
  const w = await work(t);
  const gone = spawnSync('true').pid;
  await writeFile(join(w, 'tool-v1.lock'), `${gone} 12345\n`);
  const { runs, build } = slowBuild(10);
  const path = await ensureCachedBuild({ what: 'a tool v1', takes: 'a moment', dir: join(w, 'tool-v1'), name: 'tool', build, log: () => {} });
  t.is(runs.n, 1);
  t.is(path, join(w, 'tool-v1', 'tool'));
  t.deepEqual(await readdir(w), ['tool-v1']);
});

test('a failed build throws its reason and leaves no entry, temp dir or lock', async (t) => {
  const w = await work(t);
  const b = {
    what: 'a tool v1',
    takes: 'a moment',
    dir: join(w, 'tool-v1'),
    name: 'tool',
    log: () => {},
    build: async () => {
      throw new Error('building a tool v1 failed: go build: undefined: x');
    },
  };
  await t.throwsAsync(ensureCachedBuild(b), { message: 'building a tool v1 failed: go build: undefined: x' });
  t.deepEqual(await readdir(w), []);
  const wroteNothing = { ...b, build: async () => {} };
  await t.throwsAsync(ensureCachedBuild(wroteNothing), { message: 'building a tool v1 wrote no executable tool' });
  t.deepEqual(await readdir(w), []);
});
