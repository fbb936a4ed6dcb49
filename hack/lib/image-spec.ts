// What goes into each NodeDisks image: the one definition. The Dockerfile is generated from it
// (`node hack/dockerfile.ts`; a unit test fails when the committed Dockerfile drifts), and the local
// cluster builds its images without Docker from it (hack/cluster/images.ts). See docs/adr/0019-images.md.

/** The run-time layout both builds share: the distroless Node layout. */
export const NODE_PATH = '/nodejs/bin/node';
export const APP_DIR = '/app';
/** distroless/nodejs24-debian12: Node 24 and the Debian 12 libraries it links, no shell, no package manager. */
export const BASE_IMAGE = 'gcr.io/distroless/nodejs24-debian12';

export interface ImageSpec {
  /** The Dockerfile target and the image's repository name. */
  target: 'operator' | 'agent';
  name: string;
  /** The esbuild output copied to APP_DIR (npm run build). */
  distDir: string;
  main: string;
  /** uid:gid the container runs as. */
  user: string;
  /** The distroless tag: `nonroot` has /home/nonroot owned by 65532; the default tag is root's. */
  baseTag: 'nonroot' | 'latest';
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
    baseTag: 'nonroot',
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
    baseTag: 'latest',
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
