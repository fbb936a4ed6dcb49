// fio for `npm run bench:io`: Debian's fio package at the version pinned below, with the shared libraries
// it links that this Debian host lacks (libaio, librbd, libgfapi, ...: its engines are linked in, not
// loaded), fetched with `apt-get download` and unpacked into the cache, never installed into the host
// (as ../lib/debian-package.ts does for one package). The libraries the host has (libc, zlib) are the
// host's; the bench's test image takes the same set (bench/io.ts).
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readdir, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { goPlatform } from '../lib/gobuild.ts';
import { cacheRoot } from '../lib/paths.ts';

const run = promisify(execFile);

/** Debian 12's fio. */
export const FIO_DEB_VERSION = '3.33-3';

export interface Fio {
  bin: string;
  /** LD_LIBRARY_PATH for bin: the libraries the host lacks. */
  libDir: string;
}

export function fioDir(): string {
  return join(cacheRoot(), 'fio', `fio-${FIO_DEB_VERSION}-linux-${goPlatform().arch}`);
}

/** The shared libraries `bin` loads with `libDir` first, and the ones nobody has (empty when it can run). */
export async function linkedLibraries(bin: string, libDir: string): Promise<{ found: string[]; missing: string[] }> {
  const { stdout } = await run('ldd', [bin], { env: { ...process.env, LD_LIBRARY_PATH: libDir } });
  const found: string[] = [];
  const missing: string[] = [];
  for (const line of stdout.split('\n')) {
    const notFound = /^\s*(\S+) => not found/.exec(line);
    if (notFound?.[1]) missing.push(notFound[1]);
    const m = /(?:=>\s*)?(\/\S+)\s+\(0x/.exec(line);
    if (m?.[1]) found.push(m[1]);
  }
  return { found, missing };
}

const aptEnv = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };

/** fio's library packages (recursively) that are not installed here. */
async function missingLibraryPackages(): Promise<string[]> {
  const { stdout } = await run(
    'apt-cache',
    ['depends', '--recurse', '--no-recommends', '--no-suggests', '--no-conflicts', '--no-breaks', '--no-replaces', '--no-enhances', '--no-pre-depends', `fio=${FIO_DEB_VERSION}`],
    { env: aptEnv, maxBuffer: 16 * 1024 * 1024 },
  );
  const names = [...new Set(stdout.split('\n').filter((l) => /^lib[a-z0-9.+-]+$/.test(l)))];
  const out: string[] = [];
  for (const name of names) {
    const installed = await run('dpkg-query', ['-W', '-f=${Status}', name]).then(
      (r) => r.stdout.includes('install ok installed'),
      () => false,
    );
    if (!installed) out.push(name);
  }
  return out;
}

/** fio and its libraries, fetched into the cache first if needed. Throws saying what is missing. */
export async function ensureFio(log: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): Promise<Fio> {
  const dir = fioDir();
  const fio = { bin: join(dir, 'fio'), libDir: join(dir, 'lib') };
  if (existsSync(fio.bin) && (await linkedLibraries(fio.bin, fio.libDir)).missing.length === 0) return fio;
  if (process.platform !== 'linux' || !existsSync('/usr/bin/apt-get')) throw new Error(`bench:io runs Debian's fio ${FIO_DEB_VERSION}, fetched with apt-get, which this machine lacks`);
  log(`fetching Debian's fio ${FIO_DEB_VERSION} and the libraries it links into ${dir} (first use on this machine; cached afterwards)`);
  await mkdir(dirname(dir), { recursive: true });
  const tmp = await mkdtemp(`${dir}.tmp-`);
  try {
    const packages = await missingLibraryPackages();
    await run('apt-get', ['download', `fio=${FIO_DEB_VERSION}`, ...packages], { cwd: tmp, env: aptEnv, timeout: 600_000 }).catch((err: Error & { stderr?: string }) => {
      throw new Error(`apt-get download fio=${FIO_DEB_VERSION} ${packages.join(' ')} failed: ${err.stderr?.trim() || err.message} (as root, apt-get update first)`);
    });
    for (const deb of (await readdir(tmp)).filter((f) => f.endsWith('.deb'))) await run('dpkg-deb', ['-x', deb, 'x'], { cwd: tmp });
    const out = join(tmp, 'out');
    await mkdir(join(out, 'lib'), { recursive: true });
    await rename(join(tmp, 'x', 'usr', 'bin', 'fio'), join(out, 'fio'));
    // Every shared object the packages hold, in one dir (some sit in subdirs, as ceph's do, found by RUNPATH).
    for (const e of await readdir(join(tmp, 'x'), { withFileTypes: true, recursive: true })) {
      if ((e.isFile() || e.isSymbolicLink()) && /\.so(\.|$)/.test(e.name)) await cp(join(e.parentPath, e.name), join(out, 'lib', e.name), { verbatimSymlinks: true });
    }
    const { missing } = await linkedLibraries(join(out, 'fio'), join(out, 'lib'));
    if (missing.length > 0) throw new Error(`fio ${FIO_DEB_VERSION} still lacks ${missing.join(', ')} after fetching ${packages.join(' ')}`);
    await rm(dir, { recursive: true, force: true });
    await rename(out, dir);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  return fio;
}

if (import.meta.main) {
  const f = await ensureFio();
  console.log(f.bin);
}
