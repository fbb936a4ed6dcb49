// The node agent's steady cost at scale (ADR 24): its API writes while nothing changes and its memory,
// with SCALE_DISKS disks on one node, the agent run as it ships (the esbuild bundle dist/agent) against a
// real control plane with an audit log of every write.
// `npm run bench:scale:agent` (SCALE_DISKS=300 by default; SCALE_WINDOW=120 seconds of steady state;
// AGENT_BUNDLE=<path> runs another build, e.g. an older commit's; AGENT_ARGS adds agent flags,
// AGENT_NODE_FLAGS node flags before the bundle, as the DaemonSet's command line has them).
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

const DISKS = Number(process.env.SCALE_DISKS ?? 300);
const WINDOW_S = Number(process.env.SCALE_WINDOW ?? 120);
const BUNDLE = process.env.AGENT_BUNDLE ?? join(REPO_ROOT, 'dist/agent/node-disks-agent.mjs');
const EXTRA = (process.env.AGENT_ARGS ?? '').split(' ').filter(Boolean);
const NODE_FLAGS = (process.env.AGENT_NODE_FLAGS ?? '').split(' ').filter(Boolean);
const AGENT_USER = 'system:serviceaccount:node-disks-system:node-disks-agent';
const node = 'scale-node';

/** VmRSS and VmHWM (peak) of the agent's own process, in MiB. */
async function memory(p: Program): Promise<{ rss: number; peak: number; anon: number; file: number }> {
  const pid = await p.programPid();
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1]) / 1024;
  return { rss: kib('VmRSS'), peak: kib('VmHWM'), anon: kib('RssAnon'), file: kib('RssFile') };
}

/** CPU seconds (user + system) the agent's process has used so far. */
async function cpuSeconds(p: Program): Promise<number> {
  const fields = readFileSync(`/proc/${await p.programPid()}/stat`, 'utf8')
    .split(') ')[1]!
    .split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
}

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
const mib = (x: number) => `${x.toFixed(1)} MiB`;

const cp = await ControlPlane.start({ auditWrites: true });
const work = await mkdtemp(join(tmpdir(), 'nodedisks-scale-agent-'));
let agent: Program | undefined;
try {
  const diskDir = join(work, 'disks');
  await seedDisks(diskDir, DISKS, 64 * 1024 * 1024);
  const identity = await cp.agent(node);
  const client = new NodeDiskClient(new RestClient(loadKubeConfig({ kubeconfig: cp.admin().kubeconfig })));
  const t0 = performance.now();
  agent = new Program('agent', join(work, 'agent.log'), BUNDLE, []);
  agent.start(process.execPath, [
    ...NODE_FLAGS,
    BUNDLE,
    `--kubeconfig=${identity.kubeconfig}`,
    `--node-name=${node}`,
    `--disk-dir=${diskDir}`,
    `--host-disk-dir=${DEFAULT_DISK_DIR}`,
    '--http-address=127.0.0.1:0',
    ...EXTRA,
  ]);
  const available = async () => {
    let n = 0;
    for await (const page of client.listPages({ fieldSelector: `spec.nodeName=${node},status.node.phase=Available` })) n += page.items.length;
    return n;
  };
  await eventually(`${DISKS} disks Available`, async () => (await available()) === DISKS, 900_000, 1000);
  const discoverySeconds = (performance.now() - t0) / 1000;
  const afterDiscovery = await memory(agent);
  const discoveryCpu = await cpuSeconds(agent);

  // Steady state: nothing changes on the node; count what the agent writes, sample its memory.
  const from = new Date().toISOString();
  let maxRss = 0;
  const end = Date.now() + WINDOW_S * 1000;
  while (Date.now() < end) {
    maxRss = Math.max(maxRss, (await memory(agent)).rss);
    await new Promise((r) => setTimeout(r, 1000));
  }
  const to = new Date().toISOString();
  const steady = await memory(agent);
  const steadyCpu = (await cpuSeconds(agent)) - discoveryCpu;
  const writes = (await cp.auditedWrites()).filter((w) => w.user.username === AGENT_USER && w.requestReceivedTimestamp >= from && w.requestReceivedTimestamp <= to);
  const nodeDiskWrites = writes.filter((w) => w.objectRef?.resource === 'nodedisks').length;
  const leaseWrites = writes.filter((w) => w.objectRef?.resource === 'leases').length;
  const per5min = (n: number) => ((n * 300) / WINDOW_S).toFixed(1);

  console.log(`agent at scale: ${DISKS} disks on one node: node ${NODE_FLAGS.join(' ')} ${BUNDLE.replace(`${REPO_ROOT}/`, '')} ${EXTRA.join(' ')}`);
  console.log('| what | figure |');
  console.log('| --- | --- |');
  console.log(`| ${DISKS} disks created and reported Available, from agent start | ${discoverySeconds.toFixed(1)} s |`);
  console.log(`| agent CPU: start and discovery / steady window | ${discoveryCpu.toFixed(1)} s / ${steadyCpu.toFixed(1)} s |`);
  console.log(`| agent writes in ${WINDOW_S} s of steady state: NodeDisks / heartbeat Lease | ${nodeDiskWrites} / ${leaseWrites} |`);
  console.log(`| agent steady writes per 5 min (scaled from the window) | ${per5min(nodeDiskWrites + leaseWrites)} |`);
  console.log(`| agent RSS after discovery / steady (end of window) / max in window / peak (VmHWM) | ${mib(afterDiscovery.rss)} / ${mib(steady.rss)} / ${mib(maxRss)} / ${mib(steady.peak)} |`);
  const text = await (await fetch(`http://127.0.0.1:${/"httpPort":(\d+)/.exec(agent.logs(Number.MAX_SAFE_INTEGER))?.[1]}/metrics`)).text();
  const gauge = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN) / 1048576;
  const spaces = [...text.matchAll(/^nodejs_heap_space_size_total_bytes\{space="(\w+)"\} (\d+)/gm)].map((m) => `${m[1]} ${(Number(m[2]) / 1048576).toFixed(1)}`).join(', ');
  console.log(
    `| agent V8 heap used / total; external (its /metrics at the end) | ${mib(gauge(/^nodejs_heap_size_used_bytes (\d+)/m))} / ${mib(gauge(/^nodejs_heap_size_total_bytes (\d+)/m))}; ${mib(gauge(/^nodejs_external_memory_bytes (\d+)/m))} |`,
  );
  console.log(`| agent V8 heap spaces (total MiB) | ${spaces} |`);
  console.log(`| agent RSS at the end: anonymous / file-backed (the node binary's pages) | ${mib(steady.anon)} / ${mib(steady.file)} |`);
  console.log(`| load average (1, 5, 15 min) at the end | ${load()} |`);
} finally {
  await agent?.stop();
  await cp.stop();
  await rm(work, { recursive: true, force: true });
}
