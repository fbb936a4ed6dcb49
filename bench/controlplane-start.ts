// Measures the test control plane: how long a warm start takes (etcd + kube-apiserver ready, CRD and
// RBAC installed) and how long a bare start takes, over several runs. `npm run bench:controlplane`.
// The cold build time is printed by `npm run controlplane` on a machine without the cache.
import { ControlPlane } from '../hack/controlplane/controlplane.ts';

const runs = Number(process.env.RUNS ?? 5);

async function measure(install: boolean): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    const cp = await ControlPlane.start({ install });
    times.push(performance.now() - started);
    await cp.stop();
  }
  return times;
}

function summary(label: string, times: number[]): string {
  const sorted = [...times].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
  return `${label}: median ${(median / 1000).toFixed(2)} s, min ${((sorted[0] ?? 0) / 1000).toFixed(2)} s, max ${((sorted.at(-1) ?? 0) / 1000).toFixed(2)} s over ${times.length} runs`;
}

const bare = await measure(false);
const installed = await measure(true);
console.log(summary('warm start, etcd + kube-apiserver ready', bare));
console.log(summary('warm start + CRD, namespace and RBAC installed with kubectl', installed));
