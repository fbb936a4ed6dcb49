// What goes into each NodeDisks image: the one definition. The Dockerfile is generated from it
// (`node hack/dockerfile.ts`; a unit test fails when the committed Dockerfile drifts), and the local
// cluster builds its images without Docker from it (hack/cluster/images.ts). See docs/adr/0019-images.md.

/** The run-time layout both builds share: the distroless Node layout. */
export const NODE_PATH = '/nodejs/bin/node';
export const APP_DIR = '/app';
/** distroless/nodejs24-debian12: Node 24 and the Debian 12 libraries it links, no shell, no package manager. */
export const BASE_IMAGE = 'gcr.io/distroless/nodejs24-debian12';

/**
 * The node side's runtime: the one lower layer the agent's and the driver's images share (docs/adr/0049).
 * Both run in every node's agent pod; with the Node binary in one layer, a node keeps its pages once for
 * the two processes. Debian slim, because the driver's image installs Debian's storage tools on top.
 */
export const NODE_RUNTIME = {
  stage: 'node-runtime',
  base: 'debian:bookworm-slim',
  why:
    "The node side's runtime, the lower layers both of the node's images start from: Debian slim and the build\n" +
    "stage's Node binary. The agent and csi-node run in one pod on every node; from one layer, a node holds\n" +
    "the Node binary's pages in memory once for both processes (docs/adr/0049).",
} as const;

export interface ImageSpec {
  /** The Dockerfile target and the image's repository name. */
  target: 'operator' | 'agent';
  name: string;
  /** The esbuild output copied to APP_DIR (npm run build). */
  distDir: string;
  main: string;
  /** uid:gid the container runs as. */
  user: string;
  /**
   * What the image starts from: a distroless tag (`nonroot` has /home/nonroot owned by 65532), or the node
   * side's runtime layer (NODE_RUNTIME), shared with the driver's image.
   */
  base: { distrolessTag: 'nonroot' } | 'node-runtime';
  port: number;
  /** Node options before the program in the entrypoint. */
  nodeFlags: readonly string[];
  /** Why this user: written above the stage in the Dockerfile. */
  why: string;
}

export const IMAGES: readonly ImageSpec[] = [
  {
    target: 'operator',
    name: 'node-disks-operator',
    distDir: 'dist/controller',
    main: 'node-disks-operator.mjs',
    user: '65532:65532',
    base: { distrolessTag: 'nonroot' },
    port: 8080,
    // The heap is sized from the container's memory limit, half of it, leaving the rest for the code,
    // buffers and sockets (docs/adr/0023-controller-at-scale.md); Node's default is the whole limit.
    nodeFlags: ['--max-old-space-size-percentage=50'],
    why: 'The controller only talks to the API server: it runs as nonroot 65532.',
  },
  {
    target: 'agent',
    name: 'node-disks-agent',
    distDir: 'dist/agent',
    main: 'node-disks-agent.mjs',
    user: '0:0',
    base: 'node-runtime',
    port: 8080,
    // The agent's V8 flags are in the DaemonSet's NODE_OPTIONS, where an operator can tune them (ADR 24),
    // but for this one, which NODE_OPTIONS refuses: a heap that grows less and gives back sooner, for a
    // process that does little work (docs/adr/0006-agent-design.md, docs/benchmarks.md).
    nodeFlags: ['--optimize-for-size'],
    why:
      'The agent runs as UID 0 with no capabilities (see kustomize/agent/daemonset.yaml): it must write\n' +
      "marker files in the host's root-owned disk dir (/var/lib/node-disks-manager/disks, 0755 root).",
  },
];

/** Files of the repository copied into APP_DIR of every image: the license and its notice. */
export const LEGAL_FILES = ['LICENSE', 'NOTICE'] as const;

/** The image's entrypoint. */
export function entrypoint(img: ImageSpec): string[] {
  return [NODE_PATH, ...img.nodeFlags, `${APP_DIR}/${img.main}`];
}

export const ENV = ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/nodejs/bin', 'NODE_ENV=production'];

/**
 * The CSI driver's image: one program for both sides (`node-disks-csi controller|node`). The node side
 * attaches disk images to loop devices, formats and mounts them, with Debian's own tools, so it starts from
 * the node side's runtime (Debian 12 slim and the build stage's Node binary) and adds those packages.
 */
export interface CsiImageSpec {
  target: 'node-disks-csi';
  name: string;
  distDir: string;
  main: string;
  user: string;
  port: number;
  /** Debian packages the Dockerfile installs: what provides `tools`. */
  packages: readonly string[];
  /** The programs the node side runs, at their Debian 12 paths (the local cluster copies this host's, with the libraries ldd names). */
  tools: readonly string[];
  /** Copied too when this host has them; the node side works without. */
  optionalTools: readonly string[];
  /** Other names of a tool: [link, what it points to], both in the same folder. */
  links: readonly (readonly [link: string, target: string])[];
  /** Configuration files the tools read (mke2fs.conf: the ext4 defaults mkfs.ext4 formats with). */
  files: readonly string[];
  /** nodedisks-toolrunner (csi/toolrunner, Go, standard library only): where the image has it, built from that module. */
  toolRunner: { path: string; moduleDir: string; goImage: string };
  why: string;
}

export const CSI_IMAGE: CsiImageSpec = {
  target: 'node-disks-csi',
  name: 'node-disks-csi',
  distDir: 'dist/csi',
  main: 'node-disks-csi.mjs',
  user: '0:0',
  port: 8082,
  packages: ['mount', 'util-linux', 'e2fsprogs', 'xfsprogs'],
  tools: ['/usr/sbin/losetup', '/usr/bin/mount', '/usr/bin/umount', '/usr/sbin/blkid', '/usr/sbin/mke2fs', '/usr/sbin/blkdiscard', '/usr/sbin/blockdev', '/usr/bin/partx'],
  optionalTools: ['/usr/sbin/e2fsck'],
  // Every filesystem the node side formats (csi/node-volumes.ts supportedFsTypes) needs its mkfs name.
  links: [
    ['/usr/sbin/mkfs.ext4', 'mke2fs'],
    ['/usr/sbin/mkfs.ext3', 'mke2fs'],
    ['/usr/sbin/fsck.ext4', 'e2fsck'],
    ['/usr/sbin/fsck.ext3', 'e2fsck'],
  ],
  files: ['/etc/mke2fs.conf'],
  // csi-node starts the tools through it with --tool-runner (docs/adr/0048).
  toolRunner: { path: '/usr/local/bin/nodedisks-toolrunner', moduleDir: 'csi/toolrunner', goImage: 'golang:1.26-bookworm' },
  why:
    'The CSI driver, both sides in one program. Its node side runs as UID 0 in a privileged container: it\n' +
    "attaches disk images to loop devices, formats and mounts them, and wipes drives (Debian's util-linux, e2fsprogs and\n" +
    'xfsprogs, hence a Debian base); the controller side only talks to the API server and the provisioner\n' +
    'sidecar.',
};
