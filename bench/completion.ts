// How fast shell completion offers NodeDisk names on a large cluster: NodeDisks spread over NODES nodes
// (the scale of ADR 23: tens of thousands over 200), completing the names of the last node in name order, by
// `--node X` and by a typed prefix. `npm run bench:completion` (SIZES=10000,50000 NODES=200 RUNS=5).
// Runs the bundled plugin directly (`kubectl-nodedisks __complete …`, as kubectl_complete-nodedisks does).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { FIELD_MANAGER } from '../api/constants.ts';
import { NodeDiskClient } from '../api/client.ts';
import { nodeDiskName } from '../api/names.ts';
import { loadKubeConfig } from '../lib/kube/kubeconfig.ts';
import { RestClient } from '../lib/kube/rest.ts';
import { newNodeDisk } from '../hack/lib/nodedisks.ts';
import { ControlPlane } from '../hack/controlplane/controlplane.ts';
import { REPO_ROOT } from '../hack/lib/paths.ts';

const SIZES = (process.env.SIZES ?? '10000,50000').split(',').map(Number);
const NODES = Number(process.env.NODES ?? 200);
const RUNS = Number(process.env.RUNS ?? 5);
const BIN = join(REPO_ROOT, 'dist', 'bin', 'kubectl-nodedisks');

function complete(words: string[], env: NodeJS.ProcessEnv): Promise<{ ms: number; names: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    execFile(BIN, ['__complete', ...words], { env, maxBuffer: 512 * 1024 * 1024 }, (err, out, stderr) => {
      if (err) reject(new Error(`${words.join(' ')}: ${stderr}`));
      else resolve({ ms: performance.now() - started, names: out.split('\n').filter((l) => l && !l.startsWith(':')).length });
    });
  });
}

async function median(words: string[], env: NodeJS.ProcessEnv): Promise<{ ms: number; names: number }> {
  await complete(words, env);
  const runs: { ms: number; names: number }[] = [];
  for (let i = 0; i < RUNS; i++) runs.push(await complete(words, env));
  runs.sort((a, b) => a.ms - b.ms);
  return runs[Math.floor(runs.length / 2)]!;
}

const cp = await ControlPlane.start();
try {
  const client = new NodeDiskClient(new RestClient(loadKubeConfig({ kubeconfig: cp.admin().kubeconfig })));
  const env = { ...process.env, KUBECONFIG: cp.admin().kubeconfig };
  console.log(`Kubernetes ${cp.binaries.kubernetesVersion}; NodeDisks over ${NODES} nodes; median of ${RUNS} runs after a warm-up`);
  console.log('| NodeDisks | `__complete status --node <last node> ""` | `__complete status node-disk-<last node>-` | names offered |');
  console.log('| --- | --- | --- | --- |');
  let created = 0;
  for (const size of SIZES) {
    // Top up to `size`, round robin over the nodes.
    const todo: number[] = [];
    for (let i = created; i < size; i++) todo.push(i);
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        for (let i = todo.shift(); i !== undefined; i = todo.shift()) {
          await client.create(newNodeDisk(`bench-node-${String(i % NODES).padStart(3, '0')}`, `disk${i}`), { fieldManager: FIELD_MANAGER.agent });
        }
      }),
    );
    created = size;
    const last = `bench-node-${String(NODES - 1).padStart(3, '0')}`;
    const byNode = await median(['status', '--node', last, ''], env);
    const byPrefix = await median(['status', nodeDiskName(last, 'x').slice(0, -1)], env);
    const ms = (x: number) => `${x.toFixed(0)} ms`;
    console.log(`| ${size} | ${ms(byNode.ms)} | ${ms(byPrefix.ms)} | ${byNode.names} / ${byPrefix.names} of ${Math.ceil(size / NODES)} |`);
  }
} finally {
  await cp.stop();
}
