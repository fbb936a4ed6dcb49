// `npm run controlplane`: builds (once) or finds the test binaries and says which ones: the control
// plane (etcd, kube-apiserver, kubectl) and krew, for the krew installation test.
import { ensureKrew } from '../krew/krew.ts';
import { ensureBinaries } from './binaries.ts';

try {
  const started = Date.now();
  const b = await ensureBinaries((line) => console.error(line));
  console.error(
    `control plane: Kubernetes ${b.kubernetesVersion}, etcd ${b.etcdVersion} (${b.source}: ${b.dir}) ready in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  const k = Date.now();
  const krew = await ensureKrew();
  console.error(`krew: ${krew} ready in ${((Date.now() - k) / 1000).toFixed(1)} s`);
} catch (err) {
  console.error(`error: ${(err as Error).message}`);
  process.exit(1);
}
