// Builds (once, cached by version) the helm binary from the Go module helm.sh/helm/v3 pinned in go.mod
// beside this file, for the chart tests: lint, template, schema refusals, install/upgrade/uninstall
// against the test control plane. Only those tests (and `npm run setup`) build it, never the demo.
import { execFile, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureGoBuild, goPlatform } from '../lib/gobuild.ts';
import { cacheRoot } from '../lib/paths.ts';

const moduleDir = fileURLToPath(new URL('.', import.meta.url));

/** The pinned helm version and the client-go version it is built with, from go.mod. */
export async function helmVersions(): Promise<{ helm: string; clientGo: string }> {
  const gomod = await readFile(join(moduleDir, 'go.mod'), 'utf8');
  const helm = /helm\.sh\/helm\/v3 (v\S+)/.exec(gomod)?.[1];
  const clientGo = /k8s\.io\/client-go (v\S+)/.exec(gomod)?.[1];
  if (!helm || !clientGo) throw new Error(`${join(moduleDir, 'go.mod')} does not require helm.sh/helm/v3 and k8s.io/client-go`);
  return { helm, clientGo };
}

/** The path of the helm binary, built first if the cache does not have it. */
export async function ensureHelm(log?: (line: string) => void): Promise<string> {
  const { helm, clientGo } = await helmVersions();
  const { os, arch } = goPlatform();
  const dir = join(cacheRoot(), 'helm', `helm-${helm}-${os}-${arch}`);
  // As helm's own Makefile does: `helm version` names the release, and the Kubernetes version that
  // `helm template` and `helm lint` assume without a cluster is the client-go one (v0.N is 1.N), not
  // the library's fallback 1.20.
  const minor = /^v0\.(\d+)\./.exec(clientGo)?.[1];
  if (!minor) throw new Error(`unexpected k8s.io/client-go version ${clientGo} in ${join(moduleDir, 'go.mod')}`);
  const x = (v: string) => `-X helm.sh/helm/v3/${v}`;
  const ldflags = [
    '-s -w',
    x(`internal/version.version=${helm}`),
    x('internal/version.gitTreeState=clean'),
    x('pkg/lint/rules.k8sVersionMajor=1'),
    x(`pkg/lint/rules.k8sVersionMinor=${minor}`),
    x('pkg/chartutil.k8sVersionMajor=1'),
    x(`pkg/chartutil.k8sVersionMinor=${minor}`),
  ].join(' ');
  await ensureGoBuild({
    what: `helm ${helm} (for the chart tests)`,
    takes: 'about 5 to 10 minutes on 2 cores',
    moduleDir,
    dir,
    targets: [{ name: 'helm', pkg: 'helm.sh/helm/v3/cmd/helm', ldflags }],
    ...(log ? { log } : {}),
  });
  return join(dir, 'helm');
}

export interface HelmOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  timeoutMs?: number;
}

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs helm; never throws on a non-zero exit (the tests read its refusals). */
export function runHelm(bin: string, args: string[], opts: HelmOptions = {}): Promise<HelmResult> {
  return new Promise((resolve) => {
    execFile(
      bin,
      args,
      { maxBuffer: 64 * 1024 * 1024, timeout: opts.timeoutMs ?? 300_000, env: { ...process.env, ...opts.env }, ...(opts.cwd ? { cwd: opts.cwd } : {}) },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1) : 0;
        resolve({ code, stdout, stderr: err && !stderr ? err.message : stderr });
      },
    );
  });
}

/** As runHelm, and throws with helm's own message on a non-zero exit; its stdout. */
export async function helm(bin: string, args: string[], opts: HelmOptions = {}): Promise<string> {
  const r = await runHelm(bin, args, opts);
  if (r.code !== 0) throw new Error(`helm ${args.join(' ')} exited ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

// `npm run helm -- ARGS…` (the Makefile's helm-install and helm-uninstall): the pinned helm, built first if
// needed, run with ARGS in the caller's directory.
if (import.meta.main) {
  const bin = await ensureHelm();
  const child = spawn(bin, process.argv.slice(2), { stdio: 'inherit', cwd: process.env.INIT_CWD ?? process.cwd() });
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}
