// The first step of `npm run test:e2e`: builds (once, cached) everything the local cluster needs, so
// that the e2e tests' deadlines measure the cluster, not a cold Go build (many minutes, ADR 16); and
// refuses early, with the reason, when not run as root.
import { ensureBinaries, ensureNodeBinaries } from '../controlplane/binaries.ts';
import { ensureCsiProvisioner } from '../csi/tools.ts';
import { ensureHelm, helmVersions } from '../helm/helm.ts';
import { ensureXfsprogs } from './xfsprogs.ts';

if (process.getuid?.() !== 0) {
  console.error('error: npm run test:e2e must run as root: it starts the local cluster (network namespaces, cgroups, mounts); run it with sudo');
  process.exit(1);
}
try {
  const started = Date.now();
  const cp = await ensureBinaries();
  const nb = await ensureNodeBinaries();
  // The local cluster's csi-provisioner:dev image is built from it.
  const provisioner = await ensureCsiProvisioner();
  // test/e2e/helm.test.ts and `npm run cluster -- --install=helm` use the pinned helm.
  await ensureHelm();
  // The node-disks-csi image's mkfs.xfs.
  await ensureXfsprogs();
  console.error(
    `local cluster binaries: Kubernetes ${nb.kubernetesVersion} (control plane ${cp.source}, node binaries ${nb.source}: ${nb.dir}), helm ${(await helmVersions()).helm}, ${provisioner} ready in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
} catch (err) {
  console.error(`error: ${(err as Error).message}`);
  process.exit(1);
}
