// The local cluster (`npm run cluster`), measured: a warm start (binaries cached) to nine NodeDisks,
// label → marker file on a real node (and back), the memory of each component, the teardown.
// `sudo npm run bench:cluster`. The cold build of kubelet & co. is printed by `npm run cluster` (and
// `node hack/cluster/ensure.ts`) on a machine without the cache. Then the memory goals of issue 24 on the
// real pods: the controller's RSS idle (nine NodeDisks), then MEMORY_DISKS (default 300) disk images
// added on node m02 and its agent pod's RSS once they are all Available and SETTLE seconds have passed,
// next to a bare Node of the same binary; the figures are appended to bench/results/cluster-memory.jsonl.
import { existsSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ensureBinaries } from '../hack/controlplane/binaries.ts';
import { sh, sleep } from '../hack/cluster/host.ts';
import { readState } from '../hack/cluster/state.ts';
import { clusterEnv, startCluster, UP, waitForOutput } from '../hack/cluster/run.ts';
import { GOALS } from './lib/memory-goals.ts';
import { startRecord } from './lib/results.ts';

const SAMPLES = Number(process.env.SAMPLES ?? 5);
const MEMORY_DISKS = Number(process.env.MEMORY_DISKS ?? 300);
const SETTLE_S = Number(process.env.SETTLE ?? 30);
const record = startRecord('cluster-memory', { memoryDisks: MEMORY_DISKS, settleS: SETTLE_S });
const { dataDir, env } = clusterEnv();
const kubectl = (await ensureBinaries()).kubectl;
const k = (args: string[]) => sh(kubectl, [`--kubeconfig=${join(dataDir, 'kubeconfig')}`, ...args]);
/** Every 20 ms, for at most 2 minutes: the latency to measure is sub-second. */
async function poll(ok: () => boolean): Promise<void> {
  for (const deadline = Date.now() + 120_000; !ok(); await sleep(20)) if (Date.now() > deadline) throw new Error('no change within 2 minutes');
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

const t0 = Date.now();
const run = startCluster(env);
try {
  await waitForOutput(run, UP, 40 * 60_000);
  const up = (Date.now() - t0) / 1000;
  const figures = run
    .output()
    .split('\n')
    .filter((l) => /Ready .* s after|running as pods|^image /.test(l));
  console.log(`warm start to nine NodeDisks reported: ${up.toFixed(1)} s (npm run cluster's own figures below)`);
  for (const l of figures) console.log(`  ${l}`);

  // Memory: every process in the cluster's cgroups, by component (RSS from /proc/<pid>/status).
  const procsOf = (dir: string): number[] => {
    if (!existsSync(dir)) return [];
    const here = readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
    return [
      ...here,
      ...readdirSync(dir, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .flatMap((e) => procsOf(join(dir, e.name))),
    ];
  };
  const component = (pid: number): string => {
    const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    const joined = args.join(' ');
    for (const [re, name] of [
      [/node-disks-agent\.mjs/, 'agent (pod)'],
      [/node-disks-operator\.mjs/, 'controller (pod)'],
      [/relay\.ts/, 'relay'],
      [/containerd-shim/, 'containerd-shim'],
      [/^\/pause/, 'pause'],
      [/sleep infinity/, 'holder'],
    ] as const)
      if (re.test(joined)) return name;
    return (args[0] ?? '?').split('/').at(-1)!;
  };
  const vmRss = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
  /** Every process of the cluster: its node (cgroup), component and RSS in MiB. */
  const processes = () => {
    const out: { node: string; component: string; rss: number }[] = [];
    for (const cg of ['ndc-cp', 'ndc-m02', 'ndc-m03', 'ndc-m04']) {
      for (const pid of new Set(procsOf(join('/sys/fs/cgroup/memory', cg)))) {
        try {
          out.push({ node: cg.replace(/^ndc-/, ''), component: component(pid), rss: vmRss(pid) });
        } catch {
          // gone meanwhile
        }
      }
    }
    return out;
  };
  const rss = new Map<string, number[]>();
  for (const p of processes()) rss.set(p.component, [...(rss.get(p.component) ?? []), p.rss]);
  const self = readState()?.pid;
  if (self) rss.set('npm run cluster (host)', [vmRss(self)]);
  let total = 0;
  console.log('memory (RSS, MiB): component: each process');
  for (const [c, xs] of [...rss].sort((a, b) => b[1].reduce((s, x) => s + x, 0) - a[1].reduce((s, x) => s + x, 0))) {
    total += xs.reduce((s, x) => s + x, 0);
    console.log(`  ${c}: ${xs.map((x) => x.toFixed(0)).join(', ')}`);
  }
  console.log(`  total: ${total.toFixed(0)} MiB`);

  // Label → marker on the node's disk dir (the host dir behind the node's /var/lib/node-disks-manager).
  const disks = join(dataDir, 'nodes', 'm02', 'node-disks-manager', 'disks');
  const reserve: number[] = [];
  const release: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const disk = `disk${(i % 3) + 1}`;
    const nd = `node-disk-node-disks-dev-m02-${disk}`;
    const marker = join(disks, `${disk}.img.reserved`);
    let s = Date.now();
    await k(['label', 'nodedisk', nd, 'localtest.example.com/auto-reserve=true']);
    await poll(() => existsSync(marker));
    reserve.push(Date.now() - s);
    s = Date.now();
    await k(['label', 'nodedisk', nd, 'localtest.example.com/auto-reserve-']);
    await poll(() => !existsSync(marker));
    release.push(Date.now() - s);
    await sleep(500);
  }
  console.log(`label → marker on node m02 (kubectl label included): median ${median(reserve)} ms, min ${Math.min(...reserve)}, max ${Math.max(...reserve)} over ${SAMPLES}`);
  console.log(`unlabel → marker gone: median ${median(release)} ms, min ${Math.min(...release)}, max ${Math.max(...release)} over ${SAMPLES}`);

  // Issue 24's goals on the real pods: the controller idle, then one agent with MEMORY_DISKS disks.
  const of = (c: string, node?: string) =>
    processes()
      .filter((p) => p.component === c && (node === undefined || p.node === node))
      .map((p) => p.rss);
  await sleep(SETTLE_S * 1000);
  const controllers = of('controller (pod)');
  // Sparse images of their own names beside the demo's disk1…3 (left as they are): MEMORY_DISKS in all.
  for (let i = 4; i <= MEMORY_DISKS; i++) {
    const file = join(disks, `mem${i}.img`);
    writeFileSync(file, '');
    truncateSync(file, 64 * 1024 * 1024);
  }
  const availableOnM02 = async () =>
    (await k(['get', 'nodedisks', '--field-selector=spec.nodeName=node-disks-dev-m02,status.node.phase=Available', '-o', 'name'])).split('\n').filter(Boolean).length;
  const s0 = Date.now();
  for (const deadline = Date.now() + 15 * 60_000; (await availableOnM02()) < MEMORY_DISKS; await sleep(2000))
    if (Date.now() > deadline) throw new Error(`fewer than ${MEMORY_DISKS} NodeDisks Available on m02 after 15 minutes`);
  const discovered = (Date.now() - s0) / 1000;
  await sleep(SETTLE_S * 1000);
  const agent = of('agent (pod)', 'm02');
  const bare = await bareNode(['--jitless', '--max-semi-space-size=1']);
  const fmt = (xs: number[]) => xs.map((x) => `${x.toFixed(1)} MiB`).join(', ');
  console.log(`memory goals (issue 24), VmRSS of the container's process; bare \`node\` of the image's binary on the host for reference:`);
  console.log('| what | RSS | goal | bare Node |');
  console.log('| --- | --- | --- | --- |');
  console.log(
    `| agent pod on m02, ${MEMORY_DISKS} disks Available (${discovered.toFixed(0)} s after they were added) + ${SETTLE_S} s | ${fmt(agent)} | ≤ ${GOALS.agentMiB} MiB | ${bare.toFixed(1)} MiB (--jitless --max-semi-space-size=1) |`,
  );
  console.log(`| controller pods idle, nine NodeDisks (leader and standby) | ${fmt(controllers)} | ≤ ${GOALS.controllerMiB} MiB | ${(await bareNode([])).toFixed(1)} MiB (no flags) |`);
  record.save({ agentMiB: agent, controllerMiB: controllers, bareNodeMiB: bare, goals: GOALS, discoverySeconds: discovered });
} finally {
  const s = Date.now();
  run.child.kill('SIGINT');
  console.log(`teardown: exit ${await run.exited} after ${((Date.now() - s) / 1000).toFixed(1)} s`);
  rmSync(dataDir, { recursive: true, force: true });
}

/** RSS (MiB) of a Node that only waits, the same binary, after 3 s: the runtime's own floor. */
async function bareNode(flags: string[]): Promise<number> {
  const child = spawn(process.execPath, [...flags, '-e', 'setInterval(() => {}, 1 << 30)'], { stdio: 'ignore' });
  try {
    await sleep(3000);
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
  } finally {
    child.kill();
  }
}
