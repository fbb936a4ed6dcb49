// mkfs.xfs for the local cluster's node-disks-csi image: the node side offers xfs where mkfs.xfs is, and
// the image is made of this host's tools (./images.ts), which need not include xfsprogs. Debian 12's
// xfsprogs and the two libraries it needs that a host without it lacks (libinih, liburcu) are fetched at
// pinned versions into the cache (../lib/debian-package.ts), never installed on the host; the production
// image installs the same package (hack/lib/image-spec.ts).
import { join } from 'node:path';
import { ensureDebianFiles } from '../lib/debian-package.ts';
import { goPlatform } from '../lib/gobuild.ts';
import { cacheRoot } from '../lib/paths.ts';

/** Debian's multiarch library dir of this machine's architecture. */
const LIB = `usr/lib/${goPlatform().arch === 'arm64' ? 'aarch64' : 'x86_64'}-linux-gnu`;

/** Each package, its pinned version, and its files: in the package, and where the image has them (by the name the loader asks for). */
export const XFS_PACKAGES = [
  { pkg: 'xfsprogs', version: '6.1.0-1', libraries: false, files: [['sbin/mkfs.xfs', 'usr/sbin/mkfs.xfs']] },
  { pkg: 'libinih1', version: '55-1', libraries: true, files: [[`${LIB}/libinih.so.55`, `${LIB}/libinih.so.1`]] },
  { pkg: 'liburcu8', version: '0.13.2-1', libraries: true, files: [[`${LIB}/liburcu.so.8.0.0`, `${LIB}/liburcu.so.8`]] },
] as const;

export interface XfsFile {
  /** The file in the cache. */
  cached: string;
  /** Its path in the image, without the leading slash. */
  imagePath: string;
  mode: number;
}

/** mkfs.xfs and its libraries, fetched into the cache first if needed. Throws saying what is missing. */
export async function ensureXfsprogs(log?: (line: string) => void): Promise<XfsFile[]> {
  const out: XfsFile[] = [];
  for (const p of XFS_PACKAGES) {
    const dir = await ensureDebianFiles({
      pkg: p.pkg,
      version: p.version,
      files: p.files.map(([inPkg]) => inPkg),
      libraries: p.libraries,
      dir: join(cacheRoot(), 'xfsprogs', `${p.pkg}-${p.version}-linux-${goPlatform().arch}`),
      setup: 'npm run setup -- xfsprogs',
      ...(log ? { log } : {}),
    });
    for (const [inPkg, imagePath] of p.files) out.push({ cached: join(dir, inPkg.split('/').at(-1)!), imagePath, mode: p.libraries ? 0o644 : 0o755 });
  }
  return out;
}
