// The krew executable's code cache (plugin/sea-main.ts, plugin/code-cache.ts, docs/adr/0027): the real
// single executable `npm run release` builds for this machine, run with a temp XDG_CACHE_HOME against the
// real API server. The first run writes the cache, the next ones use it, and whatever happens to the
// cache (damaged, rejected by V8, unwritable, absent) the plugin prints the same and nothing on stderr.
import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { release } from '../../hack/release/release.ts';
import type { Built } from '../../hack/release/manifest.ts';
import { PLATFORMS } from '../../hack/release/platforms.ts';
import { seed } from '../fixtures/parity-seeds.ts';
import { execResult, type ExecResult } from '../harness/exec.ts';
import { useControlPlane } from './_controlplane.ts';

const run = promisify(execFile);
const controlPlane = useControlPlane(test);
const host = PLATFORMS.find((p) => p.id === 'linux-amd64')!;
let work = '';
let exe = '';
let built: Built | undefined;
/** What the plugin prints without any cache: every run below must print the same. */
let expected: { yaml: string; names: string } = { yaml: '', names: '' };
let homes = 0;

const CACHE_FILE = /^code-[0-9a-f]{16}-nodev24\.\d+\.\d+-x64-[0-9a-f]{8}\.v8cache$/;

/** The single executable with only these variables of its own (no NODE_OPTIONS, NODE_DEBUG from the test's environment). */
function sea(args: string[], env: NodeJS.ProcessEnv): Promise<ExecResult> {
  return execResult(exe, args, { env: { KUBECONFIG: controlPlane().admin().kubeconfig, NODE_OPTIONS: '', NODE_DEBUG: '', NODE_DISABLE_COMPILE_CACHE: '', ...env } });
}
/** A fresh XDG_CACHE_HOME. */
function newHome(): string {
  const home = join(work, `home-${homes++}`);
  mkdirSync(home);
  return home;
}
const cacheDir = (home: string) => join(home, 'kubectl-nodedisks');
function cacheFiles(home: string): string[] {
  try {
    return readdirSync(cacheDir(home));
  } catch {
    return [];
  }
}
/** The one cache file in `home` (the test fails if there is not exactly one). */
function theCacheFile(t: { is: (a: unknown, b: unknown, m?: string) => void }, home: string): string {
  const files = cacheFiles(home);
  t.is(files.length, 1, `one cache file, found: ${files.join(', ')}`);
  return join(cacheDir(home), files[0] ?? 'none');
}

/** Runs `list -o yaml` and `list -o name` and checks they print what the plugin prints without a cache. */
async function printsTheSame(t: { is: (a: unknown, b: unknown, m?: string) => void }, env: NodeJS.ProcessEnv, what: string): Promise<void> {
  const yaml = await sea(['list', '-o', 'yaml'], env);
  t.is(yaml.code, 0, `${what}: exit code (stderr: ${yaml.stderr})`);
  t.is(yaml.stderr, '', `${what}: nothing on stderr`);
  t.is(yaml.stdout, expected.yaml, `${what}: list -o yaml`);
  const names = await sea(['list', '-o', 'name'], env);
  t.is(names.stderr, '', `${what}: nothing on stderr`);
  t.is(names.stdout, expected.names, `${what}: list -o name`);
}

test.serial.before(async (t) => {
  t.timeout(15 * 60_000, 'building the release took more than 15 minutes');
  work = await mkdtemp(join(tmpdir(), 'nodedisks-sea-cache-'));
  [built] = await release({ platforms: [host], out: join(work, 'release'), manifest: join(work, 'krew-manifest.yaml'), log: () => {} });
  await run('tar', ['xzf', built!.archive, '-C', work, 'kubectl-nodedisks']);
  exe = join(work, 'kubectl-nodedisks');
  await seed(controlPlane());
  const off = { XDG_CACHE_HOME: newHome(), NODE_DISABLE_COMPILE_CACHE: '1' };
  const [yaml, names] = [await sea(['list', '-o', 'yaml'], off), await sea(['list', '-o', 'name'], off)];
  if (yaml.code !== 0 || yaml.stderr || names.code !== 0) throw new Error(`the plugin without a cache failed: ${yaml.stderr}${names.stderr}`);
  expected = { yaml: yaml.stdout, names: names.stdout };
  if (!/^nodedisk\.localtest\.example\.com\/node-disk-node-a-disk1$/m.test(names.stdout)) throw new Error(`unexpected list -o name: ${names.stdout}`);
});
test.after.always(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

test.serial('the first run writes the code cache, the next runs use it, each command adds to it once, and nothing is printed', async (t) => {
  const home = newHome();
  await printsTheSame(t, { XDG_CACHE_HOME: home }, 'first run');
  const file = theCacheFile(t, home);
  t.regex(file.split('/').pop()!, CACHE_FILE);
  t.is(statSync(cacheDir(home)).mode & 0o777, 0o700);
  const made = readFileSync(file);

  const debug = { XDG_CACHE_HOME: home, NODE_DEBUG: 'nodedisks' };
  const second = await sea(['list', '-o', 'name'], debug);
  t.is(second.stdout, expected.names);
  t.regex(second.stderr, /code cache \S+: accepted \(made by: list\)\n/);
  t.notRegex(second.stderr, /written/, 'a command that made the cache does not write it again');
  t.deepEqual(readFileSync(file), made);

  // Another command compiles other functions: its first run adds them (the file grows), once.
  const status = await sea(['status'], debug);
  t.is(status.code, 0, status.stderr);
  t.regex(status.stderr, /accepted \(made by: list\)\n[\s\S]*: written\n/);
  t.true(readFileSync(file).length > made.length, 'the cache grew with the functions status compiled');
  const again = await sea(['status'], debug);
  t.regex(again.stderr, /accepted \(made by: list, status\)\n/);
  t.notRegex(again.stderr, /written/);
  await printsTheSame(t, { XDG_CACHE_HOME: home }, 'with the cache');
  t.deepEqual(cacheFiles(home), [file.split('/').pop()], 'still one file');
});

test.serial('a damaged cache, or one V8 rejects, changes nothing the plugin prints and is written anew', async (t) => {
  const home = newHome();
  await sea(['list', '-o', 'name'], { XDG_CACHE_HOME: home });
  const file = theCacheFile(t, home);
  const good = readFileSync(file);
  // A cache V8 rejects though its file is whole: made under other V8 flags (NODE_OPTIONS), which name
  // another file; copied over this one.
  const flagsHome = newHome();
  await sea(['list', '-o', 'name'], { XDG_CACHE_HOME: flagsHome, NODE_OPTIONS: '--stack-trace-limit=50' });
  const otherFlags = readFileSync(theCacheFile(t, flagsHome));

  const flipped = (offsets: number[]) => {
    const b = Buffer.from(good);
    for (const at of offsets) b[at]! ^= 0xa5;
    return b;
  };
  const damages: [string, Buffer, RegExp][] = [
    // V8 checks the header of its code cache but not the rest: these flips, handed to V8, crash the process.
    ['bytes flipped in the code', flipped([good.length >> 1, (good.length >> 1) + 1, good.length - 8]), /none or damaged/],
    ['bytes flipped near the start', flipped([30, 31]), /none or damaged/],
    ['truncated', good.subarray(0, good.length >> 1), /none or damaged/],
    ['empty', Buffer.alloc(0), /none or damaged/],
    ['not a cache', Buffer.from('#!/bin/sh\necho hello\n'), /none or damaged/],
    ['made under other V8 flags', otherFlags, /rejected by V8/],
  ];
  for (const [what, bytes, said] of damages) {
    writeFileSync(file, bytes);
    const debugged = await sea(['list', '-o', 'name'], { XDG_CACHE_HOME: home, NODE_DEBUG: 'nodedisks' });
    t.is(debugged.code, 0, `${what}: exit code (stderr: ${debugged.stderr})`);
    t.is(debugged.stdout, expected.names, what);
    t.regex(debugged.stderr, said, what);
    t.regex(debugged.stderr, /: written\n/, `${what}: written anew`);
    writeFileSync(file, bytes);
    await printsTheSame(t, { XDG_CACHE_HOME: home }, what);
    const next = await sea(['list', '-o', 'name'], { XDG_CACHE_HOME: home, NODE_DEBUG: 'nodedisks' });
    t.regex(next.stderr, /: accepted /, `${what}: the rewritten cache is used`);
  }
});

test.serial('an unwritable or absent cache directory is harmless: same output, nothing on stderr', async (t) => {
  // XDG_CACHE_HOME names a file: the directory cannot be made.
  const notADir = join(work, 'a-file');
  writeFileSync(notADir, 'x');
  await printsTheSame(t, { XDG_CACHE_HOME: notADir }, 'XDG_CACHE_HOME is a file');
  const said = await sea(['version'], { XDG_CACHE_HOME: notADir, NODE_DEBUG: 'nodedisks' });
  t.regex(said.stderr, /not written: /);

  // The cache file's name is taken by a directory: it can be neither read nor replaced.
  const home = newHome();
  await sea(['version'], { XDG_CACHE_HOME: home });
  const file = theCacheFile(t, home);
  await rm(file);
  mkdirSync(file);
  await printsTheSame(t, { XDG_CACHE_HOME: home }, 'a directory where the cache file goes');
  t.deepEqual(readdirSync(cacheDir(home)), [file.split('/').pop()], 'no temp file left behind');

  // No cache at all: switched off, or nowhere to put it.
  const off = newHome();
  await printsTheSame(t, { XDG_CACHE_HOME: off, NODE_DISABLE_COMPILE_CACHE: '1' }, 'NODE_DISABLE_COMPILE_CACHE');
  t.deepEqual(cacheFiles(off), []);
  await printsTheSame(t, { XDG_CACHE_HOME: '', HOME: '' }, 'no HOME');
});

test.serial('a cache directory others may write is neither loaded nor written, and the plugin prints the same', async (t) => {
  const home = newHome();
  await sea(['version'], { XDG_CACHE_HOME: home });
  const file = theCacheFile(t, home);
  const before = readFileSync(file);
  // Group- and world-writable, as a shared directory or a sudo'ed HOME of someone else would be to us.
  chmodSync(cacheDir(home), 0o777);
  const said = await sea(['list', '-o', 'name'], { XDG_CACHE_HOME: home, NODE_DEBUG: 'nodedisks' });
  t.is(said.code, 0, said.stderr);
  t.regex(said.stderr, /code cache .*: none or damaged, or not this user's alone/);
  t.regex(said.stderr, /not written: not a cache directory of this user alone: .*kubectl-nodedisks is writable by its group or others \(mode 777\)/);
  await printsTheSame(t, { XDG_CACHE_HOME: home }, 'a world-writable cache directory');
  t.deepEqual(readFileSync(file), before, 'the cache there was not rewritten');
  t.deepEqual(readdirSync(cacheDir(home)), [file.split('/').pop()], 'no temp file left behind');
});

test.serial('a start without an exec credential plugin loads neither node:child_process nor, for version, TLS', async (t) => {
  // A --require'd file reports the builtins Node loaded, at exit.
  const hook = join(work, 'modules.cjs');
  writeFileSync(hook, "process.on('exit', () => process.stderr.write(JSON.stringify(process.moduleLoadList.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice(13)))));\n");
  const loaded = async (args: string[]) => {
    const r = await sea(args, { XDG_CACHE_HOME: newHome(), NODE_OPTIONS: `--require ${hook}` });
    t.is(r.code, 0, r.stderr);
    return JSON.parse(r.stderr) as string[];
  };
  const version = await loaded(['version']);
  t.true(version.includes('vm'), 'the report works: the executable compiles the plugin with node:vm');
  // (node:net itself is loaded all the same: stdout is a pipe here, and Node writes pipes through net.)
  for (const m of ['child_process', 'dgram', 'tls', 'https']) t.false(version.includes(m), `version loads ${m}`);
  const list = await loaded(['list', '-o', 'name']);
  t.true(list.includes('https'), 'list talks TLS');
  t.false(list.includes('child_process'), 'list loads child_process');
});

test.serial('two builds of the release give the same archive, byte for byte', async (t) => {
  t.timeout(15 * 60_000, 'building the release took more than 15 minutes');
  // Another directory: nothing of where it was built may end up in the archive.
  const [again] = await release({ platforms: [host], out: join(work, 'elsewhere', 'release'), manifest: join(work, 'elsewhere', 'krew-manifest.yaml'), log: () => {} });
  t.is(again!.sha256, built!.sha256);
});
