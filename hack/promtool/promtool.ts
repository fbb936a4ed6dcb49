// promtool (and the prometheus server beside it) for the alert tests: Debian's `prometheus` package at
// the version pinned below, fetched once with `apt-get download` and unpacked into the cache, never
// installed into the host (docs/adr/0032-promtool-from-debian.md). apt checks the package against the
// archive's signed index, so the pin names one binary.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { isExecutable } from '../lib/gobuild.ts';
import { cacheRoot } from '../lib/paths.ts';

/** Debian's version of the package (bookworm), and the Prometheus release it is. */
export const PROMETHEUS_DEB_VERSION = '2.42.0+ds-5+b6';

const run = (cmd: string, args: string[], cwd: string) =>
  new Promise<void>((resolve, reject) => {
    execFile(cmd, args, { cwd, timeout: 300_000, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } }, (err, _out, stderr) => {
      if (!err) return resolve();
      const code = (err as NodeJS.ErrnoException).code;
      reject(new Error(code === 'ENOENT' ? `no \`${cmd}\` on PATH` : `${cmd} ${args.join(' ')} failed: ${stderr.trim() || err.message}`));
    });
  });

/** The cache folder that holds promtool and prometheus once fetched. */
export function prometheusDir(): string {
  const arch = ({ x64: 'amd64', arm64: 'arm64' } as Record<string, string>)[process.arch] ?? process.arch;
  return join(cacheRoot(), 'prometheus', `prometheus-${PROMETHEUS_DEB_VERSION}-linux-${arch}`);
}

/** The path of promtool, fetched first if the cache does not have it. Throws saying what is missing. */
export async function ensurePromtool(log: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): Promise<string> {
  const dir = prometheusDir();
  const promtool = join(dir, 'promtool');
  if ((await isExecutable(promtool)) && (await isExecutable(join(dir, 'prometheus')))) return promtool;
  if (process.platform !== 'linux' || !existsSync('/usr/bin/apt-get')) {
    throw new Error(`promtool comes from Debian's prometheus package ${PROMETHEUS_DEB_VERSION} (apt-get download), and this machine has no apt-get: put promtool and prometheus into ${dir}`);
  }
  log(`fetching Debian's prometheus ${PROMETHEUS_DEB_VERSION} into ${dir} (first use on this machine; cached afterwards)`);
  await mkdir(dirname(dir), { recursive: true });
  const tmp = await mkdtemp(`${dir}.tmp-`);
  try {
    const pkg = `prometheus=${PROMETHEUS_DEB_VERSION}`;
    try {
      await run('apt-get', ['download', pkg], tmp);
    } catch (first) {
      // A machine whose package lists were never fetched knows no package: fetch them once and retry.
      if (process.getuid?.() !== 0) throw new Error(`${(first as Error).message} (run apt-get update as root, or npm run setup -- promtool as root)`);
      await run('apt-get', ['update'], tmp);
      await run('apt-get', ['download', pkg], tmp).catch((err: Error) => {
        throw new Error(`${err.message}: is ${PROMETHEUS_DEB_VERSION} still served? (apt-cache policy prometheus)`);
      });
    }
    const deb = (await readdir(tmp)).find((f) => f.endsWith('.deb'));
    if (!deb) throw new Error(`apt-get download ${pkg} left no .deb in ${tmp}`);
    await run('dpkg-deb', ['-x', deb, 'x'], tmp);
    const out = join(tmp, 'out');
    await mkdir(out);
    for (const bin of ['promtool', 'prometheus']) await rename(join(tmp, 'x', 'usr', 'bin', bin), join(out, bin));
    await rm(dir, { recursive: true, force: true });
    await rename(out, dir);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  return promtool;
}

export interface PromtoolResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs promtool; never throws on a non-zero exit (the tests read its findings). */
export function runPromtool(bin: string, args: string[], cwd?: string): Promise<PromtoolResult> {
  return new Promise((resolve) => {
    execFile(bin, args, { timeout: 120_000, maxBuffer: 16 * 1024 * 1024, ...(cwd ? { cwd } : {}) }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1) : 0;
      resolve({ code, stdout, stderr: err && !stderr ? err.message : stderr });
    });
  });
}

// `node hack/promtool/promtool.ts ARGS…`: the pinned promtool, fetched first if needed.
if (import.meta.main) {
  const bin = await ensurePromtool();
  const r = await runPromtool(bin, process.argv.slice(2), process.env.INIT_CWD ?? process.cwd());
  process.stdout.write(r.stdout);
  process.stderr.write(r.stderr);
  process.exit(r.code);
}
