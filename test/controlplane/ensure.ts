// `npm run controlplane`: builds (once) or finds the test control plane and says which one.
import { ensureBinaries } from './binaries.ts';

try {
  const started = Date.now();
  const b = await ensureBinaries((line) => console.error(line));
  console.error(
    `control plane: Kubernetes ${b.kubernetesVersion}, etcd ${b.etcdVersion} (${b.source}: ${b.dir}) ready in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
} catch (err) {
  console.error(`error: ${(err as Error).message}`);
  process.exit(1);
}
