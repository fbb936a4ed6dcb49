// What goes into each image of the local cluster, built without Docker from this checkout:
//   agent       Node 24 (the pinned binary, with the shared libraries it links, from this Debian 12
//               host: the same base as distroless/nodejs24-debian12) + dist/agent/, runs as 0:0
//               without capabilities (the Dockerfile's agent target)
//   controller  the same runtime + dist/controller/, runs as 65532:65532 (the Dockerfile's nonroot)
//   pause       the pod sandbox process (test/controlplane/pause), since registry.k8s.io cannot be pulled
// The layout follows the Dockerfile (/nodejs/bin/node, /app/<program>.mjs) so the manifests run either.

import { readdir, readFile, realpath, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { REPO_ROOT } from '../../scripts/lib/paths.ts';
import { sh } from './host.ts';
import { ociArchive, type BuiltImage, type Entry } from './oci.ts';

export const AGENT_IMAGE = 'docker.io/library/node-disks-agent:dev';
export const CONTROLLER_IMAGE = 'docker.io/library/node-disks-operator:dev';
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
  const out: Entry[] = [await fileEntry(node, 'nodejs/bin/node', 0o755)];
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

const ENV = ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/nodejs/bin', 'NODE_ENV=production'];

/** Builds the agent and controller images from dist/ (run `npm run build` first) and the pause image. */
export async function buildImages(pauseBinary: string): Promise<BuiltImage[]> {
  const runtime = await nodeRuntime();
  const license = await fileEntry(join(REPO_ROOT, 'LICENSE'), 'app/LICENSE', 0o644);
  const program = async (dir: string, main: string, name: string, user: string): Promise<BuiltImage> =>
    ociArchive(name, [...base(), ...runtime, license, ...(await treeEntries(join(REPO_ROOT, 'dist', dir), 'app'))], {
      entrypoint: ['/nodejs/bin/node', `/app/${main}`],
      user,
      env: ENV,
      workingDir: '/app',
      exposedPorts: ['8080/tcp'],
    });
  return [
    await program('agent', 'node-disks-agent.mjs', AGENT_IMAGE, '0:0'),
    await program('controller', 'node-disks-operator.mjs', CONTROLLER_IMAGE, '65532:65532'),
    ociArchive(PAUSE_IMAGE, [await fileEntry(pauseBinary, 'pause', 0o755)], { entrypoint: ['/pause'], user: '65535:65535', env: [] }),
  ];
}
