// Finds or builds the test control plane: etcd, kube-apiserver and kubectl of one pinned release.
//
// Order, as envtest users expect: KUBEBUILDER_ASSETS (a folder with the three binaries), then the
// cache (~/.cache/nodedisks/controlplane/<versions>-<os>-<arch>), else a build from the Go module
// proxy through the wrapper module beside this file (go.mod pins the versions; gen-go-mod.sh makes it).

import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { cacheRoot } from '../lib/paths.ts';
import { ensureGoBuild, goPlatform, isExecutable } from '../lib/gobuild.ts';

const run = promisify(execFile);
const moduleDir = fileURLToPath(new URL('.', import.meta.url));

export interface ControlPlaneBinaries {
  dir: string;
  etcd: string;
  kubeApiserver: string;
  kubectl: string;
  /** "v1.35.4" etc.; "unknown" for KUBEBUILDER_ASSETS until asked. */
  kubernetesVersion: string;
  etcdVersion: string;
  source: 'KUBEBUILDER_ASSETS' | 'cache' | 'built';
}

/** The versions pinned in go.mod: the one place they are written. */
export async function pinnedVersions(): Promise<{ kubernetes: string; etcd: string }> {
  const gomod = await readFile(join(moduleDir, 'go.mod'), 'utf8');
  const find = (mod: string): string => {
    const m = new RegExp(`^\\s*${mod.replace(/[./]/g, '\\$&')} (v\\S+)`, 'm').exec(gomod);
    if (!m?.[1]) throw new Error(`hack/controlplane/go.mod does not require ${mod}; run hack/controlplane/gen-go-mod.sh`);
    return m[1];
  };
  return { kubernetes: find('k8s.io/kubernetes'), etcd: find('go.etcd.io/etcd/server/v3') };
}

function inDir(dir: string) {
  return { dir, etcd: join(dir, 'etcd'), kubeApiserver: join(dir, 'kube-apiserver'), kubectl: join(dir, 'kubectl') };
}

async function allPresent(dir: string): Promise<boolean> {
  const b = inDir(dir);
  return (await Promise.all([b.etcd, b.kubeApiserver, b.kubectl].map(isExecutable))).every(Boolean);
}

async function versionOf(binary: string, args: string[], pattern: RegExp): Promise<string> {
  try {
    const { stdout } = await run(binary, args, { timeout: 20_000 });
    return pattern.exec(stdout)?.[1] ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/**
 * Returns the binaries, building them once when neither KUBEBUILDER_ASSETS nor the cache has them.
 * `log` receives progress lines (a cold build takes minutes; say so); stderr when not given.
 */
export async function ensureBinaries(log?: (line: string) => void): Promise<ControlPlaneBinaries> {
  const assets = process.env.KUBEBUILDER_ASSETS;
  if (assets) {
    if (!(await allPresent(assets))) {
      throw new Error(`KUBEBUILDER_ASSETS=${assets} must be a folder with executable etcd, kube-apiserver and kubectl; ` + 'fix the path, or unset it to build the pinned control plane');
    }
    const b = inDir(assets);
    return {
      ...b,
      kubernetesVersion: await versionOf(b.kubeApiserver, ['--version'], /Kubernetes (v\S+)/),
      etcdVersion: await versionOf(b.etcd, ['--version'], /etcd Version: (\S+)/),
      source: 'KUBEBUILDER_ASSETS',
    };
  }
  const versions = await pinnedVersions();
  const { os, arch } = goPlatform();
  const dir = join(cacheRoot(), 'controlplane', `kube-${versions.kubernetes}-etcd-${versions.etcd}-${os}-${arch}`);
  const result = { ...inDir(dir), kubernetesVersion: versions.kubernetes, etcdVersion: versions.etcd };
  if (await allPresent(dir)) return { ...result, source: 'cache' };

  const kubeLdflags = kubernetesLdflags(versions.kubernetes);
  const how = await ensureGoBuild({
    what: `the test control plane (Kubernetes ${versions.kubernetes}, etcd ${versions.etcd})`,
    takes: 'about 7 minutes on 2 cores',
    moduleDir,
    dir,
    targets: [
      { name: 'etcd', pkg: 'go.etcd.io/etcd/server/v3' },
      { name: 'kube-apiserver', pkg: 'k8s.io/kubernetes/cmd/kube-apiserver', ldflags: kubeLdflags },
      { name: 'kubectl', pkg: 'k8s.io/kubernetes/cmd/kubectl', ldflags: kubeLdflags },
    ],
    withoutGo: 'or set KUBEBUILDER_ASSETS to a folder with etcd, kube-apiserver and kubectl',
    log,
  });
  return { ...result, source: how };
}

/** Kubernetes stamps its version through ldflags (as its own build does), so `--version` tells the truth. */
export function kubernetesLdflags(version: string): string {
  return `-s -w -X k8s.io/component-base/version.gitVersion=${version} -X k8s.io/client-go/pkg/version.gitVersion=${version}`;
}

export interface NodeBinaries {
  dir: string;
  kubelet: string;
  kubeControllerManager: string;
  kubeScheduler: string;
  pause: string;
  kubernetesVersion: string;
  source: 'cache' | 'built';
}

/**
 * What the local cluster (hack/cluster, `npm run cluster`) needs beyond the test control plane: kubelet,
 * kube-controller-manager, kube-scheduler of the same pinned k8s.io/kubernetes as kube-apiserver, and
 * `pause` (pause/main.go), the pod sandbox process, since registry.k8s.io/pause cannot be pulled offline.
 * Built only on demand (`npm test` never asks for them), into a cache entry beside the control plane's.
 */
export async function ensureNodeBinaries(log?: (line: string) => void): Promise<NodeBinaries> {
  const { kubernetes } = await pinnedVersions();
  const { os, arch } = goPlatform();
  const dir = join(cacheRoot(), 'controlplane', `node-kube-${kubernetes}-${os}-${arch}`);
  const ldflags = kubernetesLdflags(kubernetes);
  const source = await ensureGoBuild({
    what: `kubelet, kube-controller-manager and kube-scheduler ${kubernetes} for the local cluster`,
    // What a person is told to expect; the measurement behind it is in ADR 16.
    takes: 'about 16 minutes on 2 loaded cores',
    moduleDir,
    dir,
    targets: [
      { name: 'kubelet', pkg: 'k8s.io/kubernetes/cmd/kubelet', ldflags },
      { name: 'kube-controller-manager', pkg: 'k8s.io/kubernetes/cmd/kube-controller-manager', ldflags },
      { name: 'kube-scheduler', pkg: 'k8s.io/kubernetes/cmd/kube-scheduler', ldflags },
      { name: 'pause', pkg: './pause' },
    ],
    log,
  });
  return {
    dir,
    kubelet: join(dir, 'kubelet'),
    kubeControllerManager: join(dir, 'kube-controller-manager'),
    kubeScheduler: join(dir, 'kube-scheduler'),
    pause: join(dir, 'pause'),
    kubernetesVersion: kubernetes,
    source,
  };
}
