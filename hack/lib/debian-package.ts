// Files of one Debian package at one pinned version, fetched once with `apt-get download` and unpacked
// into a cache entry, never installed into the host (docs/adr/0032-promtool-from-debian.md). apt checks
// the package against the archive's signed index, so the pin names one set of bytes. Used for promtool
// and prometheus, and for busybox, the storage suites' test image.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { isExecutable } from './gobuild.ts';

export interface DebianFiles {
  /** The package and its Debian version: `prometheus`, `2.42.0+ds-5+b6`. */
  pkg: string;
  version: string;
  /** Paths inside the package (`usr/bin/promtool`); each lands in `dir` under its base name. */
  files: string[];
  /** Shared libraries, not programs: present is enough (programs must be executable). */
  libraries?: boolean;
  /** The cache entry. */
  dir: string;
  /** The command that fetches just this, for the hint when apt's lists need root: `npm run setup -- promtool`. */
  setup: string;
  log?: (line: string) => void;
}

const run = (cmd: string, args: string[], cwd: string) =>
  new Promise<void>((resolve, reject) => {
    execFile(cmd, args, { cwd, timeout: 300_000, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } }, (err, _out, stderr) => {
      if (!err) return resolve();
      const code = (err as NodeJS.ErrnoException).code;
      reject(new Error(code === 'ENOENT' ? `no \`${cmd}\` on PATH` : `${cmd} ${args.join(' ')} failed: ${stderr.trim() || err.message}`));
    });
  });

/** Returns `dir` once it holds every file, fetching the package first if it does not. Throws saying what is missing. */
export async function ensureDebianFiles(d: DebianFiles): Promise<string> {
  const wanted = d.files.map((f) => join(d.dir, basename(f)));
  if ((await Promise.all(wanted.map((f) => (d.libraries ? Promise.resolve(existsSync(f)) : isExecutable(f))))).every(Boolean)) return d.dir;
  const pkg = `${d.pkg}=${d.version}`;
  if (process.platform !== 'linux' || !existsSync('/usr/bin/apt-get')) {
    throw new Error(
      `${d.files.map((f) => basename(f)).join(' and ')} come from Debian's ${d.pkg} package ${d.version} (apt-get download), and this machine has no apt-get: put them into ${d.dir}`,
    );
  }
  const log = d.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  log(`fetching Debian's ${d.pkg} ${d.version} into ${d.dir} (first use on this machine; cached afterwards)`);
  await mkdir(dirname(d.dir), { recursive: true });
  const tmp = await mkdtemp(`${d.dir}.tmp-`);
  try {
    try {
      await run('apt-get', ['download', pkg], tmp);
    } catch (first) {
      // A machine whose package lists were never fetched knows no package: fetch them once and retry.
      if (process.getuid?.() !== 0) throw new Error(`${(first as Error).message} (run apt-get update as root, or ${d.setup} as root)`);
      await run('apt-get', ['update'], tmp);
      await run('apt-get', ['download', pkg], tmp).catch((err: Error) => {
        throw new Error(`${err.message}: is ${d.version} still served? (apt-cache policy ${d.pkg})`);
      });
    }
    const deb = (await readdir(tmp)).find((f) => f.endsWith('.deb'));
    if (!deb) throw new Error(`apt-get download ${pkg} left no .deb in ${tmp}`);
    await run('dpkg-deb', ['-x', deb, 'x'], tmp);
    const out = join(tmp, 'out');
    await mkdir(out);
    for (const f of d.files) await rename(join(tmp, 'x', f), join(out, basename(f)));
    await rm(d.dir, { recursive: true, force: true });
    await rename(out, d.dir);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  return d.dir;
}
