// A small OCI image writer: uncompressed layers from lists of files, an image config, a manifest,
// and an OCI archive (oci-layout + index.json + blobs) that `ctr images import` and `docker load`
// accept. Reproducible by construction: entries sorted, every timestamp 0, owner 0:0 unless given, no
// "created" field, so the same inputs give the same digest.

import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';

export type Entry =
  | { path: string; type: 'file'; content: Buffer; mode: number; uid?: number; gid?: number }
  | { path: string; type: 'dir'; mode: number; uid?: number; gid?: number }
  | { path: string; type: 'symlink'; target: string };

function octal(n: number, width: number): string {
  return n.toString(8).padStart(width - 1, '0') + '\0';
}

function header(name: string, opts: { size: number; mode: number; uid: number; gid: number; typeflag: string; linkname?: string }): Buffer {
  const h = Buffer.alloc(512, 0);
  let prefix = '';
  let base = name;
  if (Buffer.byteLength(name) > 100) {
    // ustar splits a long name at a '/' into prefix (155) and name (100).
    const cut = name.lastIndexOf('/', 155);
    if (cut <= 0 || Buffer.byteLength(name.slice(cut + 1)) > 100) throw new Error(`path too long for a tar header: ${name}`);
    prefix = name.slice(0, cut);
    base = name.slice(cut + 1);
  }
  h.write(base, 0, 100, 'utf8');
  h.write(octal(opts.mode & 0o7777, 8), 100, 'ascii');
  h.write(octal(opts.uid, 8), 108, 'ascii');
  h.write(octal(opts.gid, 8), 116, 'ascii');
  h.write(octal(opts.size, 12), 124, 'ascii');
  h.write(octal(0, 12), 136, 'ascii'); // mtime 0: reproducible
  h.write('        ', 148, 'ascii'); // checksum placeholder
  h.write(opts.typeflag, 156, 'ascii');
  if (opts.linkname) h.write(opts.linkname, 157, 100, 'utf8');
  h.write('ustar\0', 257, 'ascii');
  h.write('00', 263, 'ascii');
  h.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(octal(sum, 7) + ' ', 148, 'ascii');
  return h;
}

/** A tar archive of the entries (paths without a leading '/'), sorted, parents listed before children. */
export function tar(entries: Entry[]): Buffer {
  const parts: Buffer[] = [];
  const sorted = [...entries].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  for (const e of sorted) {
    const path = e.path.replace(/^\/+/, '');
    if (e.type === 'dir') {
      parts.push(header(`${path}/`, { size: 0, mode: e.mode, uid: e.uid ?? 0, gid: e.gid ?? 0, typeflag: '5' }));
    } else if (e.type === 'symlink') {
      parts.push(header(path, { size: 0, mode: 0o777, uid: 0, gid: 0, typeflag: '2', linkname: e.target }));
    } else {
      parts.push(header(path, { size: e.content.length, mode: e.mode, uid: e.uid ?? 0, gid: e.gid ?? 0, typeflag: '0' }));
      parts.push(e.content);
      const pad = (512 - (e.content.length % 512)) % 512;
      if (pad) parts.push(Buffer.alloc(pad));
    }
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

/** Adds the parent directories every entry needs (mode 0755, root) that the list does not have. */
export function withParents(entries: Entry[]): Entry[] {
  const have = new Set(entries.map((e) => e.path.replace(/^\/+|\/+$/g, '')));
  const out = [...entries];
  for (const e of entries) {
    const parts = e.path.replace(/^\/+/, '').split('/');
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      if (!have.has(dir)) {
        have.add(dir);
        out.push({ path: dir, type: 'dir', mode: 0o755 });
      }
    }
  }
  return out;
}

const sha256 = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

export interface ImageConfig {
  entrypoint: string[];
  /** The default arguments (CMD), for images that are run with a command of the pod's own. */
  cmd?: string[];
  user: string;
  env: string[];
  workingDir?: string;
  exposedPorts?: string[];
  labels?: Record<string, string>;
}

export interface BuiltImage {
  /** The full reference, e.g. docker.io/library/node-disks-agent:dev. */
  name: string;
  /** The manifest digest: what a registry and `crictl images --digests` report. */
  digest: string;
  /** The uncompressed size of its layers in bytes, all of them. */
  layerBytes: number;
  /** Each layer's digest (its diff ID: the layers are not compressed), lowest first. */
  layerDigests: string[];
  archive: Buffer;
}

/** An OCI archive of one image made of one layer. */
export function ociArchive(name: string, entries: Entry[], cfg: ImageConfig): BuiltImage {
  return ociImage(name, [entries], cfg);
}

/**
 * An OCI archive of one image made of these layers, lowest first. Two images whose lower layers are the
 * same files have the same layer digests, and a containerd that holds both unpacks those layers once:
 * their containers then run the same files (one inode, one page cache).
 */
export function ociImage(name: string, layerEntries: Entry[][], cfg: ImageConfig): BuiltImage {
  const layers = layerEntries.map((entries) => tar(withParents(entries)));
  const layerDigests = layers.map(sha256);
  const config = Buffer.from(
    JSON.stringify({
      architecture: ({ x64: 'amd64', arm64: 'arm64' } as Record<string, string>)[process.arch] ?? process.arch,
      os: 'linux',
      config: {
        User: cfg.user,
        Env: cfg.env,
        Entrypoint: cfg.entrypoint,
        ...(cfg.cmd ? { Cmd: cfg.cmd } : {}),
        ...(cfg.workingDir ? { WorkingDir: cfg.workingDir } : {}),
        ...(cfg.exposedPorts ? { ExposedPorts: Object.fromEntries(cfg.exposedPorts.map((p) => [p, {}])) } : {}),
        ...(cfg.labels ? { Labels: cfg.labels } : {}),
      },
      rootfs: { type: 'layers', diff_ids: layerDigests },
      history: layers.map(() => ({ created_by: 'nodedisks hack/cluster/images.ts' })),
    }),
  );
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: sha256(config), size: config.length },
      layers: layers.map((layer, i) => ({ mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: layerDigests[i], size: layer.length })),
    }),
  );
  const digest = sha256(manifest);
  const tag = name.slice(name.lastIndexOf(':') + 1);
  const index = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          digest,
          size: manifest.length,
          annotations: { 'io.containerd.image.name': name, 'org.opencontainers.image.ref.name': tag },
        },
      ],
    }),
  );
  const blob = (b: Buffer): Entry => ({ path: `blobs/sha256/${sha256(b).slice(7)}`, type: 'file', content: b, mode: 0o644 });
  const archive = tar(
    withParents([
      { path: 'oci-layout', type: 'file', content: Buffer.from('{"imageLayoutVersion":"1.0.0"}'), mode: 0o644 },
      { path: 'index.json', type: 'file', content: index, mode: 0o644 },
      ...layers.map(blob),
      blob(config),
      blob(manifest),
    ]),
  );
  return { name, digest, layerBytes: layers.reduce((n, l) => n + l.length, 0), layerDigests, archive };
}

export async function writeArchive(image: BuiltImage, file: string): Promise<void> {
  await writeFile(file, image.archive);
}

/** The entries of a tar archive that tar() wrote (ustar: files, dirs, symlinks; a long name split at its prefix). */
export function untar(archive: Buffer): Entry[] {
  const out: Entry[] = [];
  const field = (h: Buffer, at: number, len: number) =>
    h
      .subarray(at, at + len)
      .toString('utf8')
      .replace(/\0.*$/s, '');
  const num = (h: Buffer, at: number, len: number) => Number.parseInt(field(h, at, len).trim() || '0', 8);
  for (let at = 0; at + 512 <= archive.length; ) {
    const h = archive.subarray(at, at + 512);
    if (h.every((b) => b === 0)) break;
    const prefix = field(h, 345, 155);
    const path = (prefix ? `${prefix}/` : '') + field(h, 0, 100);
    const size = num(h, 124, 12);
    const mode = num(h, 100, 8);
    const [uid, gid] = [num(h, 108, 8), num(h, 116, 8)];
    const type = String.fromCharCode(h[156] ?? 0);
    at += 512;
    if (type === '5') out.push({ path: path.replace(/\/$/, ''), type: 'dir', mode, uid, gid });
    else if (type === '2') out.push({ path, type: 'symlink', target: field(h, 157, 100) });
    else if (type === '0' || type === '\0') out.push({ path, type: 'file', content: Buffer.from(archive.subarray(at, at + size)), mode, uid, gid });
    else throw new Error(`tar entry ${path}: type ${JSON.stringify(type)} is not one tar() writes`);
    at += Math.ceil(size / 512) * 512;
  }
  return out;
}

/**
 * The same image under another name: only index.json's annotations change (the name ctr import gives
 * it), so the manifest digest stays. For two builds that tar() names alike (an older release's images
 * and this checkout's, both `:dev`) to sit side by side in one containerd.
 */
export function renamed(image: BuiltImage, name: string): BuiltImage {
  const tag = name.slice(name.lastIndexOf(':') + 1);
  const entries = untar(image.archive).map((e): Entry => {
    if (e.path !== 'index.json' || e.type !== 'file') return e;
    const index = JSON.parse(e.content.toString('utf8')) as { manifests: { annotations?: Record<string, string> }[] };
    for (const m of index.manifests) m.annotations = { ...m.annotations, 'io.containerd.image.name': name, 'org.opencontainers.image.ref.name': tag };
    return { ...e, content: Buffer.from(JSON.stringify(index)) };
  });
  return { ...image, name, archive: tar(entries) };
}
