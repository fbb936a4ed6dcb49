// An earlier release of this repository, pinned by commit, made ready to install on the local cluster:
// exported from git (`git archive`, so this checkout's git state is not touched and no /work path is
// assumed: a fresh clone has the full history), its programs built with its own hack/build.ts, its images
// with its own hack/cluster/images.ts, renamed to the release's tag so that they sit beside this
// checkout's `:dev` in every node's containerd, and a kustomization over its own local-cluster overlay
// that asks for that tag.
import { readFile, realpath, symlink, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ensureNodeBinaries } from '../../hack/controlplane/binaries.ts';
import { sh } from '../../hack/cluster/host.ts';
import { renamed, writeArchive, type BuiltImage } from '../../hack/cluster/oci.ts';
import { NODE_NAMES, nodeSpec } from '../../hack/cluster/topology.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { MINUTES } from './_nodedisks.ts';

export interface PreviousRelease {
  commit: string;
  /** The image tag its images are imported under: the commit's first 12 hex digits. */
  tag: string;
  dir: string;
  /** A kustomization dir: the release's kustomize/overlays/local-cluster with its images at `tag`. */
  overlay: string;
  /** The release's chart. */
  chart: string;
  /** name@digest of each image, and its archive. */
  images: { ref: string; file: string }[];
  /** How its node_modules came about: `linked` (the same package-lock.json as this checkout) or `npm ci --offline`. */
  nodeModules: 'linked' | 'npm ci --offline';
  /** Seconds spent on each step. */
  seconds: Record<string, string>;
}

const git = (args: string[]) => sh('git', ['-C', REPO_ROOT, ...args], { timeoutMs: 2 * MINUTES });

/**
 * Exports `commit` into `dir` and builds it (programs, images into `dir/images`). Its node_modules: this
 * checkout's, linked, when its package-lock.json is byte for byte this checkout's (the same packages,
 * so the same tools build it); else `npm ci --offline` from the npm cache, as CI installs.
 */
export async function buildPreviousRelease(commit: string, dir: string): Promise<PreviousRelease> {
  const seconds: Record<string, string> = {};
  const timed = async <T>(step: string, f: () => Promise<T>): Promise<T> => {
    const t0 = Date.now();
    try {
      return await f();
    } finally {
      seconds[step] = ((Date.now() - t0) / 1000).toFixed(1);
    }
  };
  const full = await git(['rev-parse', '--verify', `${commit}^{commit}`]).then(
    (s) => s.trim(),
    (err: Error) => {
      throw new Error(`the previous release ${commit} is not in this clone (a shallow clone? git fetch --unshallow): ${err.message}`);
    },
  );
  await mkdir(dir, { recursive: true });
  await timed('export', async () => {
    const archive = join(dir, '..', `release-${full.slice(0, 12)}.tar`);
    await git(['archive', '--format=tar', '-o', archive, full]);
    await sh('tar', ['-xf', archive, '-C', dir]);
  });
  const [theirs, ours] = await Promise.all([git(['show', `${full}:package-lock.json`]), readFile(join(REPO_ROOT, 'package-lock.json'), 'utf8')]);
  const nodeModules = theirs === ours ? 'linked' : 'npm ci --offline';
  await timed('node_modules', async () => {
    if (nodeModules === 'linked') await symlink(await realpath(join(REPO_ROOT, 'node_modules')), join(dir, 'node_modules'));
    else await sh('npm', ['--prefix', dir, 'ci', '--offline', '--no-audit', '--no-fund'], { timeoutMs: 10 * MINUTES });
  });
  await timed('build', () => sh(process.execPath, [join(dir, 'hack', 'build.ts')], { timeoutMs: 5 * MINUTES }));
  const tag = full.slice(0, 12);
  const images = await timed('images', async () => {
    // The release's own image definition and writer, run from its tree (its REPO_ROOT is `dir`).
    const { buildImages } = (await import(pathToFileURL(join(dir, 'hack', 'cluster', 'images.ts')).href)) as { buildImages: (pause: string) => Promise<BuiltImage[]> };
    const built = await buildImages((await ensureNodeBinaries()).pause);
    const out: { ref: string; file: string }[] = [];
    await mkdir(join(dir, 'images'), { recursive: true });
    for (const img of built.filter((i) => /\/node-disks-[a-z]+:/.test(i.name))) {
      const named = renamed(img, img.name.replace(/:[^:]+$/, `:${tag}`));
      const file = join(dir, 'images', `${named.name.replace(/[/:]/g, '_')}.tar`);
      await writeArchive(named, file);
      out.push({ ref: `${named.name}@${named.digest}`, file });
    }
    return out;
  });
  const overlay = join(dir, 'kustomize', 'overlays', 'upgrade-e2e-previous');
  await mkdir(overlay, { recursive: true });
  await writeFile(
    join(overlay, 'kustomization.yaml'),
    [
      '# The release as the local cluster installs it, with its own images (test/e2e/upgrade.test.ts).',
      'apiVersion: kustomize.config.k8s.io/v1beta1',
      'kind: Kustomization',
      'resources:',
      '  - ../local-cluster',
      'images:',
      '  - name: node-disks-operator',
      `    newTag: "${tag}"`,
      '  - name: node-disks-agent',
      `    newTag: "${tag}"`,
      '',
    ].join('\n'),
  );
  return { commit: full, tag, dir, overlay, chart: join(dir, 'charts', 'node-disks-manager'), nodeModules, seconds, images };
}

const socket = (dataDir: string, node: string) => join(nodeSpec(dataDir, node, NODE_NAMES.indexOf(node)).dir, 'run-containerd', 'containerd.sock');

/** Imports the release's images into every node's containerd, as the cluster imports its own. */
export async function importIntoNodes(dataDir: string, release: PreviousRelease): Promise<void> {
  await Promise.all(
    NODE_NAMES.map(async (node) => {
      for (const { file } of release.images) await sh('ctr', ['--address', socket(dataDir, node), '-n', 'k8s.io', 'images', 'import', '--no-unpack', file], { timeoutMs: 5 * MINUTES });
    }),
  );
}

/** The manifest digest the node's containerd holds under `name` (a full reference), or ''. */
export async function nodeImage(dataDir: string, node: string, name: string): Promise<string> {
  const out = await sh('ctr', ['--address', socket(dataDir, node), '-n', 'k8s.io', 'images', 'ls', `name==${name}`]);
  return (
    out
      .split('\n')
      .slice(1)
      .find((l) => l.startsWith(`${name} `))
      ?.split(/\s+/)[2] ?? ''
  );
}
