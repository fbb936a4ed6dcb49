// The CSI tools, built from their published Go modules once per machine into the cache
// (<cache>/csi/<name>-<version>-<os>-<arch>/<name>):
// - csi-sanity, the CSI spec's conformance suite, run against the driver's sockets;
// - csi-provisioner, the sidecar that turns a PersistentVolumeClaim into CreateVolume calls (the local
//   cluster's csi-provisioner:dev image; production uses its upstream image).
// Each is built from its own go.mod and go.sum as published, so the version written here is the whole pin.
import { execFile } from 'node:child_process';
import { chmod, cp, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ensureCachedBuild } from '../lib/cached-build.ts';
import { ensureGoTool, goPlatform } from '../lib/gobuild.ts';
import { goModuleDir } from '../lib/gomod.ts';
import { cacheRoot, REPO_ROOT } from '../lib/paths.ts';
import { CSI_IMAGE } from '../lib/image-spec.ts';

export interface CsiTool {
  name: string;
  module: string;
  version: string;
  /** The main package, relative to the module. */
  pkg: string;
}

export const CSI_SANITY: CsiTool = { name: 'csi-sanity', module: 'github.com/kubernetes-csi/csi-test/v5', version: 'v5.6.0', pkg: 'cmd/csi-sanity' };
export const CSI_PROVISIONER: CsiTool = { name: 'csi-provisioner', module: 'github.com/kubernetes-csi/external-provisioner/v6', version: 'v6.4.0', pkg: 'cmd/csi-provisioner' };

/** Where the tool's binary is (or will be) in the cache. */
export function csiToolPath(t: CsiTool): string {
  const { os, arch } = goPlatform();
  return join(cacheRoot(), 'csi', `${t.name}-${t.version}-${os}-${arch}`, t.name);
}

/** csi-sanity's path, built first if the cache lacks it (`go install`). */
export function ensureCsiSanity(log?: (line: string) => void): Promise<string> {
  const t = CSI_SANITY;
  return ensureCachedBuild({
    what: `${t.name} ${t.version} (the CSI conformance tests)`,
    takes: 'about 1 to 2 minutes on 2 cores',
    dir: dirname(csiToolPath(t)),
    name: t.name,
    ...(log ? { log } : {}),
    build: async (out) => {
      // `go install pkg@version` builds with the module's own go.mod, outside any module of ours; the
      // version stamped as its release does, so `-version` names it.
      const env = { GOBIN: dirname(out), GOFLAGS: '-trimpath -buildvcs=false' };
      await go(t, ['install', `-ldflags=-s -w -X main.VERSION=${t.version}`, `${t.module}/${t.pkg}@${t.version}`], dirname(out), env, log);
    },
  });
}

/**
 * csi-provisioner's path, built first if the cache lacks it. `go install` refuses this module (its go.mod
 * has replace directives), so it is built in a copy of the module's own directory, with its go.sum.
 */
export function ensureCsiProvisioner(log?: (line: string) => void): Promise<string> {
  const t = CSI_PROVISIONER;
  return ensureCachedBuild({
    what: `${t.name} ${t.version} (the CSI provisioner sidecar of the local cluster)`,
    takes: 'about 10 minutes on 2 loaded cores',
    dir: dirname(csiToolPath(t)),
    name: t.name,
    ...(log ? { log } : {}),
    build: async (out) => {
      const src = await mkdtemp(join(tmpdir(), `nodedisks-${t.name}-src-`));
      try {
        // A copy made writable: the module cache is read-only, and nothing of a build belongs there.
        await cp(await goModuleDir(t.module, t.version), src, { recursive: true });
        await makeWritable(src);
        // As its Makefile stamps it, so `--version` and its log name the release.
        const ldflags = `-s -w -X main.version=${t.version}`;
        await go(t, ['build', '-ldflags', ldflags, '-o', out, `./${t.pkg}`], src, { GOFLAGS: '-mod=readonly -trimpath -buildvcs=false' }, log);
      } finally {
        await rm(src, { recursive: true, force: true });
      }
    },
  });
}

async function makeWritable(dir: string): Promise<void> {
  await chmod(dir, (await stat(dir)).mode | 0o200);
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    const p = join(e.parentPath, e.name);
    if (!e.isSymbolicLink()) await chmod(p, (await stat(p)).mode | 0o200);
  }
}

/** Runs go for tool `t`; every failure names the tool, the command and why, in go's words. */
function go(t: CsiTool, args: string[], cwd: string, extraEnv: Record<string, string>, log?: (line: string) => void): Promise<void> {
  const env = { ...process.env, CGO_ENABLED: '0', GOWORK: 'off', ...extraEnv };
  // A cold build is silent for minutes: on a terminal, say every half minute that it is still going.
  const say = log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const started = Date.now();
  const ticker = process.stderr.isTTY ? setInterval(() => say(`  still building ${t.name} (${((Date.now() - started) / 1000).toFixed(0)} s)…`), 30_000) : undefined;
  return new Promise<void>((resolve, reject) => {
    execFile('go', args, { cwd, env, maxBuffer: 64 * 1024 * 1024 }, (err, _stdout, stderr) => {
      if (ticker) clearInterval(ticker);
      if (!err) return resolve();
      const e = err as NodeJS.ErrnoException & { code?: string | number };
      if (e.code === 'ENOENT') {
        return reject(new Error(`${t.name} ${t.version} is built from its Go module on first use, and the Go toolchain was not found: no \`go\` on PATH. Install Go 1.26 or newer.`));
      }
      const why = stderr.trim() || e.message || `exit code ${String(e.code)}`;
      reject(new Error(`building ${t.name} ${t.version} failed: go ${args.join(' ')} (in ${cwd}):\n${why}`));
    });
  });
}

/** nodedisks-toolrunner, csi-node's tool runner, built from the repository's own module (csi/toolrunner); its path. */
export function ensureToolRunner(log?: (line: string) => void): Promise<string> {
  return ensureGoTool({ name: 'toolrunner', what: "csi-node's tool runner (csi/toolrunner)", moduleDir: join(REPO_ROOT, CSI_IMAGE.toolRunner.moduleDir), ...(log ? { log } : {}) });
}
