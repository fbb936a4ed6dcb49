// The programs read only `version` from package.json. Bundling the whole file would make any edit of it
// (a script, a dev dependency) change what ships, and with it the krew sha256.
import { readFile } from 'node:fs/promises';
import type { Plugin } from 'esbuild';
import { REPO_ROOT } from './paths.ts';

const { version } = JSON.parse(await readFile(`${REPO_ROOT}/package.json`, 'utf8')) as { version: string };

/** An esbuild plugin that bundles package.json as `{ version }` only. */
export const packageVersionOnly: Plugin = {
  name: 'package-version-only',
  setup(b) {
    b.onLoad({ filter: /[\\/]package\.json$/ }, () => ({ contents: JSON.stringify({ version }), loader: 'json' }));
  },
};
