// Builds the test tools that come from Go modules (the control plane, krew, the health-check runner)
// once per machine into the cache, and finds them there afterwards. Each tool is a small Go module in
// the repository whose go.mod and go.sum pin every version, built with -mod=readonly, so a cache entry
// named by those versions is the same binary on every machine.
//
// A build goes to a temp dir beside the cache entry and is renamed into place: an interrupted build
// never leaves a half cache, and two processes building at once both end with a whole one, the first's.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { access, constants, mkdir, mkdtemp, readdir, readFile, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { cacheRoot } from './paths.ts';

export interface GoTarget {
  /** File name of the binary in the cache entry. */
  name: string;
  /** Go package to build, e.g. sigs.k8s.io/krew/cmd/krew, or "." for the module's own main package. */
  pkg: string;
  ldflags?: string;
  /** Compile the package's tests into one binary (`go test -c`) instead of building a main package. */
  test?: boolean;
}

export interface GoBuild {
  /** What this is, for messages: "the test control plane". */
  what: string;
  /** The Go module beside the TypeScript that pins the versions. */
  moduleDir: string;
  /** The cache entry: a folder that holds every target once built. */
  dir: string;
  targets: GoTarget[];
  /** How long a cold build takes, for the first progress line: "about 7 minutes on 2 cores". */
  takes?: string;
  /** What else the user can do when Go is missing (e.g. "or set KUBEBUILDER_ASSETS …"). */
  withoutGo?: string;
  /** Progress lines; defaults to stderr. */
  log?: (line: string) => void;
}

export function goPlatform(): { os: string; arch: string } {
  const arch = ({ x64: 'amd64', arm64: 'arm64' } as Record<string, string>)[process.arch] ?? process.arch;
  return { os: process.platform, arch };
}

export async function isExecutable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Returns how the targets were had: already in the cache, or built now. Throws with the reason. */
export async function ensureGoBuild(b: GoBuild): Promise<'cache' | 'built'> {
  const present = await Promise.all(b.targets.map((t) => isExecutable(join(b.dir, t.name))));
  if (present.every(Boolean)) return 'cache';
  const log = b.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  log(`building ${b.what} from Go modules into ${b.dir} (first use on this machine${b.takes ? `, ${b.takes}` : ''}; cached afterwards)`);
  await mkdir(dirname(b.dir), { recursive: true });
  const tmp = await mkdtemp(`${b.dir}.tmp-`);
  try {
    for (const t of b.targets) {
      const started = Date.now();
      await goBuild(b, t, join(tmp, t.name), log);
      log(`built ${t.name} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    }
    await putInPlace(b, tmp);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  return 'built';
}

/**
 * Renames a finished build into place. A whole entry already there is another process's build, finished
 * first and perhaps in use: it stays, and this one is dropped. Only an incomplete entry (a target added
 * since it was built) is removed first.
 */
async function putInPlace(b: GoBuild, tmp: string): Promise<void> {
  try {
    await rename(tmp, b.dir);
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
  }
  if ((await Promise.all(b.targets.map((t) => isExecutable(join(b.dir, t.name))))).every(Boolean)) return;
  await rm(b.dir, { recursive: true, force: true });
  await rename(tmp, b.dir);
}

async function goBuild(b: GoBuild, t: GoTarget, out: string, log: (line: string) => void): Promise<void> {
  const env = { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-mod=readonly -trimpath -buildvcs=false' };
  const args = [...(t.test ? ['test', '-c'] : ['build']), '-ldflags', t.ldflags ?? '-s -w', '-o', out, t.pkg];
  // A cold build is silent for minutes: on a terminal, say every half minute that it is still going.
  const started = Date.now();
  const ticker = process.stderr.isTTY ? setInterval(() => log(`  still building ${t.name} (${((Date.now() - started) / 1000).toFixed(0)} s)…`), 30_000) : undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      execFile('go', args, { cwd: b.moduleDir, env, maxBuffer: 64 * 1024 * 1024 }, (err, _stdout, stderr) => {
        if (!err) return resolve();
        reject(buildError(b, t, err as NodeJS.ErrnoException & { code?: string | number }, stderr));
      });
    });
  } finally {
    if (ticker) clearInterval(ticker);
  }
}

/** Every failure says what failed and why: never an empty reason. */
function buildError(b: GoBuild, t: GoTarget, err: NodeJS.ErrnoException & { code?: string | number }, stderr: string): Error {
  if (err.code === 'ENOENT') {
    return new Error(
      `${b.what} is built from Go modules on first use, and the Go toolchain was not found: no \`go\` on PATH. ` + `Install Go 1.26 or newer${b.withoutGo ? `, ${b.withoutGo}` : ''}.`,
    );
  }
  const why = stderr.trim() || err.message || `exit code ${String(err.code)}`;
  return new Error(`building ${b.what} failed: go ${t.test ? 'test -c' : 'build'} ${t.pkg} (in ${b.moduleDir}):\n${why}`);
}

/** $PATH without the folders that hold a `go` command: how a machine without Go looks to a child process. */
export async function pathWithoutGo(path = process.env.PATH ?? ''): Promise<string> {
  const dirs = path.split(':').filter(Boolean);
  const keep = await Promise.all(dirs.map(async (d) => !(await isExecutable(join(d, 'go')))));
  return dirs.filter((_, i) => keep[i]).join(':');
}

/** A hash of a Go module's own files (*.go, go.mod, go.sum): a cache entry named by it is rebuilt on any change. */
export async function moduleSourceHash(moduleDir: string): Promise<string> {
  const files = (await readdir(moduleDir)).filter((f) => f.endsWith('.go') || f === 'go.mod' || f === 'go.sum').sort();
  const h = createHash('sha256');
  for (const f of files)
    h.update(`${f}\0`)
      .update(await readFile(join(moduleDir, f)))
      .update('\0');
  return h.digest('hex').slice(0, 16);
}

/**
 * A one-binary test tool built from a Go module of the repository (`main` package at its root), cached
 * under `<cache>/<name>/<name>-<source hash>-<os>-<arch>/nodedisks-<name>`; its path, built first if needed.
 */
export async function ensureGoTool(t: { name: string; what: string; moduleDir: string; log?: (line: string) => void }): Promise<string> {
  const { os, arch } = goPlatform();
  const dir = join(cacheRoot(), t.name, `${t.name}-${await moduleSourceHash(t.moduleDir)}-${os}-${arch}`);
  const binary = `nodedisks-${t.name}`;
  await ensureGoBuild({ what: t.what, takes: 'a few minutes', moduleDir: t.moduleDir, dir, targets: [{ name: binary, pkg: '.' }], ...(t.log ? { log: t.log } : {}) });
  return join(dir, binary);
}
