// The single executable's code cache file (plugin/code-cache.ts): where it lives, what it is named by,
// that a damaged file never reaches V8, that writes are whole, and when a run rewrites it. The real
// executable with it: test/integration/sea-code-cache.test.ts.
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import test from 'ava';
import { codeCacheDir, codeCacheFile, codeCacheName, commandKey, hash64, MAX_COMMANDS, readCodeCache, shouldWrite, STALE_MS, untrustedDir, writeCodeCache } from '../../plugin/code-cache.ts';

const tmp = () => mkdtempSync(join(tmpdir(), 'nodedisks-code-cache-'));

/** hash64 as its comment defines it, in plain JavaScript with BigInt: the WebAssembly must agree. */
function reference(data: Uint8Array): bigint {
  const mask = (1n << 64n) - 1n;
  const step = (h: bigint, v: bigint) => {
    const m = ((h ^ v) * 0x100000001b3n) & mask;
    return ((m << 31n) | (m >> 33n)) & mask;
  };
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let h = 0xcbf29ce484222325n;
  let i = 0;
  for (; i + 8 <= data.length; i += 8) h = step(h, view.getBigUint64(i, true));
  for (; i < data.length; i++) h = step(h, BigInt(data[i]!));
  return h;
}

test('the cache lives in XDG_CACHE_HOME, else the platform cache directory, and NODE_DISABLE_COMPILE_CACHE turns it off', (t) => {
  t.is(codeCacheDir({ HOME: '/home/a' }, 'linux'), '/home/a/.cache/kubectl-nodedisks');
  t.is(codeCacheDir({ HOME: '/home/a', XDG_CACHE_HOME: '/x/cache' }, 'linux'), '/x/cache/kubectl-nodedisks');
  t.is(codeCacheDir({ HOME: '/home/a', XDG_CACHE_HOME: 'relative/cache' }, 'linux'), '/home/a/.cache/kubectl-nodedisks', 'a relative XDG_CACHE_HOME is ignored, as the spec says');
  t.is(codeCacheDir({ HOME: '/Users/a' }, 'darwin'), '/Users/a/Library/Caches/kubectl-nodedisks');
  t.is(codeCacheDir({ USERPROFILE: 'C:\\Users\\a', LOCALAPPDATA: 'C:\\Users\\a\\AppData\\Local' }, 'win32'), 'C:\\Users\\a\\AppData\\Local\\kubectl-nodedisks\\cache');
  t.is(codeCacheDir({}, 'linux'), undefined, 'no HOME: no cache');
  t.is(codeCacheDir({}, 'win32'), undefined, 'no LOCALAPPDATA: no cache');
  t.is(codeCacheDir({ HOME: '/home/a', NODE_DISABLE_COMPILE_CACHE: '1' }, 'linux'), undefined);
  t.is(codeCacheFile('ab'.repeat(32), { env: {}, platform: 'linux', version: 'v24.21.0', arch: 'x64' }), undefined);
});

test('the file name changes with the plugin code, the Node version, the CPU and NODE_OPTIONS', (t) => {
  const sha = 'f'.repeat(64);
  const base = codeCacheName(sha, 'v24.21.0', 'x64', undefined);
  t.regex(base, /^code-f{16}-nodev24\.21\.0-x64-[0-9a-f]{8}\.v8cache$/);
  t.not(codeCacheName('e'.repeat(64), 'v24.21.0', 'x64', undefined), base);
  t.not(codeCacheName(sha, 'v24.18.1', 'x64', undefined), base);
  t.not(codeCacheName(sha, 'v24.21.0', 'arm64', undefined), base);
  t.not(codeCacheName(sha, 'v24.21.0', 'x64', '--stack-trace-limit=50'), base);
  t.is(codeCacheName(sha, 'v24.21.0', 'x64', ''), base, 'an empty NODE_OPTIONS is no NODE_OPTIONS');
});

test('hash64 (WebAssembly) computes what its text format says, and any one changed byte changes it', (t) => {
  for (const n of [0, 1, 7, 8, 9, 63, 1000, 65536, 65537, 200_003]) {
    const data = Buffer.alloc(n);
    for (let i = 0; i < n; i++) data[i] = (i * 131 + 7) & 0xff;
    t.is(hash64(data), reference(data), `${n} bytes`);
  }
  const data = Buffer.from(readFileSync(new URL(import.meta.url)));
  const h = hash64(data);
  for (const at of [0, 1, 8, 100, data.length - 1]) {
    for (const bit of [0x01, 0x80]) {
      data[at]! ^= bit;
      t.not(hash64(data), h, `bit ${bit} of byte ${at}`);
      data[at]! ^= bit;
    }
  }
});

test('a written cache reads back; a damaged, truncated, foreign or missing file reads as no cache', (t) => {
  const dir = tmp();
  try {
    const file = join(dir, 'sub', 'code-x.v8cache');
    const payload = Buffer.from(Array.from({ length: 5000 }, (_, i) => i & 0xff));
    t.is(writeCodeCache(file, { payload, commands: ['version', 'list'] }), undefined);
    t.deepEqual(readCodeCache(file), { payload, commands: ['version', 'list'] });
    const whole = readFileSync(file);
    for (const at of [0, 9, 17, 20, whole.length - 1]) {
      const bad = Buffer.from(whole);
      bad[at]! ^= 0x10;
      writeFileSync(file, bad);
      t.is(readCodeCache(file), undefined, `byte ${at} changed`);
    }
    writeFileSync(file, whole.subarray(0, whole.length - 100));
    t.is(readCodeCache(file), undefined, 'truncated');
    writeFileSync(file, 'not a cache at all');
    t.is(readCodeCache(file), undefined, 'foreign');
    t.is(readCodeCache(join(dir, 'missing')), undefined);
    mkdirSync(join(dir, 'a-directory'));
    t.is(readCodeCache(join(dir, 'a-directory')), undefined);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an unwritable cache directory is an error returned, not thrown, and leaves no temp file', (t) => {
  const dir = tmp();
  try {
    writeFileSync(join(dir, 'file'), 'x');
    const err = writeCodeCache(join(dir, 'file', 'kubectl-nodedisks', 'code-x.v8cache'), { payload: Buffer.from('abc'), commands: [] });
    t.truthy(err);
    mkdirSync(join(dir, 'target.v8cache'));
    t.truthy(writeCodeCache(join(dir, 'target.v8cache'), { payload: Buffer.from('abc'), commands: [] }), 'a directory where the file should be');
    t.deepEqual(readdirSync(dir).sort(), ['file', 'target.v8cache']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a write removes cache and temp files of other builds not written for 30 days, and keeps the rest', (t) => {
  const dir = tmp();
  try {
    const old = (Date.now() - STALE_MS - 60_000) / 1000;
    for (const name of ['code-old.v8cache', 'code-old.v8cache.123.tmp', 'code-recent.v8cache', 'unrelated.txt']) writeFileSync(join(dir, name), 'x');
    for (const name of ['code-old.v8cache', 'code-old.v8cache.123.tmp', 'unrelated.txt']) utimesSync(join(dir, name), old, old);
    t.is(writeCodeCache(join(dir, 'code-new.v8cache'), { payload: Buffer.from('abc'), commands: ['list'] }), undefined);
    t.deepEqual(readdirSync(dir).sort(), ['code-new.v8cache', 'code-recent.v8cache', 'unrelated.txt']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a run rewrites the cache when there is none, V8 rejected it, or its command has not added to it yet', (t) => {
  const cache = { payload: Buffer.from('x'), commands: ['version', 'list'] };
  t.true(shouldWrite(undefined, false, 'list'));
  t.true(shouldWrite(cache, false, 'list'), 'rejected by V8');
  t.false(shouldWrite(cache, true, 'list'));
  t.true(shouldWrite(cache, true, 'status'));
  const full = { payload: Buffer.from('x'), commands: Array.from({ length: MAX_COMMANDS }, (_, i) => `c${i}`) };
  t.false(shouldWrite(full, true, 'status'), 'no more than MAX_COMMANDS rewrites');
  t.is(commandKey('list'), 'list');
  t.is(commandKey('__complete'), '__complete');
  t.is(commandKey(undefined), '');
  t.is(commandKey('--help'), '');
  t.is(commandKey('a,b'), '', 'never a comma: the header separates commands with it');
});

test('the cache directory and file are made for the user alone', (t) => {
  const dir = tmp();
  try {
    chmodSync(dir, 0o755);
    const file = join(dir, 'new', 'code-x.v8cache');
    t.is(writeCodeCache(file, { payload: Buffer.from('abc'), commands: [] }), undefined);
    t.is(statSync(join(dir, 'new')).mode & 0o777, 0o700);
    t.is(statSync(file).mode & 0o777, 0o600);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

const me = process.geteuid!();
const aCache = { payload: Buffer.from(Array.from({ length: 300 }, (_, i) => i & 0xff)), commands: ['list'] };

test("a cache directory of another user (sudo with the user's HOME) is neither read nor written", (t) => {
  const dir = tmp();
  try {
    const file = join(dir, 'kubectl-nodedisks', 'code-x.v8cache');
    t.is(writeCodeCache(file, aCache), undefined);
    t.deepEqual(readCodeCache(file), aCache, 'this user reads its own');
    // The same directory seen by another effective user: the owner is not them.
    const other = me + 1;
    t.regex(untrustedDir(dirname(file), other) ?? '', new RegExp(`is owned by uid ${me}, not by uid ${other}$`));
    t.is(readCodeCache(file, other), undefined, 'not loaded by another user');
    const before = readFileSync(file);
    t.regex(writeCodeCache(file, { payload: Buffer.from('other'), commands: ['version'] }, Date.now(), other)?.message ?? '', /not a cache directory of this user alone: .* is owned by uid/);
    t.deepEqual(readFileSync(file), before, 'not written by another user');
    t.deepEqual(readdirSync(dirname(file)), ['code-x.v8cache'], 'no temp file left');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a group- or world-writable cache directory, or one below such a directory, is neither read nor written', (t) => {
  const dir = tmp();
  try {
    const cacheDir = join(dir, 'home', '.cache', 'kubectl-nodedisks');
    const file = join(cacheDir, 'code-x.v8cache');
    t.is(writeCodeCache(file, aCache), undefined);
    chmodSync(cacheDir, 0o770);
    t.regex(untrustedDir(cacheDir) ?? '', /kubectl-nodedisks is writable by its group or others \(mode 770\)/);
    t.is(readCodeCache(file), undefined);
    t.truthy(writeCodeCache(file, aCache));
    chmodSync(cacheDir, 0o700);
    t.deepEqual(readCodeCache(file), aCache);
    chmodSync(join(dir, 'home'), 0o777);
    t.regex(untrustedDir(cacheDir) ?? '', /home is writable by its group or others \(mode 777\)/, 'a parent anyone can write: anyone can swap the directory');
    t.is(readCodeCache(file), undefined);
    chmodSync(join(dir, 'home'), 0o1777);
    t.is(untrustedDir(cacheDir), undefined, 'a sticky parent (as /tmp) lets nobody rename or remove our directory');
    t.deepEqual(readCodeCache(file), aCache);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a cache file others may write, or a link in its place, is not read; a write replaces a link and never writes through it', (t) => {
  const dir = tmp();
  try {
    const file = join(dir, 'code-x.v8cache');
    t.is(writeCodeCache(file, aCache), undefined);
    chmodSync(file, 0o666);
    t.is(readCodeCache(file), undefined, 'world-writable file');
    chmodSync(file, 0o600);
    const elsewhere = join(dir, 'elsewhere.bin');
    writeFileSync(elsewhere, readFileSync(file));
    rmSync(file);
    symlinkSync(elsewhere, file);
    t.is(readCodeCache(file), undefined, 'a link where the cache should be is not followed');
    t.is(writeCodeCache(file, { payload: Buffer.from('new'), commands: ['status'] }), undefined);
    t.false(statSync(file, { throwIfNoEntry: true }).isSymbolicLink());
    t.deepEqual(readCodeCache(file)?.commands, ['status'], 'the link was replaced by the new file');
    t.is(readCodeCache(elsewhere)?.commands.join(), 'list', 'the link target was not written');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
