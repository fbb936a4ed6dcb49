// The V8 code cache of the single executable (krew) build, kept in the user's cache directory.
//
// Why here and not in the executable: a code cache made at build time is specific to the Node it was
// made with (the other four platforms' Nodes reject it) and to the V8 flags (a NODE_OPTIONS such as
// --stack-trace-limit=50 makes V8 reject it, and Node then prints a warning on every run); see
// docs/adr/0027-plugin-code-cache-on-first-run.md. Made on the user's machine by the Node that uses it,
// it fits, and the release archive stays byte-reproducible.
//
// Nothing here may fail the plugin or print: every error means "no cache", at worst a slower start.
// Only node builtins are imported, so the single executable's entry that uses this stays small.
import { closeSync, constants, fstatSync, mkdirSync, openSync, readdirSync, readSync, realpathSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join, posix, win32 } from 'node:path';

/** The single executable's asset holding the plugin code (the CommonJS bundle of plugin/main.ts). */
export const PLUGIN_ASSET = 'kubectl-nodedisks.js';
// A cache file: MAGIC, the hash64 of all that follows (8 bytes, little-endian), the length of the
// command list (2 bytes), the command list (comma-separated ASCII), V8's code cache.
/** The first bytes of a cache file: format and version of this file layout (not V8's). */
const MAGIC = Buffer.from('NDV8CC02', 'latin1');
const HASHED_FROM = MAGIC.length + 8;
const LIST_FROM = HASHED_FROM + 2;
/** More commands than this (typos are commands too) no longer make a run rewrite the cache. */
export const MAX_COMMANDS = 16;
/** Cache files of other builds (an older plugin, another Node) not rewritten for this long are removed. */
export const STALE_MS = 30 * 24 * 3600 * 1000;

/**
 * The directory for the cache: $XDG_CACHE_HOME (when absolute, as the XDG spec requires) on every
 * platform, else the platform's own: ~/.cache on Linux, ~/Library/Caches on macOS, %LOCALAPPDATA% on
 * Windows. Undefined when there is no such place, or when NODE_DISABLE_COMPILE_CACHE is set: Node's own
 * switch for its compile cache, which the bundle build uses (plugin/launch.ts), so both builds obey it.
 */
export function codeCacheDir(env: NodeJS.ProcessEnv, platform: NodeJS.Platform): string | undefined {
  if (env.NODE_DISABLE_COMPILE_CACHE) return undefined;
  const path = platform === 'win32' ? win32 : posix;
  const xdg = env.XDG_CACHE_HOME;
  if (xdg && path.isAbsolute(xdg)) return path.join(xdg, 'kubectl-nodedisks');
  if (platform === 'win32') return env.LOCALAPPDATA && path.isAbsolute(env.LOCALAPPDATA) ? path.join(env.LOCALAPPDATA, 'kubectl-nodedisks', 'cache') : undefined;
  const home = env.HOME;
  if (!home || !path.isAbsolute(home)) return undefined;
  return platform === 'darwin' ? path.join(home, 'Library', 'Caches', 'kubectl-nodedisks') : path.join(home, '.cache', 'kubectl-nodedisks');
}

/** FNV-1a, 32 bits, as 8 hex digits: enough to tell NODE_OPTIONS values apart in a file name. */
function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(16).padStart(8, '0');
}

/**
 * The cache file's name: what V8 checks a cache against, so that each combination has its own file and
 * two of them never overwrite each other in turn. V8 itself only compares the source's length (hence the
 * plugin code's sha256, from the build), its own version (hence Node's version and the CPU) and the V8
 * flags, which NODE_OPTIONS can change.
 */
export function codeCacheName(pluginSha256: string, nodeVersion: string, arch: string, nodeOptions: string | undefined): string {
  return `code-${pluginSha256.slice(0, 16)}-node${nodeVersion}-${arch}-${fnv1a(nodeOptions ?? '')}.v8cache`;
}

/** The cache file for the plugin code with this sha256 run by this process, or undefined for no cache. */
export function codeCacheFile(pluginSha256: string, p: Pick<NodeJS.Process, 'env' | 'platform' | 'version' | 'arch'>): string | undefined {
  const dir = codeCacheDir(p.env, p.platform);
  return dir && join(dir, codeCacheName(pluginSha256, p.version, p.arch, p.env.NODE_OPTIONS));
}

/** A cache read back: V8's code cache and the commands whose runs made it. */
export interface CodeCache {
  payload: Buffer;
  commands: string[];
}

/**
 * The command a run's cache entry is known by: its first argument if that looks like a command name,
 * else "" (help, a flag, anything else).
 */
export function commandKey(firstArg: string | undefined): string {
  return firstArg !== undefined && /^[a-z_][a-z_-]{0,31}$/.test(firstArg) ? firstArg : '';
}

/**
 * Whether this run should write the cache when it ends: there is none (or V8 rejected it), or its command
 * has not added the functions it compiles yet. V8 compiles most functions on first call, and a cache
 * holds those compiled when it was made; a cache made at exit of a run that started from one holds both.
 * So each command rewrites the cache once, until MAX_COMMANDS have.
 */
export function shouldWrite(cache: CodeCache | undefined, accepted: boolean, command: string): boolean {
  if (!cache || !accepted) return true;
  return !cache.commands.includes(command) && cache.commands.length < MAX_COMMANDS;
}

/** O_NOFOLLOW where the platform has it (not Windows): a link where the cache file should be is refused. */
const NOFOLLOW = constants.O_NOFOLLOW ?? 0;

/**
 * Why the directory `dir` may not hold a cache for the effective user `euid`, or undefined if it may. A
 * code cache is code this process runs: loaded from a directory someone else can write (the user's own
 * HOME under sudo, a shared or group-writable directory), it would let them run code as this user, as
 * root under sudo; written there, it would leave files of ours in their directory. So, as OpenSSH's
 * StrictModes judges ~/.ssh: the directory (its real path, links resolved) is this user's and nobody
 * else may write it, and each directory above it is this user's or root's and writable by nobody else,
 * unless sticky (/tmp: others can add entries but not rename or remove ours). Windows has no owner uids
 * here (ACLs): no check there.
 */
export function untrustedDir(dir: string, euid: number | undefined = process.geteuid?.()): string | undefined {
  if (euid === undefined) return undefined;
  let real: string;
  try {
    real = realpathSync.native(dir);
  } catch (err) {
    return `cannot resolve ${dir}: ${(err as Error).message}`;
  }
  for (let p = real, first = true; ; first = false) {
    let st;
    try {
      st = statSync(p);
    } catch (err) {
      return `cannot stat ${p}: ${(err as Error).message}`;
    }
    if (first && !st.isDirectory()) return `${p} is not a directory`;
    if (first ? st.uid !== euid : st.uid !== euid && st.uid !== 0) return `${p} is owned by uid ${st.uid}, not by uid ${euid}${first ? '' : ' or root'}`;
    if (st.mode & 0o022 && (first || !(st.mode & 0o1000))) return `${p} is writable by its group or others (mode ${(st.mode & 0o7777).toString(8)})`;
    const up = dirname(p);
    if (up === p) return undefined;
    p = up;
  }
}

/**
 * The cache in `file`, or undefined if there is none, it is not whole, or it is not this user's alone (in
 * a directory untrustedDir refuses, a link, a file others may write). The checksum is ours: V8 checks
 * a cache's header but not its payload (release builds skip V8's checksum), and a damaged payload that
 * V8 accepts crashes the process (seen: SIGTRAP, SIGSEGV), so a damaged file must never reach V8.
 */
export function readCodeCache(file: string, euid: number | undefined = process.geteuid?.()): CodeCache | undefined {
  if (untrustedDir(dirname(file), euid) !== undefined) return undefined;
  let data: Buffer;
  let fd: number | undefined;
  try {
    fd = openSync(file, constants.O_RDONLY | NOFOLLOW);
    const st = fstatSync(fd);
    if (!st.isFile() || (euid !== undefined && (st.uid !== euid || st.mode & 0o022))) return undefined;
    data = Buffer.allocUnsafe(st.size);
    for (let off = 0, n = 1; off < data.length && n > 0; off += n) n = readSync(fd, data, off, data.length - off, off);
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  if (data.length <= LIST_FROM || !data.subarray(0, MAGIC.length).equals(MAGIC)) return undefined;
  if (hash64(data.subarray(HASHED_FROM)) !== data.readBigUInt64LE(MAGIC.length)) return undefined;
  const payloadFrom = LIST_FROM + data.readUInt16LE(HASHED_FROM);
  if (payloadFrom >= data.length) return undefined;
  const list = data.toString('latin1', LIST_FROM, payloadFrom);
  return { payload: data.subarray(payloadFrom), commands: list === '' ? [] : list.split(',') };
}

/**
 * Writes a cache to `file` whole or not at all (a temp file, then rename: a concurrent run reads the
 * old file or the new one, never half of one), and removes other builds' stale cache files. Only into a
 * directory untrustedDir accepts; the temp file is created new (O_EXCL) and never through a link
 * (O_NOFOLLOW), and the rename replaces a link at `file` rather than writing where it points. Returns the
 * error instead of throwing: an unwritable cache directory is no reason to fail or to print.
 */
export function writeCodeCache(file: string, cache: CodeCache, now = Date.now(), euid: number | undefined = process.geteuid?.()): Error | undefined {
  const dir = dirname(file);
  const tmp = `${file}.${process.pid}-${Math.random().toString(36).slice(2, 10)}.tmp`;
  let made = false;
  try {
    const list = Buffer.from(cache.commands.join(','), 'latin1');
    const data = Buffer.concat([MAGIC, Buffer.alloc(8), Buffer.alloc(2), list, cache.payload]);
    data.writeUInt16LE(list.length, HASHED_FROM);
    data.writeBigUInt64LE(hash64(data.subarray(HASHED_FROM)), MAGIC.length);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const why = untrustedDir(dir, euid);
    if (why) throw new Error(`not a cache directory of this user alone: ${why}`);
    const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | NOFOLLOW, 0o600);
    made = true;
    try {
      for (let off = 0; off < data.length; ) off += writeSync(fd, data, off);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, file);
  } catch (err) {
    if (made) {
      try {
        unlinkSync(tmp);
      } catch {
        // Renamed already, or removed.
      }
    }
    return err as Error;
  }
  removeStale(dir, basename(file), now);
  return undefined;
}

/** Removes cache and temp files, other than `keep`, not written for STALE_MS: old plugin versions' caches. */
function removeStale(dir: string, keep: string, now: number): void {
  try {
    for (const name of readdirSync(dir)) {
      if (name === keep || !name.startsWith('code-') || !(name.endsWith('.v8cache') || name.endsWith('.tmp'))) continue;
      const path = join(dir, name);
      try {
        if (now - statSync(path).mtimeMs > STALE_MS) unlinkSync(path);
      } catch {
        // Removed by another run, or not ours to remove.
      }
    }
  } catch {
    // An unreadable directory keeps its files.
  }
}

/**
 * The WebAssembly module of hash64, assembled from this text format by hand (test/unit/code-cache.test.ts
 * checks it against a plain JavaScript version of the same function):
 *
 *   (module
 *     (memory (export "memory") 0)
 *     (func (export "hash") (param $len i32) (result i64) (local $i i32) (local $h i64) (local $end i32)
 *       (local.set $h (i64.const 0xcbf29ce484222325))
 *       (local.set $end (i32.and (local.get $len) (i32.const -8)))
 *       (block $done (loop $words                          ;; 8 bytes at a time, little-endian
 *         (br_if $done (i32.ge_u (local.get $i) (local.get $end)))
 *         (local.set $h (i64.rotl (i64.mul (i64.xor (local.get $h) (i64.load (local.get $i))) (i64.const 0x100000001b3)) (i64.const 31)))
 *         (local.set $i (i32.add (local.get $i) (i32.const 8)))
 *         (br $words)))
 *       (block $done (loop $bytes                          ;; then the last 0-7 bytes one by one
 *         (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
 *         (local.set $h (i64.rotl (i64.mul (i64.xor (local.get $h) (i64.load8_u (local.get $i))) (i64.const 0x100000001b3)) (i64.const 31)))
 *         (local.set $i (i32.add (local.get $i) (i32.const 1)))
 *         (br $bytes)))
 *       (local.get $h)))
 *
 * Each step is a bijection of the running value, so any one changed word or byte changes the result.
 */
// biome-ignore format: the module's bytes, laid out by hand
const HASH64_WASM = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 6, 1, 96, 1, 127, 1, 126, 3, 2, 1, 0, 5, 3, 1, 0, 0, 7, 17, 2, 6, 109, 101, 109, 111, 114,
  121, 2, 0, 4, 104, 97, 115, 104, 0, 0, 10, 117, 1, 115, 3, 1, 127, 1, 126, 1, 127, 66, 165, 198, 136, 161, 200, 156, 167,
  249, 75, 33, 2, 32, 0, 65, 120, 113, 33, 3, 2, 64, 3, 64, 32, 1, 32, 3, 79, 13, 1, 32, 2, 32, 1, 41, 3, 0, 133, 66, 179,
  131, 128, 128, 128, 32, 126, 66, 31, 137, 33, 2, 32, 1, 65, 8, 106, 33, 1, 12, 0, 11, 11, 2, 64, 3, 64, 32, 1, 32, 0, 79,
  13, 1, 32, 2, 32, 1, 49, 0, 0, 133, 66, 179, 131, 128, 128, 128, 32, 126, 66, 31, 137, 33, 2, 32, 1, 65, 1, 106, 33, 1, 12,
  0, 11, 11, 32, 2, 11,
]);

/**
 * A 64-bit hash of `data` (FNV-1a's constants over 8-byte words, with a rotation): the cache file's
 * checksum. Against damage, not attack: whoever can write the user's cache directory can run code as
 * the user anyway. WebAssembly because it is the cheap native loop at hand: node:crypto costs more CPU
 * to load than the cache saves at times, and the same loop in JavaScript runs interpreted (ADR 27).
 */
export function hash64(data: Uint8Array): bigint {
  const { exports } = new wasm.Instance(new wasm.Module(HASH64_WASM));
  exports.memory.grow(Math.ceil(data.length / 65536));
  new Uint8Array(exports.memory.buffer).set(data);
  return BigInt.asUintN(64, exports.hash(data.length));
}

/** The part of the WebAssembly global used here (the project's TypeScript lib has no WebAssembly types). */
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: { memory: { grow(pages: number): number; buffer: ArrayBuffer }; hash(len: number): bigint } };
}
const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;
