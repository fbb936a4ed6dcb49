// The controller at scale (ADR 23): SCALE_N NodeDisks (default 1,000; 10,000 and
// 50,000 supported) spread over 200 nodes, 10 % labelled auto-reserve=true, on a real etcd + kube-apiserver.
// Rows: first start (writes, time, writes/s), restart on the reconciled fleet (time, writes: must be 0)
// through the streaming watch-list and again with --no-watch-list (the paged LIST), the controller's RSS
// peak and idle, and the API server's own request counts and CPU (kube-apiserver and etcd, from /proc)
// next to ours, with the machine's load. SKIP_PAGED_RESTART=1 leaves out the paged restart.
//   npm run bench:scale:controller                      SCALE_N=50000 npm run bench:scale:controller
// Variables: CONTROLLER_ARGS (extra flags, space separated), CONTROLLER_MAIN (another checkout's
// controller/main.ts, for before/after figures), MEMORY_LIMIT_MIB (run the controller inside a cgroup v1
// memory cgroup with that limit and report its failcnt and OOM kills; needs root), NODE_FLAGS (flags for
// node itself; default the image's, see Dockerfile), PHASE_TIMEOUT_MINUTES (how long a phase may take, 60).
import { mkdirSync, readFileSync, rmdirSync, writeFileSync, existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../hack/lib/paths.ts';
import type { NodeDiskClient } from '../api/client.ts';
import { ControlPlane } from '../hack/controlplane/controlplane.ts';
import { CONTROLLER_MAIN } from '../hack/lib/programs.ts';
import { ServerProcess } from '../hack/lib/process.ts';
import { eventually } from '../hack/lib/wait.ts';
import { adminClient, apiserverCpuProfile, apiserverRequests, childPid, controlPlaneCpu, cpuSeconds, formatRequests, loadAverage, populateFleet, requestDelta, sampleRss } from './lib/fleet.ts';
import { startRecord } from './lib/results.ts';

const N = Number(process.env.SCALE_N ?? 1000);
const NODES = 200;
const LABEL_EVERY = 10;
const MAIN = process.env.CONTROLLER_MAIN ?? CONTROLLER_MAIN;
const EXTRA = (process.env.CONTROLLER_ARGS ?? '').split(' ').filter(Boolean);
const NODE_FLAGS = (process.env.NODE_FLAGS ?? '--max-old-space-size-percentage=50').split(' ').filter(Boolean);
const LIMIT_MIB = process.env.MEMORY_LIMIT_MIB ? Number(process.env.MEMORY_LIMIT_MIB) : undefined;
const labelled = Math.ceil(N / LABEL_EVERY);
// The fleet's nodes have no Node objects: with the node lifecycle (ADR 35) on they are gone and their
// labelled disks never reserved, so the first start would wait for writes that never come.
const NODE_LIFECYCLE = '--node-lifecycle=false';
/** `APISERVER_PROFILE_DIR=<dir>`: a kube-apiserver CPU profile of each restart, for `go tool pprof -top`. */
const PROFILE_DIR = process.env.APISERVER_PROFILE_DIR;
const PROFILE_SECONDS = Number(process.env.APISERVER_PROFILE_SECONDS ?? 12);
const CGROUP = `/sys/fs/cgroup/memory/nodedisks-bench-${process.pid}`;
/** Every controller started, stopped at the end. */
const procs: ServerProcess[] = [];

/** A controller process; inside the memory cgroup when MEMORY_LIMIT_MIB is set (it joins before exec). */
function launch(cp: ControlPlane, work: string, id: string, kubeconfig: string, more: string[] = []): ServerProcess {
  const p = new ServerProcess(id, join(work, `${id}.log`));
  const args = [...NODE_FLAGS, MAIN, `--kubeconfig=${kubeconfig}`, '--http-address=127.0.0.1:0', `--identity=${id}`, '--leader-elect=false', NODE_LIFECYCLE, ...EXTRA, ...more];
  if (LIMIT_MIB === undefined) p.start(process.execPath, args);
  else p.start('/bin/sh', ['-c', `echo $$ > ${CGROUP}/cgroup.procs && exec "$0" "$@"`, process.execPath, ...args]);
  void cp;
  return p;
}

async function metrics(p: ServerProcess): Promise<string> {
  const port = await eventually('controller http port', async () => Number(/"httpPort":(\d+)/.exec(p.logsOfThisRun())?.[1]) || undefined, 60_000);
  return await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}
const sum = (text: string, name: string) =>
  text
    .split('\n')
    .filter((l) => l.startsWith(name) && !l.startsWith('#'))
    .reduce((s, l) => s + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);

const cgroupFile = (f: string) =>
  Number(
    readFileSync(join(CGROUP, f), 'utf8')
      .trim()
      .split('\n')
      .find((l) => !l.includes(' ')) ?? NaN,
  );
const oomKills = () => Number(/oom_kill (\d+)/.exec(readFileSync(join(CGROUP, 'memory.oom_control'), 'utf8'))?.[1] ?? 0);

interface Phase {
  seconds: number;
  writes: number;
  requests: string;
  eventPosts: number;
  apiserverCpu: number;
  etcdCpu: number;
  controllerCpu: number;
  peakMiB: number;
  idleMiB: number;
}

/** Starts a controller and waits until it has reconciled every NodeDisk `rounds` times over. */
async function phase(cp: ControlPlane, work: string, id: string, kubeconfig: string, done: (m: string) => boolean, more: string[] = []): Promise<{ p: ServerProcess; r: Phase }> {
  const reqBefore = await apiserverRequests(cp, 'nodedisks');
  const evBefore = await apiserverRequests(cp, 'events');
  const cpuBefore = await controlPlaneCpu(cp);
  // The restarts are short: a profile that starts with the phase covers it (and a few idle seconds).
  const profiling = PROFILE_DIR && id !== 'controller-first' ? apiserverCpuProfile(cp, PROFILE_SECONDS, join(PROFILE_DIR, `kube-apiserver-${id}.pprof`)) : undefined;
  const started = performance.now();
  const p = launch(cp, work, id, kubeconfig, more);
  procs.push(p); // stopped in the end whatever happens, so the memory cgroup can be removed
  const pid = await eventually('controller pid', async () => childPid(p.pid, MAIN).catch(() => undefined), 30_000, 20);
  const rss = sampleRss(pid, 100);
  let text = '';
  await eventually(
    `${id} done`,
    async () => {
      if (!p.running) throw new Error(`${id} exited:\n${p.logsOfThisRun().slice(-4000)}`);
      text = await metrics(p).catch(() => '');
      return text !== '' && done(text);
    },
    Number(process.env.PHASE_TIMEOUT_MINUTES ?? 60) * 60_000,
    250,
  );
  const seconds = (performance.now() - started) / 1000;
  const controllerCpu = await cpuSeconds(pid);
  const cpuAfter = await controlPlaneCpu(cp);
  const req = requestDelta(reqBefore, await apiserverRequests(cp, 'nodedisks'));
  const ev = requestDelta(evBefore, await apiserverRequests(cp, 'events'));
  await new Promise((r) => setTimeout(r, 10_000)); // idle: let the GC settle
  await profiling;
  const { peakMiB, lastMiB } = rss.stop();
  return {
    p,
    r: {
      seconds,
      writes: sum(text, 'nodedisks_controller_writes_total'),
      requests: formatRequests(req),
      eventPosts: ev.get('POST') ?? 0,
      apiserverCpu: cpuAfter.apiserver - cpuBefore.apiserver,
      etcdCpu: cpuAfter.etcd - cpuBefore.etcd,
      controllerCpu,
      peakMiB,
      idleMiB: lastMiB,
    },
  };
}

/** What the informer cache costs per 10,000 NodeDisks, whole against lean (bench/cache-heap.ts, a process of its own). */
async function cacheHeapPer10k(client: NodeDiskClient, work: string): Promise<{ wholeMiB: number; leanMiB: number }> {
  const page = join(work, 'page.json');
  writeFileSync(page, JSON.stringify((await client.list({ limit: 500 })).items));
  const { stdout } = await promisify(execFile)(process.execPath, [join(REPO_ROOT, 'bench/cache-heap.ts'), page]);
  return JSON.parse(stdout) as { wholeMiB: number; leanMiB: number };
}

if (LIMIT_MIB !== undefined) {
  mkdirSync(CGROUP);
  writeFileSync(join(CGROUP, 'memory.limit_in_bytes'), String(LIMIT_MIB * 1024 * 1024));
}
const record = startRecord('scale-controller', {
  nodeDisks: N,
  nodes: NODES,
  labelEvery: LABEL_EVERY,
  controller: MAIN === CONTROLLER_MAIN ? 'this checkout' : MAIN,
  nodeFlags: NODE_FLAGS.join(' '),
  extraArgs: EXTRA.join(' '),
  memoryLimitMiB: LIMIT_MIB ?? 0,
});
// kube-apiserver compares its watch cache with etcd every 5 minutes per resource (DetectCacheInconsistency,
// on by default): a full read and decode of every NodeDisk, about as much CPU as a restart's whole
// encoding, landing in whichever phase it happens to overlap. Off by default here so a phase's API server
// CPU is that phase's own; `CACHE_CHECK=on` keeps the server's default.
const CACHE_CHECK = process.env.CACHE_CHECK === 'on';
const cp = await ControlPlane.start(CACHE_CHECK ? {} : { apiserverFlags: ['--feature-gates=DetectCacheInconsistency=false'] });
const work = await mkdtemp(join(tmpdir(), 'nodedisks-scale-'));
try {
  const client = adminClient(cp);
  const kubeconfig = (await cp.controller()).kubeconfig;
  const populateSeconds = await populateFleet(client, { size: N, nodes: NODES, labelEvery: LABEL_EVERY });
  console.log(`${N} NodeDisks over ${NODES} nodes, ${labelled} labelled auto-reserve=true (created in ${populateSeconds.toFixed(1)} s); Kubernetes ${cp.binaries.kubernetesVersion}`);
  console.log(`controller: ${MAIN} ${NODE_FLAGS.join(' ')} ${EXTRA.join(' ')}${LIMIT_MIB ? `; in a memory cgroup limited to ${LIMIT_MIB} MiB` : ''}; load before: ${await loadAverage()}`);

  // First start: one status write per NodeDisk and one spec write per labelled one.
  const expected = N + labelled;
  const first = await phase(cp, work, 'controller-first', kubeconfig, (m) => sum(m, 'nodedisks_controller_writes_total') >= expected);
  const loadFirst = await loadAverage();
  await first.p.stop();
  // Restart on the reconciled fleet: every NodeDisk looked at once (a successful reconcile), nothing written.
  const restarted = (m: string) => sum(m, 'nodedisks_controller_reconcile_total{result="success"}') >= N;
  const again = await phase(cp, work, 'controller-restart', kubeconfig, restarted);
  const loadAgain = await loadAverage();
  // Stopped before the cache row below: its log lines, read into this process, would count in that heap.
  await again.p.stop();
  // The same restart with the paged LIST (the informers before watch-list, and an API server without it).
  const paged = process.env.SKIP_PAGED_RESTART ? undefined : await phase(cp, work, 'controller-restart-paged', kubeconfig, restarted, ['--no-watch-list']);
  const loadPaged = await loadAverage();
  await paged?.p.stop();

  const f = (x: number, d = 1) => x.toFixed(d);
  console.log(
    '| phase | time | controller writes | writes/s | NodeDisk requests at the API server | Event POSTs | CPU s: kube-apiserver / etcd / controller | controller RSS peak / idle | load (1/5/15 min) |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  const rows: [string, Phase, string][] = [
    ['first start', first.r, loadFirst],
    ['restart, reconciled (watch-list)', again.r, loadAgain],
  ];
  if (paged) rows.push(['restart, reconciled (--no-watch-list: paged LIST)', paged.r, loadPaged]);
  for (const [name, r, load] of rows) {
    console.log(
      `| ${name} | ${f(r.seconds)} s | ${r.writes} | ${f(r.writes / r.seconds, 0)} | ${r.requests} | ${r.eventPosts} | ${f(r.apiserverCpu)} / ${f(r.etcdCpu)} / ${f(r.controllerCpu)} (kube-apiserver ${f((100 * r.apiserverCpu) / r.seconds, 0)} % of a core) | ${f(r.peakMiB, 0)} / ${f(r.idleMiB, 0)} MiB | ${load} |`,
    );
  }
  const cache = await cacheHeapPer10k(client, work);
  console.log(`informer cache per 10,000 reconciled NodeDisks (V8 heap): whole objects ${f(cache.wholeMiB)} MiB, the controller's lean copies ${f(cache.leanMiB)} MiB`);
  record.save({
    kubernetes: cp.binaries.kubernetesVersion,
    populateSeconds,
    phases: rows.map(([name, r, load]) => ({ name, ...r, load })),
    informerCachePer10kMiB: { whole: cache.wholeMiB, lean: cache.leanMiB },
  });
  if (LIMIT_MIB !== undefined) {
    console.log(
      `memory cgroup ${CGROUP}: limit ${LIMIT_MIB} MiB, max usage ${f(cgroupFile('memory.max_usage_in_bytes') / 2 ** 20, 0)} MiB, failcnt ${cgroupFile('memory.failcnt')}, oom_kill ${oomKills()}`,
    );
  }
} finally {
  await Promise.all(procs.map((p) => p.stop()));
  await cp.stop();
  await rm(work, { recursive: true, force: true });
  if (LIMIT_MIB !== undefined && existsSync(CGROUP)) {
    // The cgroup can be removed once its last process has gone.
    await eventually('memory cgroup empty', async () => readFileSync(join(CGROUP, 'cgroup.procs'), 'utf8').trim() === '', 30_000, 100);
    rmdirSync(CGROUP);
  }
}
