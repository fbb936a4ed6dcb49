// The local cluster's images, built without Docker from hack/lib/image-spec.ts (the one definition
// the Dockerfile is generated from, too): for each image there, the Node 24 runtime (the pinned binary
// and the shared libraries it links, from this Debian 12 host: the distribution of the Dockerfile's bases),
// <distDir>/ and LICENSE in APP_DIR, its user and entrypoint; plus pause, the pod sandbox process
// (hack/controlplane/pause), since registry.k8s.io cannot be pulled. The agent's image and the driver's
// start from one runtime layer, as their Dockerfile stages do. The CSI images (buildCsiImages) are built
// only for the cluster: the driver's, the runtime layer and over it dist/csi with this host's losetup,
// mount, mkfs.ext4 & co. and their libraries, mkfs.xfs from Debian's package; and csi-provisioner's, the
// binary built from its module (hack/csi/tools.ts), as its upstream image has it.

import { existsSync } from 'node:fs';
import { readdir, readFile, realpath, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { REPO_ROOT } from '../lib/paths.ts';
import { APP_DIR, CSI_IMAGE, ENV, IMAGES, LEGAL_FILES, NODE_PATH, entrypoint } from '../lib/image-spec.ts';
import { sh } from './host.ts';
import { ociArchive, ociImage, type BuiltImage, type Entry } from './oci.ts';
import { ensureXfsprogs } from './xfsprogs.ts';
import { ensureToolRunner } from '../csi/tools.ts';

/** The tag the overlay and ci/local-cluster-values.yaml ask for (newTag dev, never pulled). */
export const IMAGE_TAG = 'dev';
/** The name the overlay asks for: kustomize/overlays/local-cluster, or the chart with repository <name>. */
export const imageRef = (name: string) => `docker.io/library/${name}:${IMAGE_TAG}`;
export const PAUSE_IMAGE = 'localhost/nodedisks-pause:1';
/** The local cluster's csi-provisioner (the overlay's `csi-provisioner:dev`), in place of registry.k8s.io's. */
export const CSI_PROVISIONER_IMAGE = imageRef('csi-provisioner');

export async function fileEntry(hostPath: string, imagePath: string, mode?: number): Promise<Entry> {
  const real = await realpath(hostPath);
  const st = await stat(real);
  return { path: imagePath, type: 'file', content: await readFile(real), mode: mode ?? st.mode & 0o777 };
}

async function treeEntries(hostDir: string, imageDir: string): Promise<Entry[]> {
  const out: Entry[] = [];
  for (const e of await readdir(hostDir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue;
    const host = join(e.parentPath, e.name);
    out.push(await fileEntry(host, join(imageDir, relative(hostDir, host)), 0o644));
  }
  return out;
}

/** Every shared library a host binary loads, at the paths its dynamic loader looks for them. */
async function libraries(binary: string): Promise<Entry[]> {
  const out: Entry[] = [];
  for (const line of (await sh('ldd', [binary])).split('\n')) {
    const m = /(?:=>\s*)?(\/\S+)\s+\(0x/.exec(line);
    if (m?.[1]) out.push(await fileEntry(m[1], m[1].slice(1), 0o755));
  }
  return out;
}

/** A host binary at `imagePath` (its own path when not given), with every shared library it loads. */
export async function hostBinary(hostPath: string, imagePath = hostPath.slice(1)): Promise<Entry[]> {
  return [await fileEntry(hostPath, imagePath, 0o755), ...(await libraries(hostPath))];
}

/** The Node binary and every shared library it loads. */
async function nodeRuntime(): Promise<Entry[]> {
  const node = await realpath(join(REPO_ROOT, 'node_modules', '.bin', 'node'));
  return [await fileEntry(node, NODE_PATH.slice(1), 0o755), ...(await libraries(node))];
}

/** One entry per path, the first one kept: a library two binaries load is in the image once. */
export function unique(entries: Entry[]): Entry[] {
  const seen = new Set<string>();
  return entries.filter((e) => {
    if (seen.has(e.path)) return false;
    seen.add(e.path);
    return true;
  });
}

export function base(): Entry[] {
  return [
    { path: 'etc/passwd', type: 'file', mode: 0o644, content: Buffer.from('root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n') },
    { path: 'etc/group', type: 'file', mode: 0o644, content: Buffer.from('root:x:0:\nnonroot:x:65532:\n') },
    { path: 'tmp', type: 'dir', mode: 0o1777 },
    { path: 'home/nonroot', type: 'dir', mode: 0o700, uid: 65532, gid: 65532 },
    { path: 'root', type: 'dir', mode: 0o700 },
  ];
}

/**
 * The node side's runtime layer (NODE_RUNTIME in image-spec.ts): the base files and the Node binary with
 * its libraries. The agent's image and the driver's start from this same layer, so a node's containerd
 * unpacks it once and the two containers run one Node binary file.
 */
async function nodeRuntimeLayer(): Promise<Entry[]> {
  return unique([...base(), ...(await nodeRuntime())]);
}

/** The entries of `upper` whose paths `lower` lacks: a file already in the lower layer stays that layer's. */
function over(lower: Entry[], upper: Entry[]): Entry[] {
  const have = new Set(lower.map((e) => e.path));
  return unique(upper).filter((e) => !have.has(e.path));
}

/** Builds the images of image-spec.ts from dist/ (run `npm run build` first), and the pause image. */
export async function buildImages(pauseBinary: string): Promise<BuiltImage[]> {
  const runtime = await nodeRuntimeLayer();
  const app = APP_DIR.slice(1);
  const legal = await Promise.all(LEGAL_FILES.map((f) => fileEntry(join(REPO_ROOT, f), `${app}/${f}`, 0o644)));
  const built: BuiltImage[] = [];
  for (const img of IMAGES) {
    const own = [...legal, ...(await treeEntries(join(REPO_ROOT, img.distDir), app))];
    // The controller's stands in for distroless (the same files in one layer); the agent's starts from the runtime layer.
    const layers = img.base === 'node-runtime' ? [runtime, over(runtime, own)] : [[...runtime, ...own]];
    built.push(
      ociImage(imageRef(img.name), layers, {
        entrypoint: entrypoint(img),
        user: img.user,
        env: ENV,
        workingDir: APP_DIR,
        exposedPorts: [`${img.port}/tcp`],
      }),
    );
  }
  built.push(ociArchive(PAUSE_IMAGE, [await fileEntry(pauseBinary, 'pause', 0o755)], { entrypoint: ['/pause'], user: '65535:65535', env: [] }));
  return built;
}

/**
 * The node side's tools from this host (Debian 12, as the Dockerfile's base), at their paths there, with
 * their libraries, other names and configuration files. A missing required tool fails the build, naming
 * the Debian package to install.
 */
async function csiTools(): Promise<Entry[]> {
  const missing = CSI_IMAGE.tools.filter((f) => !existsSync(f));
  if (missing.length) {
    throw new Error(`the node-disks-csi image takes ${missing.join(', ')} from this host, which lacks them: apt-get install ${CSI_IMAGE.packages.join(' ')}`);
  }
  const tools = [...CSI_IMAGE.tools, ...CSI_IMAGE.optionalTools.filter((f) => existsSync(f))];
  const out: Entry[] = [];
  for (const tool of tools) out.push(...(await hostBinary(tool)));
  for (const [link, target] of CSI_IMAGE.links) {
    if (tools.includes(join(link, '..', target))) out.push({ path: link.slice(1), type: 'symlink', target });
  }
  for (const f of CSI_IMAGE.files) out.push(await fileEntry(f, f.slice(1), 0o644));
  // mkfs.xfs from Debian's package (./xfsprogs.ts): its other libraries (libblkid, libuuid, libc) are the
  // host's, already here for blkid and mount.
  for (const f of await ensureXfsprogs()) out.push(await fileEntry(f.cached, f.imagePath, f.mode));
  return out;
}

/** dist/csi/ as it is (the bundle and whatever it ships beside it); refused when the bundle is not there. */
async function csiDist(root: string): Promise<Entry[]> {
  const dir = join(root, CSI_IMAGE.distDir);
  const app = APP_DIR.slice(1);
  const entries = existsSync(dir) ? await treeEntries(dir, app) : [];
  const build = `npm run build writes ${CSI_IMAGE.distDir}/${CSI_IMAGE.main}`;
  if (entries.length === 0) throw new Error(`the node-disks-csi image is built from ${CSI_IMAGE.distDir}/, which is empty or missing (${build})`);
  if (!entries.some((e) => e.path === `${app}/${CSI_IMAGE.main}`)) {
    throw new Error(`the node-disks-csi image starts ${APP_DIR}/${CSI_IMAGE.main}, which ${CSI_IMAGE.distDir}/ lacks (it has ${entries.map((e) => relative(app, e.path)).join(', ')}; ${build})`);
  }
  return entries;
}

/**
 * The CSI driver's image and csi-provisioner's, for the local cluster only (npm test builds neither);
 * `root` is where dist/ is (a test's own).
 */
export async function buildCsiImages(provisionerBinary: string, root = REPO_ROOT): Promise<BuiltImage[]> {
  // dist/csi first: a missing bundle is refused before seconds of hashing.
  const dist = await csiDist(root);
  const runner = await fileEntry(await ensureToolRunner(), CSI_IMAGE.toolRunner.path.slice(1), 0o755);
  const legal = await Promise.all(LEGAL_FILES.map((f) => fileEntry(join(root, f), `${APP_DIR.slice(1)}/${f}`, 0o644)));
  const runtime = await nodeRuntimeLayer();
  // The tools' libraries that Node loads too (libc and the like) stay the runtime layer's files.
  const csi = ociImage(imageRef(CSI_IMAGE.name), [runtime, over(runtime, [...(await csiTools()), runner, ...legal, ...dist])], {
    entrypoint: [NODE_PATH, `${APP_DIR}/${CSI_IMAGE.main}`],
    user: CSI_IMAGE.user,
    env: ENV,
    workingDir: APP_DIR,
    exposedPorts: [`${CSI_IMAGE.port}/tcp`],
  });
  // As its upstream image (distroless static, root): the one static binary as the entrypoint.
  const provisioner = ociArchive(CSI_PROVISIONER_IMAGE, [...base(), await fileEntry(provisionerBinary, 'csi-provisioner', 0o755)], {
    entrypoint: ['/csi-provisioner'],
    user: '0:0',
    env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
  });
  return [csi, provisioner];
}
