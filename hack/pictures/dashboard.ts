// `npm run pictures:dashboard`: docs/pictures/dashboard.svg, the Grafana dashboard drawn from real data. A
// real control plane, three agents and the controller, scraped by the pinned Prometheus; for a few
// minutes disks are reserved by label and by hand, one goes missing, one agent stops and resumes, and a
// label asks for a disk someone else holds; then every panel's queries are read back over that time and
// drawn by gnuplot (./dashboard-plot.ts). gnuplot comes from Debian's gnuplot-nox, installed with
// apt-get when missing (as root, like the local cluster's containerd).
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NodeDiskClient } from '../../api/client.ts';
import { CSI_TOPOLOGY_KEY, DEFAULT_SYSTEM_NAMESPACE, LABEL_AUTO_RESERVE } from '../../api/constants.ts';
import { loadKubeConfig } from '../../lib/kube/kubeconfig.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import { ControlPlane } from '../controlplane/controlplane.ts';
import { REPO_ROOT } from '../lib/paths.ts';
import { type Program, seedDisks, startAgent, startController, startCsiController, startCsiNode } from '../lib/programs.ts';
import { csiClient } from '../lib/csi-client.ts';
import { eventually } from '../lib/wait.ts';
import { Prometheus } from '../promtool/prometheus.ts';
import { allPanels, type Dashboard, gnuplotScript, type Series, substitute } from './dashboard-plot.ts';

const DASHBOARD = join(REPO_ROOT, 'kustomize/components/grafana-dashboard/nodedisks-dashboard.json');
const OUT = join(REPO_ROOT, 'docs/pictures/dashboard.svg');
const NODES = ['node-a', 'node-b', 'node-c'];
const DISKS_PER_NODE = 4;
const DISK_BYTES = 64 * 1024 * 1024;
/** Each step of the scenario lasts this long, so every change shows on the time axis. */
const STEP_MS = Number(process.env.NODEDISKS_PICTURE_STEP_MS ?? 20_000);
/** What Grafana puts for the dashboard's variables: every node, a rate window of a few scrapes. */
const VARS = { node: '.*', __rate_interval: '15s' };

const say = (line: string) => console.log(line);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function ensureGnuplot(): void {
  try {
    execFileSync('gnuplot', ['--version'], { stdio: 'ignore' });
    return;
  } catch {}
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) throw new Error('gnuplot is missing: install it (Debian: apt-get install gnuplot-nox), then run again');
  say('installing gnuplot-nox with apt-get …');
  execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'gnuplot-nox'], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
}

const gnuplot = (script: string) =>
  new Promise<string>((resolve, reject) => {
    const child = execFile('gnuplot', [], { maxBuffer: 64 * 1024 * 1024 }, (err, out, stderr) => (err ? reject(new Error(`gnuplot: ${stderr || err.message}`)) : resolve(out)));
    child.stdin?.end(script);
  });

async function main(): Promise<void> {
  ensureGnuplot();
  const dash = JSON.parse(await readFile(DASHBOARD, 'utf8')) as Dashboard;
  const work = await mkdtemp(join(tmpdir(), 'nodedisks-picture-'));
  const started: Program[] = [];
  let prom: Prometheus | undefined;
  const cp = await ControlPlane.start({ log: say });
  try {
    const client = new NodeDiskClient(new RestClient(loadKubeConfig({ kubeconfig: cp.admin().kubeconfig })));
    const logDir = join(work, 'logs');
    const controller = await startController(cp, { logDir });
    started.push(controller);
    const agents = new Map<string, Program>();
    for (const node of NODES) {
      const dir = join(work, node);
      await seedDisks(dir, DISKS_PER_NODE, DISK_BYTES);
      const agent = await startAgent(cp, { node, diskDir: dir, logDir, heartbeat: '1s', rescanInterval: '1s' });
      agents.set(node, agent);
      started.push(agent);
    }
    // The CSI driver, both sides: asked for capacity per node as csi-provisioner polls it, and for the node's
    // capabilities as a kubelet asks before a volume's stats (its call panels).
    const csiController = await startCsiController(cp, { logDir, csiAddress: join(work, 'csi.sock') });
    started.push(csiController);
    const csiNode = startCsiNode({ logDir, csiAddress: join(work, 'csi-node.sock'), node: 'node-a', diskDir: join(work, 'node-a') });
    started.push(csiNode);
    const port = (p: Program) => eventually(`${p.name}'s http port`, async () => Number(/"httpPort":(\d+)/.exec(p.logsOfThisRun())?.[1]) || undefined, 60_000);
    // Target labels as the PodMonitor and the ServiceMonitor give them (kustomize/components/prometheus-operator).
    prom = await Prometheus.start({
      jobs: [
        { job: 'node-disks-operator', targets: [{ address: `127.0.0.1:${await port(controller)}`, labels: { namespace: DEFAULT_SYSTEM_NAMESPACE, pod: 'node-disks-operator-0' } }] },
        {
          job: 'node-disks-agent',
          targets: await Promise.all(
            NODES.map(async (node) => ({
              address: `127.0.0.1:${await port(agents.get(node) as Program)}`,
              labels: { namespace: DEFAULT_SYSTEM_NAMESPACE, pod: `node-disks-agent-${node}`, node },
            })),
          ),
        },
        // As the two PodMonitors label them: csi-node with the agent's pod and node, the CSI controller with none.
        {
          job: 'node-disks-agent-csi',
          targets: [{ address: `127.0.0.1:${await port(csiNode)}`, labels: { namespace: DEFAULT_SYSTEM_NAMESPACE, pod: 'node-disks-agent-node-a', node: 'node-a' } }],
        },
        {
          job: 'node-disks-csi-controller',
          targets: [{ address: `127.0.0.1:${await port(csiController)}`, labels: { namespace: DEFAULT_SYSTEM_NAMESPACE, pod: 'node-disks-csi-controller-0' } }],
        },
      ],
    });
    const controllerSide = csiClient(join(work, 'csi.sock'), 'Controller');
    const nodeSide = csiClient(join(work, 'csi-node.sock'), 'Node');
    const mountCap = { access_mode: { mode: 'SINGLE_NODE_WRITER' }, mount: { fs_type: 'ext4', mount_flags: [] } };
    const polling = setInterval(() => {
      for (const node of NODES) void controllerSide.call.GetCapacity({ volume_capabilities: [mountCap], accessible_topology: { segments: { [CSI_TOPOLOGY_KEY]: node } } }).catch(() => undefined);
      void nodeSide.call.NodeGetCapabilities({}).catch(() => undefined);
    }, 2000);
    await eventually('every disk reported', async () => (await client.list()).items.filter((d) => d.status?.node?.phase === 'Available').length === NODES.length * DISKS_PER_NODE, 60_000);
    const start = Math.floor(Date.now() / 1000);
    const disks = (await client.list()).items.map((d) => d.metadata.name ?? '').sort();
    const label = (name: string, value: string | null) => client.mergePatch(name, { metadata: { labels: { [LABEL_AUTO_RESERVE]: value } } }, { fieldManager: 'nodedisks-picture' });
    const reserveFor = (name: string, owner: string) => client.mergePatch(name, { spec: { desired: { state: 'Reserved', owner } } }, { fieldManager: 'kubectl-nodedisks' });
    const steps: [string, () => Promise<unknown>][] = [
      ['the label policy reserves three disks', () => Promise.all(disks.slice(0, 3).map((n) => label(n, 'true')))],
      ['team-db reserves two disks by hand', () => Promise.all([reserveFor(disks[4] as string, 'team-db'), reserveFor(disks[5] as string, 'team-db')])],
      ['a disk image of node-b goes missing', () => unlink(join(work, 'node-b', 'disk4.img'))],
      ['the agent of node-c stops (SIGSTOP)', () => (agents.get('node-c') as Program).signal('SIGSTOP')],
      ['the agent of node-c resumes', () => (agents.get('node-c') as Program).signal('SIGCONT')],
      ["a label asks for team-db's disk: refused", () => label(disks[4] as string, 'true')],
      [
        'the missing image is back, the label is removed, one auto disk released',
        async () => {
          await seedDisks(join(work, 'node-b'), DISKS_PER_NODE, DISK_BYTES);
          await label(disks[4] as string, null);
          await label(disks[0] as string, null);
        },
      ],
    ];
    await sleep(STEP_MS);
    for (const [what, step] of steps) {
      say(`${new Date().toISOString()} ${what}`);
      await step();
      await sleep(STEP_MS);
    }
    clearInterval(polling);
    controllerSide.close();
    nodeSide.close();
    const end = Math.floor(Date.now() / 1000);
    const data = new Map<number, Series[][]>();
    for (const p of allPanels(dash)) {
      if (!p.targets?.length || p.id === undefined) continue;
      const answers: Series[][] = [];
      for (const target of p.targets) {
        const res = await fetch(`${prom.url}/api/v1/query_range`, {
          method: 'POST',
          body: new URLSearchParams({ query: substitute(target.expr ?? '', VARS), start: String(start), end: String(end), step: '2' }),
        });
        const json = (await res.json()) as { status: string; error?: string; data: { result: Series[] } };
        if (json.status !== 'success') throw new Error(`panel ${JSON.stringify(p.title)}: ${json.error}`);
        answers.push(json.data.result);
      }
      data.set(p.id, answers);
    }
    await mkdir(join(REPO_ROOT, 'docs/pictures'), { recursive: true });
    await writeFile(OUT, await gnuplot(gnuplotScript(dash, data, { start, end })));
    say(`wrote ${OUT} (${end - start} s of data, ${data.size} panels)`);
  } finally {
    await prom?.stop();
    for (const p of started) await p.signal('SIGCONT').catch(() => {});
    await Promise.all(started.map((p) => p.stop()));
    await cp.stop();
    await rm(work, { recursive: true, force: true });
  }
}

main().catch((err: Error) => {
  console.error(`error: ${err.message}`);
  process.exit(1);
});
