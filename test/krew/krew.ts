// Builds (once, cached by version) the krew binary from the Go module sigs.k8s.io/krew pinned in
// go.mod beside this file, for the test that installs the plugin with krew itself.
import { execFile } from 'node:child_process';
import { access, constants, mkdir, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { cacheRoot } from '../controlplane/binaries.ts';

const run = promisify(execFile);
const moduleDir = fileURLToPath(new URL('.', import.meta.url));

export async function ensureKrew(): Promise<string> {
  const gomod = await readFile(join(moduleDir, 'go.mod'), 'utf8');
  const version = /sigs\.k8s\.io\/krew (v\S+)/.exec(gomod)?.[1] ?? 'unknown';
  const bin = join(cacheRoot(), 'krew', `krew-${version}-${process.platform}-${process.arch}`);
  try {
    await access(bin, constants.X_OK);
    return bin;
  } catch {
    // not cached yet
  }
  await mkdir(join(cacheRoot(), 'krew'), { recursive: true });
  const tmp = `${bin}.tmp-${process.pid}`;
  try {
    await run('go', ['build', '-o', tmp, 'sigs.k8s.io/krew/cmd/krew'], {
      cwd: moduleDir,
      env: { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-mod=readonly -trimpath -buildvcs=false' },
      maxBuffer: 16 * 1024 * 1024,
    });
  } catch (err) {
    throw new Error(`building krew ${version} failed (Go is needed once): ${(err as { stderr?: string }).stderr ?? err}`);
  }
  await rename(tmp, bin);
  return bin;
}
