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

/** The path of krew's validate-krew-manifest (same module and version as krew), built first if not cached. */
export async function ensureValidateKrewManifest(log?: (line: string) => void): Promise<string> {
  const version = await krewVersion();
  const { os, arch } = goPlatform();
  // Its own cache entry, so the krew entry built before this tool existed stays whole.
  const dir = join(cacheRoot(), 'krew', `validate-krew-manifest-${version}-${os}-${arch}`);
  await ensureGoBuild({
    what: `validate-krew-manifest ${version} (for the krew manifest test)`,
    takes: 'under a minute once krew is built',
    moduleDir,
    dir,
    targets: [{ name: 'validate-krew-manifest', pkg: 'sigs.k8s.io/krew/cmd/validate-krew-manifest' }],
    log,
  });
  return join(dir, 'validate-krew-manifest');
}
