// What the local cluster is made of (docs/adr/0016-local-cluster.md): its namespaces, addresses,
// cgroups, node names, and the per-node dirs that stand in for the paths kubelet and containerd hard-code.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export const SWITCH_NS = 'ndc-sw';
export const BRIDGE = 'ndcbr0';
export const SUBNET_PREFIX = '10.213.0';
/** Pods of node 10.213.0.N get 10.214.N.0/24: one range per node, routed by the switch namespace. */
export const POD_SUBNET_PREFIX = '10.214';
export const API_ADDRESS = `${SUBNET_PREFIX}.1`;
export const API_PORT = 6443;
export const CP_CGROUP = 'ndc-cp';
export const NODE_NAMES = ['node-disks-dev-m02', 'node-disks-dev-m03', 'node-disks-dev-m04'];
export const DISK_DIR = '/var/lib/node-disks-manager/disks';

export interface NodeSpec {
  name: string;
  short: string; // m02
  netns: string; // ndc-m02
  cgroup: string; // ndc-m02
  ip: string;
  /** The node's pod network (CNI bridge inside the node's namespace): pods get addresses here. */
  podCidr: string;
  dir: string;
}

export function nodeSpec(dataDir: string, name: string, index: number): NodeSpec {
  const short = name.slice(name.lastIndexOf('-') + 1);
  return {
    name,
    short,
    netns: `ndc-${short}`,
    cgroup: `ndc-${short}`,
    ip: `${SUBNET_PREFIX}.${12 + index}`,
    podCidr: `${POD_SUBNET_PREFIX}.${12 + index}.0/24`,
    dir: join(dataDir, 'nodes', short),
  };
}

/**
 * The host paths the kubelet and containerd use that cannot be configured away, and what each node
 * sees there instead (a dir of its own, bind-mounted in its mount namespace).
 */
export const NODE_MOUNTS: [hostPath: string, nodeSubdir: string][] = [
  ['/var/lib/kubelet', 'kubelet'],
  ['/var/lib/containerd', 'containerd'],
  ['/run/containerd', 'run-containerd'],
  ['/var/log/containers', 'log-containers'],
  ['/var/log/pods', 'log-pods'],
  ['/var/lib/node-disks-manager', 'node-disks-manager'],
  // The CNI's state (libcni's result cache, host-local's leases) and the pods' network namespaces,
  // which containerd mounts under /var/run/netns: each node's own, never the host's.
  ['/var/lib/cni', 'cni-state'],
  ['/var/run/netns', 'netns'],
];

/**
 * The kubelet's plugin dirs, in a node's dir (its /var/lib/kubelet): a CSI node plugin's socket goes under
 * plugins/, its registration socket in plugins_registry/, which the kubelet's plugin watcher watches.
 * Made before the kubelet starts, so the DaemonSet's hostPath volumes find them on the first pod.
 */
export const KUBELET_PLUGIN_DIRS = ['kubelet/plugins_registry', 'kubelet/plugins'];

/** The cgroup of a node's daemons (containerd and the kubelet), beside the kubelet's kubepods. */
export function systemCgroup(node: NodeSpec): string {
  return `${node.cgroup}/system`;
}

export function holderPid(node: NodeSpec): number {
  return Number(readFileSync(join(node.dir, 'holder.pid'), 'utf8').trim());
}
