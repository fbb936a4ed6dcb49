// `npm run controlplane`, and the first step of `npm start` and `npm run test:integration`: finds or
// builds (once) the test control plane (etcd, kube-apiserver, kubectl) and says which one is used.
// Only that: krew and the health-check runner are built where they are used (see hack/setup.ts).
import { ensureBinaries } from './binaries.ts';

try {
  const started = Date.now();
  const b = await ensureBinaries();
  console.error(`control plane: Kubernetes ${b.kubernetesVersion}, etcd ${b.etcdVersion} (${b.source}: ${b.dir}) ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
} catch (err) {
  console.error(`error: ${(err as Error).message}`);
  process.exit(1);
}
