// A node's containerd and kubelet configuration files: each node its own state dirs (bind-mounted over
// the hard-coded paths in its mount namespace), its own cgroup subtree, and its address on the bridge.
import { join } from 'node:path';
import { dump } from 'js-yaml';
import type { NodeSpec } from './topology.ts';

export function containerdConfig(n: NodeSpec): string {
  return `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/nodedisks-pause:1"
  # runc cannot write oom_score_adj below its parent's without CAP_SYS_RESOURCE, which root lacks here
  # ("can't get final child's PID from pipe: EOF"): keep the container's score at least the parent's.
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${join(n.dir, 'cni')}"
`;
}

export function kubeletConfig(n: NodeSpec): string {
  return dump({
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    // This machine has cgroup v1, which kubelet 1.35 refuses unless told.
    failCgroupV1: false,
    cgroupDriver: 'cgroupfs',
    // Each node its own cgroup subtree (ours), so three kubelets do not fight over /kubepods.
    cgroupRoot: `/${n.cgroup}`,
    address: n.ip,
    healthzBindAddress: '127.0.0.1',
    readOnlyPort: 0,
    // Reachable only inside the switch namespace: the API server (kubectl logs/exec) needs no client certificate.
    authentication: { anonymous: { enabled: true }, webhook: { enabled: false } },
    authorization: { mode: 'AlwaysAllow' },
    containerRuntimeEndpoint: 'unix:///run/containerd/containerd.sock',
    volumePluginDir: join(n.dir, 'volume-plugins'),
    failSwapOn: false,
    makeIPTablesUtilChains: false,
    protectKernelDefaults: false,
    // A shared dev machine's disk is often fuller than eviction's defaults allow.
    evictionHard: { 'memory.available': '50Mi', 'nodefs.available': '1%', 'imagefs.available': '1%', 'nodefs.inodesFree': '1%' },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    resolvConf: '/etc/resolv.conf',
    serializeImagePulls: false,
    localStorageCapacityIsolation: true,
    // The kubelet tells a pod of an abnormal volume (NodeGetVolumeStats' volume condition) with a
    // VolumeConditionAbnormal event only under this gate, alpha and off by default.
    featureGates: { CSIVolumeHealth: true },
  });
}

/**
 * The node's CNI network for pods that are not hostNetwork (the baseline Pod Security Standard forbids
 * hostNetwork): the reference `bridge` plugin with host-local addresses from the node's range. The bridge
 * is made inside the node's network namespace and no masquerading is asked for, so nothing of the host
 * (links, iptables) is touched; containerd's CRI adds the loopback itself.
 */
export function podNetworkConfig(n: NodeSpec): string {
  return JSON.stringify({
    cniVersion: '1.0.0',
    name: 'nodedisks-pods',
    plugins: [
      {
        type: 'bridge',
        bridge: 'ndcpods0',
        isGateway: true,
        ipMasq: false,
        ipam: { type: 'host-local', ranges: [[{ subnet: n.podCidr }]], routes: [{ dst: '0.0.0.0/0' }] },
      },
    ],
  });
}
