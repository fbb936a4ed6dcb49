// krew-manifest.yaml: the plugin's krew manifest, one platform entry per archive built, with its sha256,
// and the caveats krew prints after installing.
import { dump } from 'js-yaml';
import pkg from '../../package.json' with { type: 'json' };
import { archiveFiles } from './archive.ts';
import { executableName, type Platform } from './platforms.ts';

const VERSION = `v${pkg.version}`;
const DOWNLOAD_BASE = `https://github.com/nodedisks/nodedisks/releases/download/${VERSION}`;

export interface Built {
  platform: Platform;
  archive: string;
  sha256: string;
}

/**
 * What krew prints after installing. krew links only the manifest's one `bin` onto PATH, never a second
 * executable (kubernetes-sigs/krew#812), so kubectl's plugin completion needs the helper copied there by
 * hand; the line below does it (test/integration/krew-completion.test.ts runs it). A copy, not a link:
 * the helper calls kubectl-nodedisks by name, so it keeps working after krew upgrade replaces the store.
 */
export const COMPLETION_CAVEAT = 'cp "$(dirname "$(readlink -f "${KREW_ROOT:-$HOME/.krew}/bin/kubectl-nodedisks")")/kubectl_complete-nodedisks" "${KREW_ROOT:-$HOME/.krew}/bin/"';
/** What a user must do by hand after `kubectl krew install nodedisks`; krew prints it after installing. */
export const CAVEATS = `This plugin needs NodeDisks installed in the cluster (the NodeDisk CRD, the controller and the
node agents: kubectl apply --server-side -k kustomize/default from the project). Without the CRD every
command fails with "the NodeDisk API (nodedisks.localtest.example.com) is not installed in this cluster".

RBAC: reading (list, status, wait) needs the ClusterRole nodedisks-viewer, reserving and releasing
nodedisks-editor. Ask your cluster admin to bind one, for example:
  kubectl create clusterrolebinding nodedisks-$USER --clusterrole=nodedisks-editor --user=$USER
status also reads the agents' heartbeat Leases: the Role nodedisks-heartbeat-viewer in the system
namespace (without it, status says the agents' liveness is unknown):
  kubectl create rolebinding -n node-disks-system nodedisks-heartbeat-viewer-$USER --role=nodedisks-heartbeat-viewer --user=$USER

Completion: kubectl completes plugin arguments through kubectl_complete-nodedisks on your PATH, which krew
does not put on PATH by itself. Copy it next to the plugin once (Linux, macOS):
  ${COMPLETION_CAVEAT}
(on Windows, copy kubectl_complete-nodedisks.cmd from %USERPROFILE%\\.krew\\store\\nodedisks\\${VERSION}
to %USERPROFILE%\\.krew\\bin).

macOS: the executable is not code-signed. If macOS refuses to run it, sign it ad hoc once:
  codesign --force --sign - "\${KREW_ROOT:-$HOME/.krew}/store/nodedisks/${VERSION}/kubectl-nodedisks"
`;

export function manifest(built: Built[]): string {
  const doc = {
    apiVersion: 'krew.googlecontainertools.github.com/v1alpha2',
    kind: 'Plugin',
    metadata: { name: 'nodedisks' },
    spec: {
      version: VERSION,
      homepage: 'https://github.com/nodedisks/nodedisks',
      shortDescription: 'List, reserve and release node-local disks',
      description:
        'Lists, inspects, reserves, releases and waits for NodeDisks (node-local disk images\n' +
        'discovered by the NodeDisks node agent), and writes the same changes as Kustomize\n' +
        'overlays for Argo CD or Flux.\n',
      caveats: CAVEATS,
      platforms: built.map((b) => ({
        selector: { matchLabels: { os: b.platform.os, arch: b.platform.arch } },
        uri: `${DOWNLOAD_BASE}/kubectl-nodedisks_${b.platform.os}_${b.platform.arch}.tar.gz`,
        sha256: b.sha256,
        bin: executableName(b.platform),
        files: archiveFiles(b.platform).map((from) => ({ from, to: '.' })),
      })),
    },
  };
  return `# Written by \`npm run release\` (hack/release/release.ts): the sha256 values are those of the archives it built.\n${dump(doc, { lineWidth: -1, noRefs: true })}`;
}
