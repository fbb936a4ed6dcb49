// The entry of the single executable (krew) build: the plugin's code is an asset of the executable, and
// this compiles it with a V8 code cache from the user's cache directory (./code-cache.ts), so that only
// the first run compiles it. Node compiles a single executable's main script itself, without a cache
// (the build-time cache of sea-config's useCodeCache does not fit: docs/adr/0027), and its compile cache
// (module.enableCompileCache) covers modules loaded from files only; hence vm.Script here.
//
// Kept small and free of plugin code: this part is compiled on every run, without a cache.
// `NODE_DEBUG=nodedisks` says what happened with the cache (on stderr); nothing is printed otherwise.
import { getRawAsset } from 'node:sea';
import { debuglog } from 'node:util';
import { Script } from 'node:vm';
import { codeCacheFile, commandKey, PLUGIN_ASSET, readCodeCache, shouldWrite, writeCodeCache } from './code-cache.ts';

/** The sha256 of the plugin code asset, set by hack/release/release.ts when it builds this file. */
declare const PLUGIN_SHA256: string;

type PluginMain = (exports: unknown, req: NodeJS.Require, mod: NodeJS.Module, filename: string, dirname: string) => void;

// debuglog matches NODE_DEBUG (names, wildcards) at its first call; without the variable there is nothing to match.
const debug: (format: string, ...args: unknown[]) => void = process.env.NODE_DEBUG ? debuglog('nodedisks') : () => {};
// The build keeps the bundle ASCII (esbuild escapes the rest), so latin1 decodes it as a copy, no UTF-8.
const source = Buffer.from(getRawAsset(PLUGIN_ASSET)).toString('latin1');
const file = codeCacheFile(PLUGIN_SHA256, process);
const cache = file ? readCodeCache(file) : undefined;
const script = new Script(source, { filename: PLUGIN_ASSET, ...(cache ? { cachedData: cache.payload } : {}) });
const accepted = cache !== undefined && !script.cachedDataRejected;
const command = commandKey(process.argv[2]);

if (!file) {
  debug('code cache: off (no cache directory, or NODE_DISABLE_COMPILE_CACHE)');
} else {
  debug('code cache %s: %s', file, accepted ? `accepted (made by: ${cache.commands.join(', ')})` : cache ? 'rejected by V8' : "none or damaged, or not this user's alone");
  if (shouldWrite(cache, accepted, command)) {
    // Made at exit, so it holds the functions this run compiled too (V8 compiles most of them lazily).
    process.once('exit', () => {
      const err = writeCodeCache(file, { payload: script.createCachedData(), commands: accepted ? [...cache.commands, command] : [command] });
      debug('code cache %s: %s', file, err ? `not written: ${err.message}` : 'written');
    });
  }
}

(script.runInThisContext() as PluginMain)(module.exports, require, module, __filename, __dirname);
