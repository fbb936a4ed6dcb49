// The krew executable: the plugin bundled as one CommonJS script (an asset, compiled by plugin/sea-main.ts
// with a code cache made on the user's machine: docs/adr/0027), made into a single executable application
// blob (sea-config), injected into each platform's Node binary with postject.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, copyFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { PLUGIN_ASSET } from '../../plugin/code-cache.ts';
import { packageVersionOnly } from '../lib/package-version.ts';
import { REPO_ROOT } from '../lib/paths.ts';
import type { Platform } from './platforms.ts';

const run = promisify(execFile);
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

export async function seaBlob(work: string): Promise<string> {
  // The plugin code: a CommonJS bundle, wrapped in a function that plugin/sea-main.ts compiles with a
  // code cache made on the user's machine (docs/adr/0027). It is an asset of the executable, not its main
  // script, because Node compiles the main script itself, without a cache.
  const bundled = await build({
    entryPoints: [join(REPO_ROOT, 'plugin/main.ts')],
    plugins: [packageVersionOnly],
    write: false,
    outfile: join(work, PLUGIN_ASSET),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node24',
    minify: true,
    legalComments: 'none',
    charset: 'ascii',
    logLevel: 'warning',
  });
  const body = bundled.outputFiles[0]!.text.replace(/^#!.*\n/, '');
  // A code cache is checked against the source's length only: the cache file is named by this sha256.
  const plugin = `(function (exports, require, module, __filename, __dirname) {${body}\n})`;
  if (/[^\x00-\x7f]/.test(plugin)) throw new Error('the plugin bundle is not ASCII: plugin/sea-main.ts decodes it as latin1');
  await writeFile(join(work, PLUGIN_ASSET), plugin);
  await build({
    entryPoints: [join(REPO_ROOT, 'plugin/sea-main.ts')],
    outfile: join(work, 'sea-main.cjs'),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node24',
    minify: true,
    legalComments: 'none',
    define: { PLUGIN_SHA256: JSON.stringify(createHash('sha256').update(plugin).digest('hex')) },
    logLevel: 'warning',
  });
  // No code cache or snapshot in the blob: those are specific to the building platform's Node (this blob
  // goes into five), and useCodeCache's is also rejected, with a warning, under a V8 flag in NODE_OPTIONS.
  // Relative paths, because the blob records the main script's path and the archives must not depend on
  // where they were built.
  await writeFile(
    join(work, 'sea-config.json'),
    JSON.stringify({ main: 'sea-main.cjs', output: 'sea-prep.blob', disableExperimentalSEAWarning: true, useCodeCache: false, useSnapshot: false, assets: { [PLUGIN_ASSET]: PLUGIN_ASSET } }),
  );
  await run(process.execPath, ['--experimental-sea-config', 'sea-config.json'], { cwd: work });
  return join(work, 'sea-prep.blob');
}

/** Copies `node` to `exe` and injects the blob: the executable of platform `p`. */
export async function makeExecutable(p: Platform, node: string, exe: string, blob: string): Promise<void> {
  await copyFile(node, exe);
  await chmod(exe, 0o755);
  const postject = join(REPO_ROOT, 'node_modules', 'postject', 'dist', 'cli.js');
  await run(process.execPath, [postject, exe, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', SEA_FUSE, ...(p.os === 'darwin' ? ['--macho-segment-name', 'NODE_SEA'] : [])], {
    maxBuffer: 16 * 1024 * 1024,
  });
}
