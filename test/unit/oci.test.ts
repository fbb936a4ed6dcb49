// The local cluster's OCI writer (hack/cluster/oci.ts): archives that the system tar reads back entry by
// entry, and the same inputs give the same digest (reproducible images).
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ociArchive, ociImage, renamed, tar, untar, type Entry } from '../../hack/cluster/oci.ts';

const entries = (): Entry[] => [
  { path: 'app/main.mjs', type: 'file', content: Buffer.from('console.log(1)\n'), mode: 0o644 },
  { path: 'home/nonroot', type: 'dir', mode: 0o700, uid: 65532, gid: 65532 },
  { path: `deep/${'d'.repeat(90)}/${'f'.repeat(60)}.txt`, type: 'file', content: Buffer.alloc(1000, 1), mode: 0o600 },
  { path: 'bin/sh', type: 'symlink', target: '/nodejs/bin/node' },
];

test('the system tar lists every entry with its owner, mode and size, long paths included', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'oci-test-'));
  try {
    writeFileSync(join(dir, 'x.tar'), tar(entries()));
    const listing = execFileSync('tar', ['-tvf', join(dir, 'x.tar'), '--numeric-owner'], { encoding: 'utf8' });
    t.regex(listing, /-rw-r--r-- 0\/0 +15 .* app\/main\.mjs/);
    t.regex(listing, /drwx------ 65532\/65532 +0 .* home\/nonroot\//);
    t.regex(listing, /-rw------- 0\/0 +1000 .* deep\/d{90}\/f{60}\.txt/);
    t.regex(listing, /lrwxrwxrwx 0\/0 +0 .* bin\/sh -> \/nodejs\/bin\/node/);
    execFileSync('tar', ['-xf', join(dir, 'x.tar'), '-C', dir]);
    t.is(readFileSync(join(dir, 'app/main.mjs'), 'utf8'), 'console.log(1)\n');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the same files give the same image digest, and a changed byte a different one', (t) => {
  const cfg = { entrypoint: ['/nodejs/bin/node', '/app/main.mjs'], user: '65532:65532', env: [] };
  const a = ociArchive('docker.io/library/x:dev', entries(), cfg);
  const b = ociArchive('docker.io/library/x:dev', [...entries()].reverse(), cfg);
  t.is(a.digest, b.digest);
  t.true(a.archive.equals(b.archive));
  const changed = entries();
  changed[0] = { path: 'app/main.mjs', type: 'file', content: Buffer.from('console.log(2)\n'), mode: 0o644 };
  t.not(ociArchive('docker.io/library/x:dev', changed, cfg).digest, a.digest);
});

test('the archive names the image for ctr import and lists its manifest by digest', (t) => {
  const img = ociArchive('docker.io/library/x:dev', entries(), { entrypoint: ['/x'], user: '0:0', env: [] });
  const dir = mkdtempSync(join(tmpdir(), 'oci-test-'));
  try {
    writeFileSync(join(dir, 'img.tar'), img.archive);
    execFileSync('tar', ['-xf', join(dir, 'img.tar'), '-C', dir]);
    const index = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8')) as { manifests: { digest: string; annotations: Record<string, string> }[] };
    t.is(index.manifests[0]?.digest, img.digest);
    t.is(index.manifests[0]?.annotations['io.containerd.image.name'], 'docker.io/library/x:dev');
    const manifest = JSON.parse(readFileSync(join(dir, 'blobs/sha256', img.digest.slice(7)), 'utf8')) as { layers: { size: number }[] };
    t.is(manifest.layers[0]?.size, img.layerBytes);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('two images over the same lower layer list it under one digest, first, and their configs name their layers in order', (t) => {
  const lower = entries();
  const cfg = { entrypoint: ['/x'], user: '0:0', env: [] };
  const a = ociImage('docker.io/library/a:dev', [lower, [{ path: 'app/a.mjs', type: 'file', content: Buffer.from('a'), mode: 0o644 }]], cfg);
  const b = ociImage('docker.io/library/b:dev', [lower, [{ path: 'app/b.mjs', type: 'file', content: Buffer.from('b'), mode: 0o644 }]], cfg);
  t.is(a.layerDigests.length, 2);
  t.is(a.layerDigests[0], b.layerDigests[0]);
  t.not(a.layerDigests[1], b.layerDigests[1]);
  t.is(ociArchive('docker.io/library/one:dev', lower, cfg).layerDigests[0], a.layerDigests[0], 'a one-layer image of the same files has that layer too');
  const blobs = new Map(untar(a.archive).flatMap((e) => (e.type === 'file' ? [[e.path, e.content] as const] : [])));
  const blob = (digest: string) => blobs.get(`blobs/sha256/${digest.slice(7)}`);
  const manifest = JSON.parse(blob(a.digest)!.toString()) as { config: { digest: string }; layers: { digest: string; size: number }[] };
  t.deepEqual(
    manifest.layers.map((l) => l.digest),
    a.layerDigests,
  );
  t.is(
    manifest.layers.reduce((n, l) => n + l.size, 0),
    a.layerBytes,
  );
  const config = JSON.parse(blob(manifest.config.digest)!.toString()) as { rootfs: { diff_ids: string[] }; history: unknown[] };
  t.deepEqual(config.rootfs.diff_ids, a.layerDigests);
  t.is(config.history.length, 2);
  // The upper layer holds its own file and the parents it needs, nothing of the lower one.
  t.deepEqual(
    untar(blob(a.layerDigests[1]!)!).map((e) => e.path),
    ['app', 'app/a.mjs'],
  );
});

test('untar reads back every entry tar wrote, long paths, owners and modes included', (t) => {
  const back = untar(tar(entries()));
  const sorted = [...entries()].sort((a, b) => (a.path < b.path ? -1 : 1));
  t.deepEqual(
    back.map((e) => (e.type === 'symlink' ? e : { ...e, uid: e.uid ?? 0, gid: e.gid ?? 0 })),
    sorted.map((e) => (e.type === 'symlink' ? e : { ...e, uid: e.uid ?? 0, gid: e.gid ?? 0 })),
  );
});

test('a renamed archive imports under the new name with the same manifest, and the system tar still reads it', (t) => {
  const img = ociArchive('docker.io/library/x:dev', entries(), { entrypoint: ['/x'], user: '0:0', env: [] });
  const old = renamed(img, 'docker.io/library/x:prev');
  t.is(old.name, 'docker.io/library/x:prev');
  t.is(old.digest, img.digest);
  const dir = mkdtempSync(join(tmpdir(), 'oci-test-'));
  try {
    writeFileSync(join(dir, 'img.tar'), old.archive);
    execFileSync('tar', ['-xf', join(dir, 'img.tar'), '-C', dir]);
    const index = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8')) as { manifests: { digest: string; annotations: Record<string, string> }[] };
    t.is(index.manifests[0]?.digest, img.digest);
    t.deepEqual(index.manifests[0]?.annotations, { 'io.containerd.image.name': 'docker.io/library/x:prev', 'org.opencontainers.image.ref.name': 'prev' });
    t.true(readFileSync(join(dir, 'blobs/sha256', img.digest.slice(7))).length > 0);
    t.deepEqual(
      untar(old.archive).filter((e) => e.path !== 'index.json'),
      untar(img.archive).filter((e) => e.path !== 'index.json'),
      'every blob as it was',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
