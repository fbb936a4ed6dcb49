// Finds or builds what the local cluster (test/cluster, `npm run cluster`) needs beyond the test control
// plane: kubelet, kube-controller-manager, kube-scheduler of the same pinned k8s.io/kubernetes as
// kube-apiserver (go.mod is the one place the version is written), and `pause`, the pod sandbox process
// (pause/main.go), since registry.k8s.io/pause cannot be pulled offline.
//
// Built only on demand (`npm test` never asks for them), into a cache entry beside the control plane's,
// through a temp dir and a rename so an interrupted build leaves no half cache.

import { execFile } from 'node:child_process';
import { access, constants, mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { cacheRoot } from '../../scripts/lib/paths.ts';
import { pinnedVersions } from './binaries.ts';

const run = promisify(execFile);
const moduleDir = fileURLToPath(new URL('.', import.meta.url));

export interface NodeBinaries {
  dir: string;
  kubelet: string;
  kubeControllerManager: string;
  kubeScheduler: string;
  pause: string;
  kubernetesVersion: string;
  source: 'cache' | 'built';
}

const TARGETS: [file: string, pkg: string][] = [
  ['kubelet', 'k8s.io/kubernetes/cmd/kubelet'],
  ['kube-controller-manager', 'k8s.io/kubernetes/cmd/kube-controller-manager'],
  ['kube-scheduler', 'k8s.io/kubernetes/cmd/kube-scheduler'],
  ['pause', './pause'],
];

async function executable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export async function ensureNodeBinaries(log: (line: string) => void = () => {}): Promise<NodeBinaries> {
  const { kubernetes } = await pinnedVersions();
  const arch = ({ x64: 'amd64', arm64: 'arm64' } as Record<string, string>)[process.arch] ?? process.arch;
  const dir = join(cacheRoot(), 'controlplane', `node-kube-${kubernetes}-${process.platform}-${arch}`);
  const result = {
    dir,
    kubelet: join(dir, 'kubelet'),
    kubeControllerManager: join(dir, 'kube-controller-manager'),
    kubeScheduler: join(dir, 'kube-scheduler'),
    pause: join(dir, 'pause'),
    kubernetesVersion: kubernetes,
  };
  if ((await Promise.all(TARGETS.map(([f]) => executable(join(dir, f))))).every(Boolean)) return { ...result, source: 'cache' };

  log(`building kubelet, kube-controller-manager and kube-scheduler ${kubernetes} into ${dir}; a cold build takes about 10 minutes`);
  await mkdir(join(cacheRoot(), 'controlplane'), { recursive: true });
  const tmp = await mkdtemp(`${dir}.tmp-`);
  try {
    // CGO_ENABLED=0: static binaries, no C toolchain needed; the kubelet features that need cgo are not used here.
    const env = { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-mod=readonly -trimpath -buildvcs=false' };
    for (const [name, pkg] of TARGETS) {
      const started = Date.now();
      const ldflags = pkg.startsWith('k8s.io/')
        ? `-s -w -X k8s.io/component-base/version.gitVersion=${kubernetes} -X k8s.io/client-go/pkg/version.gitVersion=${kubernetes}`
        : '-s -w';
      try {
        await run('go', ['build', '-ldflags', ldflags, '-o', join(tmp, name), pkg], { cwd: moduleDir, env, maxBuffer: 64 * 1024 * 1024 });
      } catch (err) {
        const e = err as { code?: string; stderr?: string };
        if (e.code === 'ENOENT') throw new Error('the Go toolchain (go) is needed once to build kubelet, kube-controller-manager and kube-scheduler; install Go 1.25 or later');
        throw new Error(`go build ${pkg} failed:\n${e.stderr ?? String(err)}`);
      }
      log(`built ${name} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    }
    await rm(dir, { recursive: true, force: true });
    await rename(tmp, dir);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  return { ...result, source: 'built' };
}
