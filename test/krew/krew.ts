// Builds (once, cached by version) the krew binary from the Go module sigs.k8s.io/krew pinned in
// go.mod beside this file, for the test that installs the plugin with krew itself. Only that test
// needs it, so it is built on its first use there (or by `npm run setup`), never for the demo.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheRoot } from '../../scripts/lib/paths.ts';
import { ensureGoBuild, goPlatform } from '../harness/gobuild.ts';

const moduleDir = fileURLToPath(new URL('.', import.meta.url));

export async function krewVersion(): Promise<string> {
  const gomod = await readFile(join(moduleDir, 'go.mod'), 'utf8');
  const version = /sigs\.k8s\.io\/krew (v\S+)/.exec(gomod)?.[1];
  if (!version) throw new Error(`${join(moduleDir, 'go.mod')} does not require sigs.k8s.io/krew`);
  return version;
}

/** The path of the krew binary, built first if the cache does not have it. */
export async function ensureKrew(log?: (line: string) => void): Promise<string> {
  const version = await krewVersion();
  const { os, arch } = goPlatform();
  const dir = join(cacheRoot(), 'krew', `krew-${version}-${os}-${arch}`);
  await ensureGoBuild({
    what: `krew ${version} (for the krew installation test)`,
    takes: '1 to 3 minutes',
    moduleDir,
    dir,
    targets: [{ name: 'krew', pkg: 'sigs.k8s.io/krew/cmd/krew' }],
    log,
  });
  return join(dir, 'krew');
}
