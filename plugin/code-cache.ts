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
import { mkdirSync, readdirSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, posix, win32 } from 'node:path';

/** The single executable's asset holding the plugin code (the CommonJS bundle of plugin/main.ts). */
export const PLUGIN_ASSET = 'kubectl-nodedisks.js';
/** The first bytes of a cache file: format and version of this file layout (not V8's). */
const MAGIC = Buffer.from('NDV8CC01', 'latin1');
const DIGEST_BYTES = 32;
const HEADER_BYTES = MAGIC.length + DIGEST_BYTES;
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

/**
 * The cache in `file`, or undefined if there is none or it is not whole. The checksum is ours: V8 checks
 * a cache's header but not its payload (release builds skip V8's checksum), and a damaged payload that
 * V8 accepts crashes the process (seen: SIGTRAP, SIGSEGV), so a damaged file must never reach V8.
 */
export function readCodeCache(file: string): Buffer | undefined {
  let data: Buffer;
  try {
    data = readFileSync(file);
  } catch {
    return undefined;
  }
  if (data.length <= HEADER_BYTES || !data.subarray(0, MAGIC.length).equals(MAGIC)) return undefined;
  const payload = data.subarray(HEADER_BYTES);
  return sha256(payload).equals(data.subarray(MAGIC.length, HEADER_BYTES)) ? payload : undefined;
}

/**
 * Writes `payload` to `file` whole or not at all (a temp file, then rename: a concurrent run reads the
 * old file or the new one, never half of one), and removes other builds' stale cache files. Returns the
 * error instead of throwing: an unwritable cache directory is no reason to fail or to print.
 */
export function writeCodeCache(file: string, payload: Buffer, now = Date.now()): Error | undefined {
  const dir = dirname(file);
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(tmp, Buffer.concat([MAGIC, sha256(payload), payload]), { mode: 0o600 });
    renameSync(tmp, file);
  } catch (err) {
    try {
      unlinkSync(tmp);
    } catch {
      // It was never made.
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

function sha256(data: Buffer): Buffer {
  // node:crypto only when there is a cache to check or write (~1 ms to load), not on every start.
  return process.getBuiltinModule('node:crypto').hash('sha256', data, 'buffer');
}
