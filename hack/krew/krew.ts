// Builds (once, cached by version) the krew binary from the Go module sigs.k8s.io/krew pinned in
// go.mod beside this file, for the test that installs the plugin with krew itself. Only that test
// needs it, so it is built on its first use there (or by `npm run setup`), never for the demo.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheRoot } from '../lib/paths.ts';
import { ensureGoBuild, goPlatform } from '../lib/gobuild.ts';

const moduleDir = fileURLToPath(new URL('.', import.meta.url));

export async function krewVersion(): Promise<string> {
  const gomod = await readFile(join(moduleDir, 'go.mod'), 'utf8');
  const version = /sigs\.k8s\.io\/krew (v\S+)/.exec(gomod)?.[1];
  if (!version) throw new Error(`${join(moduleDir, 'go.mod')} does not require sigs.k8s.io/krew`);
  return version;
}

/** One command of the pinned krew module, built into its own cache entry if not cached; its path. */
async function ensureKrewCommand(name: string, entry: string, forWhat: string, takes: string, log?: (line: string) => void): Promise<string> {
  const version = await krewVersion();
  const { os, arch } = goPlatform();
  const dir = join(cacheRoot(), 'krew', `${entry}-${version}-${os}-${arch}`);
  await ensureGoBuild({ what: `${name} ${version} (${forWhat})`, takes, moduleDir, dir, targets: [{ name, pkg: `sigs.k8s.io/krew/cmd/${name}` }], log });
  return join(dir, name);
}

/** The path of the krew binary, built first if the cache does not have it. */
export function ensureKrew(log?: (line: string) => void): Promise<string> {
  return ensureKrewCommand('krew', 'krew', 'for the krew installation test', '1 to 3 minutes', log);
}

/** The path of krew's validate-krew-manifest (same module and version as krew), built first if not cached. */
export function ensureValidateKrewManifest(log?: (line: string) => void): Promise<string> {
  // Its own cache entry, so the krew entry built before this tool existed stays whole.
  return ensureKrewCommand('validate-krew-manifest', 'validate-krew-manifest', 'for the krew manifest test', 'under a minute once krew is built', log);
}
