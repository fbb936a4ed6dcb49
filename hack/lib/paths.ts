// Where things are, for the build, the release, the demo and the tests alike: the repository root and
// the per-user cache of things built or fetched once (Node binaries for releases, test binaries).
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root, with no trailing slash. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url)).replace(/\/$/, '');

/** `$NODEDISKS_CACHE_DIR`, else `$XDG_CACHE_HOME/nodedisks`, else `~/.cache/nodedisks`. */
export function cacheRoot(): string {
  if (process.env.NODEDISKS_CACHE_DIR) return process.env.NODEDISKS_CACHE_DIR;
  const base = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(base, 'nodedisks');
}
