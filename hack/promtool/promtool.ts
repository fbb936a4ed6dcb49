// promtool (and the prometheus server beside it) for the alert tests: Debian's `prometheus` package at
// the version pinned below, fetched into the cache (../lib/debian-package.ts).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { ensureDebianFiles } from '../lib/debian-package.ts';
import { cacheRoot } from '../lib/paths.ts';

/** Debian's version of the package (bookworm), and the Prometheus release it is. */
export const PROMETHEUS_DEB_VERSION = '2.42.0+ds-5+b6';

/** The cache folder that holds promtool and prometheus once fetched. */
export function prometheusDir(): string {
  const arch = ({ x64: 'amd64', arm64: 'arm64' } as Record<string, string>)[process.arch] ?? process.arch;
  return join(cacheRoot(), 'prometheus', `prometheus-${PROMETHEUS_DEB_VERSION}-linux-${arch}`);
}

/** The path of promtool, fetched first if the cache does not have it. Throws saying what is missing. */
export async function ensurePromtool(log?: (line: string) => void): Promise<string> {
  const dir = await ensureDebianFiles({
    pkg: 'prometheus',
    version: PROMETHEUS_DEB_VERSION,
    files: ['usr/bin/promtool', 'usr/bin/prometheus'],
    dir: prometheusDir(),
    setup: 'npm run setup -- promtool',
    ...(log ? { log } : {}),
  });
  return join(dir, 'promtool');
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
