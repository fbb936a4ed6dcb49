// The local cluster (`npm run cluster`), measured: a warm start (binaries cached) to nine NodeDisks,
// label → marker file on a real node (and back), the memory of each component, the teardown.
// `sudo npm run bench:cluster`. The cold build of kubelet & co. is printed by `npm run cluster` (and
// `node hack/cluster/ensure.ts`) on a machine without the cache.
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ensureBinaries } from '../hack/controlplane/binaries.ts';
import { sh, sleep } from '../hack/cluster/host.ts';
import { readState } from '../hack/cluster/state.ts';
import { clusterEnv, startCluster, UP, waitForOutput } from '../hack/cluster/run.ts';

const SAMPLES = Number(process.env.SAMPLES ?? 5);
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
  const rss = new Map<string, number[]>();
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
  for (const cg of ['ndc-cp', 'ndc-m02', 'ndc-m03', 'ndc-m04']) {
    for (const pid of new Set(procsOf(join('/sys/fs/cgroup/memory', cg)))) {
      try {
        const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
        const c = component(pid);
        rss.set(c, [...(rss.get(c) ?? []), kb / 1024]);
      } catch {
        // gone meanwhile
      }
    }
  }
  const self = readState()?.pid;
  if (self) rss.set('npm run cluster (host)', [Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${self}/status`, 'utf8'))?.[1] ?? 0) / 1024]);
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
} finally {
  const s = Date.now();
  run.child.kill('SIGINT');
  console.log(`teardown: exit ${await run.exited} after ${((Date.now() - s) / 1000).toFixed(1)} s`);
  rmSync(dataDir, { recursive: true, force: true });
}
