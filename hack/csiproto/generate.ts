// Turns the CSI spec's csi.proto and the kubelet's plugin-registration api.proto into the protobuf.js
// descriptors the CSI driver loads (csi/proto/): both come from their published Go modules, pinned by
// go.mod and go.sum beside this file and fetched into the Go module cache (`go mod download`, verified
// against go.sum). Nothing is copied into the repository: the output is in the git-ignored
// csi/proto/generated/, written by `npm run build` and by this script (`--check` says whether it is current).
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import { goModuleDir } from '../lib/gomod.ts';
import { REPO_ROOT } from '../lib/paths.ts';

const moduleDir = fileURLToPath(new URL('.', import.meta.url));
export const GENERATED_DIR = join(REPO_ROOT, 'csi/proto/generated');

/** Each descriptor: the module that holds the .proto file, and the file within it. */
const SOURCES = [
  { out: 'csi.json', module: 'github.com/container-storage-interface/spec', file: 'csi.proto' },
  { out: 'pluginregistration.json', module: 'k8s.io/kubelet', file: 'pkg/apis/pluginregistration/v1/api.proto' },
] as const;

/** The descriptor of `file` in `dir`, google/protobuf imports taken from protobuf.js's own copies. */
function descriptorOf(dir: string, file: string): string {
  const require = createRequire(import.meta.url);
  const protobufDir = dirname(require.resolve('protobufjs/package.json'));
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => (target.startsWith('google/protobuf/') ? join(protobufDir, target) : join(dir, target));
  root.loadSync(file, { keepCase: true });
  return `${JSON.stringify(root.toJSON({ keepComments: false }))}\n`;
}

export async function generate(check: boolean): Promise<string[]> {
  const stale: string[] = [];
  for (const s of SOURCES) {
    const text = descriptorOf(await goModuleDir(s.module, { pinnedBy: moduleDir }), s.file);
    const path = join(GENERATED_DIR, s.out);
    const current = await readFile(path, 'utf8').catch(() => undefined);
    if (current === text) continue;
    stale.push(path);
    if (check) continue;
    await mkdir(GENERATED_DIR, { recursive: true });
    await writeFile(`${path}.tmp`, text);
    await rename(`${path}.tmp`, path);
  }
  return stale;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const check = process.argv.includes('--check');
  try {
    const stale = await generate(check);
    if (check && stale.length) {
      console.error(`error: not current (run node hack/csiproto/generate.ts): ${stale.join(', ')}`);
      process.exit(1);
    }
    if (!check) console.error(stale.length ? `wrote ${stale.join(', ')}` : 'CSI descriptors current');
  } catch (err) {
    console.error(`error: ${(err as Error).message}`);
    process.exit(1);
  }
}
