// `npm run build`: bundles the three programs with esbuild into dist/, so a command loads a few files
// instead of hundreds of modules. dist/plugin/ is what krew ships and what the end-to-end tests run
// through kubectl; dist/agent/, dist/controller/ and dist/csi/ are what the images copy.
import { chmod, mkdir, rm, writeFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { build, type Plugin } from 'esbuild';
import { packageVersionOnly } from './lib/package-version.ts';
import { REPO_ROOT } from './lib/paths.ts';

// A Node builtin imported as an ES module gets a facade that first evaluates every lazy export of it
// (node:fs's promises with readline, node:util's diff and worker_threads, …): ~18 M instructions of each
// plugin start went to four such imports (docs/adr/0027). Here each builtin is a module of its own whose
// exports read the builtin's properties (pure, so esbuild drops those no one imports): only the exports
// the plugin uses are evaluated, as in the single executable's CommonJS build.
const builtins = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));
const builtinsAsValues: Plugin = {
  name: 'builtins-as-values',
  setup(b) {
    // require() of a builtin (CommonJS dependencies) gets a module of its own: shared with the imports,
    // it would keep all of their exports.
    b.onResolve({ filter: /^[a-z_:/]+$/ }, (args) =>
      builtins.has(args.path) ? { path: args.path.replace(/^(node:)?/, 'node:'), namespace: args.kind === 'require-call' ? 'builtin-required' : 'builtin' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'builtin-required' }, (args) => ({ contents: `module.exports = process.getBuiltinModule(${JSON.stringify(args.path)});`, loader: 'js' }));
    b.onLoad({ filter: /.*/, namespace: 'builtin' }, (args) => {
      const names = Object.keys(process.getBuiltinModule(args.path) as object).filter((k) => /^[A-Za-z_$][\w$]*$/.test(k) && k !== 'default');
      const lines = names.map((k) => `export const ${k} = /* @__PURE__ */ (() => m.${k})();`);
      return { contents: `const m = process.getBuiltinModule(${JSON.stringify(args.path)});\nexport default m;\n${lines.join('\n')}\n`, loader: 'js' };
    });
  },
};

const programs = [
  // The plugin's launcher enables the compile cache, then imports its main chunk: hence splitting.
  { entry: 'plugin/launch.ts', dir: 'dist/plugin', name: 'kubectl-nodedisks', splitting: true, plugins: [builtinsAsValues] },
  { entry: 'agent/main.ts', dir: 'dist/agent', name: 'node-disks-agent', splitting: false, plugins: [builtinsAsValues] },
  { entry: 'controller/main.ts', dir: 'dist/controller', name: 'node-disks-operator', splitting: false, plugins: [builtinsAsValues] },
  // Both sides of the CSI driver (csi/main.ts controller|node): one image, two commands.
  { entry: 'csi/main.ts', dir: 'dist/csi', name: 'node-disks-csi', splitting: false, plugins: [builtinsAsValues] },
];

for (const p of programs) {
  await rm(`${REPO_ROOT}/${p.dir}`, { recursive: true, force: true });
  const result = await build({
    entryPoints: { [p.name]: `${REPO_ROOT}/${p.entry}` },
    outdir: `${REPO_ROOT}/${p.dir}`,
    outExtension: { '.js': '.mjs' },
    splitting: p.splitting,
    chunkNames: 'chunks/[name]-[hash]',
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    minify: true,
    sourcemap: 'linked',
    legalComments: 'linked',
    metafile: true,
    // Some dependencies are CommonJS and call require(); give the ESM bundle one.
    banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
    plugins: [packageVersionOnly, ...p.plugins],
    logLevel: 'warning',
  });
  const js = Object.entries(result.metafile.outputs).filter(([f]) => f.endsWith('.mjs'));
  console.error(`built ${p.dir}/${p.name}.mjs (${js.length} files, ${(js.reduce((n, [, o]) => n + o.bytes, 0) / 1024).toFixed(0)} KiB of JavaScript)`);
}

// Launchers for development and tests: the plugin on PATH as kubectl expects, run by the pinned Node.
await mkdir(`${REPO_ROOT}/dist/bin`, { recursive: true });
const plugin = `${REPO_ROOT}/dist/plugin/kubectl-nodedisks.mjs`;
for (const [file, extra] of [
  ['kubectl-nodedisks', ''],
  ['kubectl_complete-nodedisks', ' __complete'],
] as const) {
  const path = `${REPO_ROOT}/dist/bin/${file}`;
  await writeFile(path, `#!/bin/sh\nexec "${process.execPath}" "${plugin}"${extra} "$@"\n`);
  await chmod(path, 0o755);
}
