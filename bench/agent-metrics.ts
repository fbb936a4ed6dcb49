// What /metrics costs the node agent, build against build (ADR 26): the agent run as it ships (an
// esbuild bundle, with the DaemonSet's NODE_OPTIONS as node flags) against a real control plane, DISKS
// disks on its node; once every disk is Available and its disks gauge says so, its RSS, then SCRAPES
// scrapes one after the other (as Prometheus does, on one kept-alive connection) with the agent's CPU
// time (/proc/<pid>/stat, user + system) before and after, its RSS again, and its CPU in IDLE seconds
// without scrapes. The builds take turns (A B A B …), RUNS each, each run a fresh agent on a fresh node.
// `npm run bench:agent-metrics`; AGENT_BUNDLES=name:path,name:path compares builds (default: dist/agent).
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { NodeDiskClient } from '../api/client.ts';
import { DEFAULT_DISK_DIR } from '../api/constants.ts';
import { loadKubeConfig } from '../lib/kube/kubeconfig.ts';
import { RestClient } from '../lib/kube/rest.ts';
import { REPO_ROOT } from '../hack/lib/paths.ts';
import { ControlPlane } from '../hack/controlplane/controlplane.ts';
import { Program, seedDisks } from '../hack/lib/programs.ts';
import { eventually } from '../hack/lib/wait.ts';

const DISKS = Number(process.env.DISKS ?? 30);
const SCRAPES = Number(process.env.SCRAPES ?? 1000);
const RUNS = Number(process.env.RUNS ?? 5);
const IDLE_S = Number(process.env.IDLE ?? 20);
const NODE_FLAGS = (process.env.AGENT_NODE_FLAGS ?? '--jitless --max-semi-space-size=1').split(' ').filter(Boolean);
const BUNDLES = (process.env.AGENT_BUNDLES ?? `this:${join(REPO_ROOT, 'dist/agent/node-disks-agent.mjs')}`).split(',').map((b) => {
  const at = b.indexOf(':');
  return { name: b.slice(0, at), path: b.slice(at + 1) };
});

const status = (pid: number) => readFileSync(`/proc/${pid}/status`, 'utf8');
const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(status(pid))?.[1]) / 1024;
/** CPU seconds (user + system, all threads) the process has used so far. */
const cpuSeconds = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
};
const load = () => loadavg()[0]!.toFixed(2);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

interface Run {
  rssStart: number;
  rssOneScrape: number;
  rssScraped: number;
  cpuPerScrapeMs: number;
  idleCpuPercent: number;
  bytes: number;
  load: string;
}

const cp = await ControlPlane.start();
const work = await mkdtemp(join(tmpdir(), 'nodedisks-agent-metrics-'));
const client = new NodeDiskClient(new RestClient(loadKubeConfig({ kubeconfig: cp.admin().kubeconfig })));
const results = new Map<string, Run[]>(BUNDLES.map((b) => [b.name, []]));

async function once(bundle: { name: string; path: string }, i: number): Promise<Run> {
  const node = `metrics-${bundle.name.replace(/[^a-z0-9]/g, '')}-${i}`;
  const diskDir = join(work, node);
  await seedDisks(diskDir, DISKS, 64 * 1024 * 1024);
  const identity = await cp.agent(node);
  const agent = new Program(node, join(work, `${node}.log`), bundle.path, []);
  agent.start(process.execPath, [
    ...NODE_FLAGS,
    bundle.path,
    `--kubeconfig=${identity.kubeconfig}`,
    `--node-name=${node}`,
    `--disk-dir=${diskDir}`,
    `--host-disk-dir=${DEFAULT_DISK_DIR}`,
    '--http-address=127.0.0.1:0',
  ]);
  try {
    await eventually(
      `${DISKS} disks Available on ${node}`,
      async () => {
        let n = 0;
        for await (const page of client.listPages({ fieldSelector: `spec.nodeName=${node},status.node.phase=Available` })) n += page.items.length;
        return n === DISKS;
      },
      300_000,
      500,
    );
    const port = await eventually('the agent logs its port', async () => /"httpPort":(\d+)/.exec(agent.logs(Number.MAX_SAFE_INTEGER))?.[1], 60_000, 200);
    const url = `http://127.0.0.1:${port}/metrics`;
    const pid = (await agent.programPid())!;
    const rssStart = rssMiB(pid);
    const scrape = async () => (await fetch(url)).text();
    // The first scrape also waits until the agent counted its disks: the registry is the full one.
    await eventually(`the agent's disks gauge at ${DISKS}`, async () => new RegExp(`^nodedisks_agent_disks\\{phase="Available"\\} ${DISKS}$`, 'm').test(await scrape()), 60_000, 200);
    const rssOneScrape = rssMiB(pid);
    const cpu0 = cpuSeconds(pid);
    let bytes = 0;
    for (let n = 0; n < SCRAPES; n++) bytes = (await scrape()).length;
    const cpu1 = cpuSeconds(pid);
    const rssScraped = rssMiB(pid);
    const idleEnd = Date.now() + IDLE_S * 1000;
    while (Date.now() < idleEnd) await new Promise((r) => setTimeout(r, 1000));
    const idleCpuPercent = ((cpuSeconds(pid) - cpu1) / IDLE_S) * 100;
    return { rssStart, rssOneScrape, rssScraped, cpuPerScrapeMs: ((cpu1 - cpu0) / SCRAPES) * 1000, idleCpuPercent, bytes, load: load() };
  } finally {
    await agent.stop();
  }
}

try {
  console.log(`agent /metrics: ${DISKS} disks, ${SCRAPES} scrapes, ${RUNS} runs per build taking turns, node ${NODE_FLAGS.join(' ')}; load (1 min) at start ${load()}`);
  console.log('| build | run | RSS after start | after 1 scrape | after all scrapes | CPU per scrape | CPU idle (no scrapes) | scrape size | load |');
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (let i = 0; i < RUNS; i++) {
    for (const b of BUNDLES) {
      const r = await once(b, i);
      results.get(b.name)!.push(r);
      console.log(
        `| ${b.name} | ${i + 1} | ${r.rssStart.toFixed(1)} MiB | ${r.rssOneScrape.toFixed(1)} MiB | ${r.rssScraped.toFixed(1)} MiB | ${r.cpuPerScrapeMs.toFixed(3)} ms | ${r.idleCpuPercent.toFixed(2)} % | ${r.bytes} B | ${r.load} |`,
      );
    }
  }
  console.log(`\nmedians of ${RUNS} runs:`);
  console.log('| build | RSS after start | after 1 scrape | after all scrapes | CPU per scrape | CPU idle | a core at one scrape every 15 s |');
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  for (const [name, rs] of results) {
    const m = (f: (r: Run) => number) => median(rs.map(f));
    console.log(
      `| ${name} | ${m((r) => r.rssStart).toFixed(1)} MiB | ${m((r) => r.rssOneScrape).toFixed(1)} MiB | ${m((r) => r.rssScraped).toFixed(1)} MiB | ${m((r) => r.cpuPerScrapeMs).toFixed(3)} ms | ${m((r) => r.idleCpuPercent).toFixed(2)} % | ${((m((r) => r.cpuPerScrapeMs) / 15_000) * 100).toFixed(4)} % |`,
    );
  }
  console.log(`load (1 min) at the end ${load()}`);
} finally {
  await cp.stop();
  await rm(work, { recursive: true, force: true });
}
