// How fast `kubectl nodedisks list|status` answers next to `kubectl get nodedisks`, on the same control
// plane with N NodeDisks (default 300 and 10000). `npm run bench:plugin` (SIZES=300,10000 RUNS=7).
// Each command runs RUNS times after one warm-up (kubectl's discovery cache, Node's compile cache);
// the median wall time is reported. Output goes to /dev/null: we time answering, not the terminal.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { API_VERSION, FIELD_MANAGER, KIND, LABEL_DISK, LABEL_NODE } from '../api/constants.ts';
import { NodeDiskClient } from '../api/client.ts';
import { diskPath, nodeDiskName } from '../api/names.ts';
import { loadKubeConfig } from '../lib/kube/kubeconfig.ts';
import { RestClient } from '../lib/kube/rest.ts';
import { ControlPlane } from '../hack/controlplane/controlplane.ts';
import { REPO_ROOT } from '../hack/lib/paths.ts';

const SIZES = (process.env.SIZES ?? '300,10000').split(',').map(Number);
const RUNS = Number(process.env.RUNS ?? 7);
const BIN = join(REPO_ROOT, 'dist', 'bin');

function time(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    execFile(cmd, args, { env, maxBuffer: 512 * 1024 * 1024 }, (err, _out, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')}: ${stderr}`));
      else resolve(performance.now() - started);
    });
  });
}

async function median(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  await time(cmd, args, env);
  const xs: number[] = [];
  for (let i = 0; i < RUNS; i++) xs.push(await time(cmd, args, env));
  xs.sort((a, b) => a - b);
  return xs[Math.floor(xs.length / 2)]!;
}

const cp = await ControlPlane.start();
try {
  const client = new NodeDiskClient(new RestClient(loadKubeConfig({ kubeconfig: cp.admin().kubeconfig })));
  const env = { ...process.env, PATH: `${BIN}:${process.env.PATH}`, KUBECONFIG: cp.admin().kubeconfig };
  let created = 0;
  console.log(`Kubernetes ${cp.binaries.kubernetesVersion}; median of ${RUNS} runs after a warm-up`);
  console.log('| NodeDisks | kubectl get nodedisks | kubectl nodedisks list | ratio | kubectl nodedisks status (summary) | ratio |');
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (const size of SIZES) {
    // Create up to `size` disks, 100 per node, 16 requests in flight.
    const todo: number[] = [];
    for (let i = created; i < size; i++) todo.push(i);
    const worker = async () => {
      for (let i = todo.shift(); i !== undefined; i = todo.shift()) {
        const node = `bench-node-${Math.floor(i / 100)}`;
        const disk = `disk${i % 100}`;
        const name = nodeDiskName(node, disk);
        await client.create(
          {
            apiVersion: API_VERSION,
            kind: KIND,
            metadata: { name, labels: { [LABEL_NODE]: node, [LABEL_DISK]: disk } },
            spec: { nodeName: node, diskID: disk, path: diskPath('/var/lib/node-disks-manager/disks', disk) },
          },
          { fieldManager: FIELD_MANAGER.agent },
        );
        await client.applyStatus(
          {
            apiVersion: API_VERSION,
            kind: KIND,
            metadata: { name },
            status: { node: { phase: 'Available', capacityBytes: 67108864, lastSeenTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') } },
          },
          { fieldManager: FIELD_MANAGER.agent },
        );
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    created = size;
    const kubectlGet = await median('kubectl', ['get', 'nodedisks'], env);
    const pluginList = await median('kubectl', ['nodedisks', 'list'], env);
    const pluginStatus = await median('kubectl', ['nodedisks', 'status'], env);
    const ms = (x: number) => `${x.toFixed(0)} ms`;
    console.log(`| ${size} | ${ms(kubectlGet)} | ${ms(pluginList)} | ${(pluginList / kubectlGet).toFixed(2)} | ${ms(pluginStatus)} | ${(pluginStatus / kubectlGet).toFixed(2)} |`);
  }
  const version = await median('kubectl', ['version', '--client'], env);
  const pluginVersion = await median('kubectl', ['nodedisks', 'version'], env);
  console.log(`\nno API call: kubectl version --client ${version.toFixed(0)} ms, kubectl nodedisks version ${pluginVersion.toFixed(0)} ms`);
} finally {
  await cp.stop();
}
