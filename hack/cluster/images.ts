// The local cluster's images, built without Docker from hack/lib/image-spec.ts (the one definition
// the Dockerfile is generated from, too): for each image there, the Node 24 runtime (the pinned binary
// and the shared libraries it links, from this Debian 12 host: the same base as
// distroless/nodejs24-debian12), <distDir>/ and LICENSE in APP_DIR, its user and entrypoint; plus
// pause, the pod sandbox process (hack/controlplane/pause), since registry.k8s.io cannot be pulled.

import { readdir, readFile, realpath, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { REPO_ROOT } from '../lib/paths.ts';
import { APP_DIR, ENV, IMAGES, LEGAL_FILES, NODE_PATH, entrypoint } from '../lib/image-spec.ts';
import { sh } from './host.ts';
import { ociArchive, type BuiltImage, type Entry } from './oci.ts';

/** The tag the overlay and ci/local-cluster-values.yaml ask for (newTag dev, never pulled). */
export const IMAGE_TAG = 'dev';
/** The name the overlay asks for: kustomize/overlays/local-cluster, or the chart with repository <name>. */
export const imageRef = (name: string) => `docker.io/library/${name}:${IMAGE_TAG}`;
export const PAUSE_IMAGE = 'localhost/nodedisks-pause:1';

async function fileEntry(hostPath: string, imagePath: string, mode?: number): Promise<Entry> {
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

/** The Node binary and every shared library it loads, at the paths its dynamic loader looks for them. */
async function nodeRuntime(): Promise<Entry[]> {
  const node = await realpath(join(REPO_ROOT, 'node_modules', '.bin', 'node'));
  const out: Entry[] = [await fileEntry(node, NODE_PATH.slice(1), 0o755)];
  for (const line of (await sh('ldd', [node])).split('\n')) {
    const m = /(?:=>\s*)?(\/\S+)\s+\(0x/.exec(line);
    if (m?.[1]) out.push(await fileEntry(m[1], m[1].slice(1), 0o755));
  }
  return out;
}

function base(): Entry[] {
  return [
    { path: 'etc/passwd', type: 'file', mode: 0o644, content: Buffer.from('root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n') },
    { path: 'etc/group', type: 'file', mode: 0o644, content: Buffer.from('root:x:0:\nnonroot:x:65532:\n') },
    { path: 'tmp', type: 'dir', mode: 0o1777 },
    { path: 'home/nonroot', type: 'dir', mode: 0o700, uid: 65532, gid: 65532 },
    { path: 'root', type: 'dir', mode: 0o700 },
  ];
}

/** Builds the images of image-spec.ts from dist/ (run `npm run build` first), and the pause image. */
export async function buildImages(pauseBinary: string): Promise<BuiltImage[]> {
  const runtime = await nodeRuntime();
  const app = APP_DIR.slice(1);
  const legal = await Promise.all(LEGAL_FILES.map((f) => fileEntry(join(REPO_ROOT, f), `${app}/${f}`, 0o644)));
  const built: BuiltImage[] = [];
  for (const img of IMAGES) {
    built.push(
      ociArchive(imageRef(img.name), [...base(), ...runtime, ...legal, ...(await treeEntries(join(REPO_ROOT, img.distDir), app))], {
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
