// The local cluster's CSI images (buildCsiImages in hack/cluster/images.ts): the driver's holds the Node
// runtime, dist/csi as it is, and this host's losetup, mount, umount, blkid, mkfs.ext4 with every library
// they load (each tool runs from the image's own files, through the image's dynamic loader) and the
// mke2fs.conf mkfs.ext4 formats with; csi-provisioner's is the one binary. Both reproducible; an empty
// dist/csi is refused saying what to run. A dist/ of the test's own stands in for npm run build's.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { buildCsiImages, buildImages, CSI_PROVISIONER_IMAGE, imageRef } from '../../hack/cluster/images.ts';
import { type BuiltImage, type Entry, tar, untar } from '../../hack/cluster/oci.ts';

interface Image {
  config: { User: string; Entrypoint: string[]; Env: string[] };
  /** Each layer's entries, lowest first. */
  layers: Entry[][];
  files: Entry[];
}

/** The image's config and the entries of its layers, lowest first, read back from the OCI archive. */
function open(img: BuiltImage): Image {
  const blobs = new Map(untar(img.archive).flatMap((e) => (e.type === 'file' ? [[e.path, e.content] as const] : [])));
  const blob = (digest: string) => blobs.get(`blobs/sha256/${digest.slice(7)}`)!;
  const index = JSON.parse(blobs.get('index.json')!.toString()) as { manifests: { digest: string }[] };
  const manifest = JSON.parse(blob(index.manifests[0]!.digest).toString()) as { config: { digest: string }; layers: { digest: string }[] };
  const config = (JSON.parse(blob(manifest.config.digest).toString()) as { config: Image['config'] }).config;
  const layers = manifest.layers.map((l) => untar(blob(l.digest)));
  return { config, layers, files: layers.flat() };
}

function distRoot(t: import('ava').ExecutionContext, files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'nodedisks-csi-images-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(join(root, 'dist', 'csi'), { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(root, 'dist', 'csi', name), text);
  // LICENSE and NOTICE are read from the root too.
  for (const f of ['LICENSE', 'NOTICE']) writeFileSync(join(root, f), `${f}\n`);
  return root;
}

test('the driver image runs its tools from its own files, has dist/csi and mke2fs.conf; the provisioner image is its binary; both reproducible', async (t) => {
  t.timeout(10 * 60_000);
  const root = distRoot(t, { 'node-disks-csi.mjs': 'console.log("csi")\n', 'csi.proto': 'syntax = "proto3";\n' });
  const provisioner = join(root, 'csi-provisioner');
  writeFileSync(provisioner, '#!/bin/true\n');
  chmodSync(provisioner, 0o755);
  const first = await buildCsiImages(provisioner, root);
  const [csi, prov] = first.map(open) as [Image, Image];
  t.deepEqual(
    first.map((i) => i.name),
    ['docker.io/library/node-disks-csi:dev', CSI_PROVISIONER_IMAGE],
  );
  t.is(CSI_PROVISIONER_IMAGE, 'docker.io/library/csi-provisioner:dev');
  t.log(first.map((i) => `${i.name} ${(i.layerBytes / 1024 / 1024).toFixed(1)} MiB`).join(', '));

  t.deepEqual(csi.config.Entrypoint, ['/nodejs/bin/node', '/app/node-disks-csi.mjs']);
  t.is(csi.config.User, '0:0');
  const paths = new Set(csi.files.map((e) => e.path));
  for (const p of ['app/node-disks-csi.mjs', 'app/csi.proto', 'app/LICENSE', 'etc/mke2fs.conf', 'nodejs/bin/node']) t.true(paths.has(p), p);
  t.is(csi.files.filter((e) => e.path === 'lib/x86_64-linux-gnu/libc.so.6').length, 1, 'a library shared by node and the tools is in the image once');
  const link = csi.files.find((e) => e.path === 'usr/sbin/mkfs.ext4');
  t.deepEqual(link, { path: 'usr/sbin/mkfs.ext4', type: 'symlink', target: 'mke2fs' });

  // Each tool runs from the extracted layer alone: the image's loader, with only the image's libraries.
  const dir = mkdtempSync(join(tmpdir(), 'nodedisks-csi-layer-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const layerTar = join(dir, 'layer.tar');
  writeFileSync(layerTar, tar(csi.files));
  mkdirSync(join(dir, 'rootfs'));
  execFileSync('tar', ['-xf', layerTar, '-C', join(dir, 'rootfs')]);
  const rootfs = join(dir, 'rootfs');
  const run = (tool: string, args: string[]) =>
    execFileSync(join(rootfs, 'lib64', 'ld-linux-x86-64.so.2'), ['--library-path', join(rootfs, 'lib', 'x86_64-linux-gnu'), join(rootfs, tool), ...args], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  t.regex(run('usr/sbin/losetup', ['--version']), /util-linux/);
  t.regex(run('usr/bin/mount', ['--version']), /util-linux/);
  t.regex(run('usr/bin/umount', ['--version']), /util-linux/);
  t.regex(run('usr/sbin/blkid', ['--version']), /util-linux/);
  // mke2fs -V prints to stderr; a real format of a small file is the proof that it works.
  const img = join(dir, 'fs.img');
  execFileSync('truncate', ['-s', '8M', img]);
  run('usr/sbin/mke2fs', ['-q', '-F', '-t', 'ext4', img]);
  t.regex(execFileSync('blkid', ['-p', '-o', 'value', '-s', 'TYPE', img], { encoding: 'utf8' }), /^ext4$/m);
  t.regex(run('nodejs/bin/node', ['-p', 'process.version']), /^v24\./);

  t.deepEqual(prov.config.Entrypoint, ['/csi-provisioner']);
  t.is(prov.config.User, '0:0');
  t.true(prov.files.some((e) => e.path === 'csi-provisioner' && e.type === 'file' && e.mode === 0o755));

  const second = await buildCsiImages(provisioner, root);
  t.deepEqual(
    second.map((i) => i.digest),
    first.map((i) => i.digest),
  );
});

test("the agent's image and the driver's start from one layer holding the Node binary and its libraries, which neither upper layer replaces", async (t) => {
  t.timeout(10 * 60_000);
  const root = distRoot(t, { 'node-disks-csi.mjs': 'console.log("csi")\n' });
  const [csi] = await buildCsiImages('/bin/true', root);
  // buildImages reads this checkout's dist/ (npm test builds it first).
  const agent = (await buildImages('/bin/true')).find((i) => i.name === imageRef('node-disks-agent'));
  t.truthy(agent);
  t.is(csi!.layerDigests.length, 2);
  t.is(agent!.layerDigests.length, 2);
  t.is(agent!.layerDigests[0], csi!.layerDigests[0], 'one runtime layer: a node unpacks it once and both containers map one Node binary');
  const [runtime, csiOwn] = open(csi!).layers as [Entry[], Entry[]];
  const [, agentOwn] = open(agent!).layers as [Entry[], Entry[]];
  const files = (es: Entry[]) => es.filter((e) => e.type === 'file').map((e) => e.path);
  t.true(files(runtime).includes('nodejs/bin/node'));
  t.true(files(runtime).includes('lib/x86_64-linux-gnu/libc.so.6'));
  for (const [name, own] of [
    ['driver', csiOwn],
    ['agent', agentOwn],
  ] as const) {
    const shadowed = files(own).filter((p) => files(runtime).includes(p));
    t.deepEqual(shadowed, [], `the ${name}'s own layer replaces none of the runtime's files`);
  }
  t.true(files(agentOwn).includes('app/node-disks-agent.mjs'));
  t.true(files(csiOwn).includes('usr/sbin/losetup'));
});

test('an empty dist/csi, or one without the entrypoint, is refused saying what to run', async (t) => {
  const empty = distRoot(t, {});
  await t.throwsAsync(buildCsiImages('/bin/true', empty), {
    message: /^the node-disks-csi image is built from dist\/csi\/, which is empty or missing \(npm run build writes dist\/csi\/node-disks-csi\.mjs\)$/,
  });
  const other = distRoot(t, { 'main.mjs': '' });
  await t.throwsAsync(buildCsiImages('/bin/true', other), { message: /starts \/app\/node-disks-csi\.mjs, which dist\/csi\/ lacks \(it has main\.mjs;/ });
});
