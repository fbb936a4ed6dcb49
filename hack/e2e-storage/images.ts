// The images the storage suites run, built here, since nothing may be pulled:
// - busybox, the framework's default test image (every writer and reader pod), from Debian's
//   busybox-static: one static binary with a link per applet in /bin, but for sh and dd, which are this
//   host's bash and GNU dd (Debian 12's, with their libraries). The block specs write with
//   oflag=nocache, which busybox 1.35's dd refuses, and Debian builds busybox's sh to run its own
//   applets before any file on PATH, so a GNU dd beside it would never be run;
// - the same image under the names of nginx (the volumes suite's "exec of files on the volume") and
//   jessie-dnsutils (multiVolume's concurrent access): those specs give their own sh command and run
//   nothing of nginx or dig;
// - agnhost (the subPath suite's mounttest) as upstream has it, ENTRYPOINT /agnhost, CMD pause, built
//   from the release's module (e2e-test.ts), with the busybox applets beside it for its shell commands.
// Their names are whatever e2e.test --list-images reports with KUBE_TEST_REPO_LIST set, so a release
// that moves a tag needs no edit here.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { base, hostBinary, unique } from '../cluster/images.ts';
import { ociArchive, renamed, type BuiltImage, type Entry } from '../cluster/oci.ts';
import { ensureDebianFiles } from '../lib/debian-package.ts';
import { goPlatform } from '../lib/gobuild.ts';
import { cacheRoot } from '../lib/paths.ts';

const run = promisify(execFile);

/** Debian 12's busybox-static: the applets the suites run (blockdev, sha256sum, base64, mount, ...) but sh and dd, taken from the host (FROM_HOST). */
export const BUSYBOX_DEB_VERSION = '1:1.35.0-4+deb12u1+b1';

/** The programs taken from this Debian host instead of busybox's applets: where to, from where. */
const FROM_HOST: [string, string][] = [
  ['bin/sh', '/usr/bin/bash'],
  ['bin/bash', '/usr/bin/bash'],
  ['bin/dd', '/usr/bin/dd'],
];

/** The registry the framework's image names point at (KUBE_TEST_REPO_LIST): only images imported here exist there. */
export const E2E_REGISTRY = 'localhost/e2e-test-images';

/**
 * KUBE_TEST_REPO_LIST: every registry the framework knows, moved under localhost/, so an image nobody
 * built fails as ErrImagePull at once, naming itself, instead of reaching out.
 */
export const REPO_LIST: Record<string, string> = {
  promoterE2eRegistry: E2E_REGISTRY,
  buildImageRegistry: 'localhost/build-image',
  gcEtcdRegistry: 'localhost/etcd',
  gcRegistry: 'localhost/k8s',
  sigStorageRegistry: 'localhost/sig-storage',
  privateRegistry: 'localhost/private',
  invalidRegistry: 'localhost/invalid',
  dockerLibraryRegistry: 'localhost/library',
  cloudProviderGcpRegistry: 'localhost/cloud-provider-gcp',
};

/** The images e2e.test names (`--list-images`), with the override in place. */
export async function e2eImages(e2eTest: string, repoListFile: string): Promise<string[]> {
  const { stdout } = await run(e2eTest, ['--list-images'], { env: { ...process.env, KUBE_TEST_REPO_LIST: repoListFile }, maxBuffer: 16 * 1024 * 1024 });
  return stdout.split('\n').filter(Boolean);
}

/** The path of Debian's static busybox, fetched into the cache first if needed. */
export async function ensureBusybox(): Promise<string> {
  const dir = await ensureDebianFiles({
    pkg: 'busybox-static',
    version: BUSYBOX_DEB_VERSION,
    files: ['bin/busybox'],
    dir: join(cacheRoot(), 'e2e-storage', `busybox-static-${BUSYBOX_DEB_VERSION.replace(/[:+]/g, '_')}-linux-${goPlatform().arch}`),
    setup: 'npm run setup -- e2e-storage',
  });
  return join(dir, 'busybox');
}

/** The repositories served by the busybox rootfs as it is. */
const BUSYBOX_NAMES = ['busybox', 'nginx', 'jessie-dnsutils'];

/**
 * The images under every name e2e.test asks for (from `images`, its --list-images): the suites use more
 * than one tag of some (nginx 1.14 and 1.15), and one image serves each.
 */
export async function buildE2eImages(images: string[], agnhost: string): Promise<BuiltImage[]> {
  const named = (repo: string) => {
    const found = images.filter((i) => i.startsWith(`${E2E_REGISTRY}/${repo}:`));
    if (found.length === 0) throw new Error(`e2e.test --list-images names no ${E2E_REGISTRY}/${repo}: is KUBE_TEST_REPO_LIST applied? (it listed ${images.length} images)`);
    return found;
  };
  // The names first: a binary that lists none of them is refused before anything is fetched.
  const [first, ...others] = BUSYBOX_NAMES.flatMap(named);
  const [agnhostName, ...agnhostOthers] = named('agnhost');
  const busybox = await ensureBusybox();
  const { stdout } = await run(busybox, ['--list']);
  const fromHost = new Set(FROM_HOST.map(([to]) => to));
  const applets = stdout.split('\n').filter((a) => /^[a-z0-9_.[-]+$/.test(a) && a !== 'busybox' && !fromHost.has(`bin/${a}`));
  const entries: Entry[] = [
    ...base(),
    { path: 'bin/busybox', type: 'file', mode: 0o755, content: await readFile(busybox) },
    ...applets.map((a): Entry => ({ path: `bin/${a}`, type: 'symlink', target: 'busybox' })),
  ];
  for (const [to, from] of FROM_HOST) entries.push(...(await hostBinary(from, to)));
  // One entry per path: bash and dd load the same libc.
  const rootfs = unique(entries);
  const env = ['PATH=/usr/sbin:/usr/bin:/sbin:/bin'];
  const plain = ociArchive(first!, rootfs, { entrypoint: [], cmd: ['sh'], user: '0:0', env });
  const withAgnhost = ociArchive(agnhostName!, [...rootfs, { path: 'agnhost', type: 'file', mode: 0o755, content: await readFile(agnhost) }], {
    entrypoint: ['/agnhost'],
    cmd: ['pause'],
    user: '0:0',
    env,
  });
  return [plain, ...others.map((n) => renamed(plain, n)), withAgnhost, ...agnhostOthers.map((n) => renamed(withAgnhost, n))];
}
