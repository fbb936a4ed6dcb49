// The holder of a node's mount namespace (docs/adr/0016-local-cluster.md): a process that unshares a
// mount namespace, private from the host (nothing mounted in it reaches the host, nothing of the host's
// later mounts reaches it), bind-mounts the node's own dirs over the paths the kubelet and containerd
// hard-code, and sleeps; the node's processes enter it with nsenter.
//
// Inside it, the kubelet's dir is then made shared (rshared): a container with mountPropagation
// Bidirectional (the CSI node plugin) mounts a volume under /var/lib/kubelet in its own namespace, and the
// mount must appear in the node's namespace, where the kubelet and the pod that uses the volume see it.
// The kubelet and containerd refuse Bidirectional on a mount that is not shared. Shared inside the
// holder's namespace only: its peers are the node's containers, never the host.

/** The paths of a node under which its containers may mount with Bidirectional propagation. */
export const SHARED_PATHS = ['/var/lib/kubelet'];

const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/**
 * The holder's command line: binds `mounts` ([path on the host, the node's own dir]), makes `shared`
 * rshared, writes its pid to `pidFile`, then sleeps until killed.
 */
export function holderCommand(mounts: [hostPath: string, nodeDir: string][], shared: string[], pidFile: string): string[] {
  const steps = [
    ...mounts.map(([host, dir]) => `mount --bind ${quote(dir)} ${quote(host)}`),
    ...shared.map((p) => `mount --make-rshared ${quote(p)}`),
    `echo $$ > ${quote(pidFile)}`,
    'exec sleep infinity',
  ];
  return ['unshare', '--mount', '--propagation', 'private', '--', 'sh', '-c', steps.join(' && ')];
}
