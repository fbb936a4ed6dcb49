// The claims binder at scale (ADR 34): CLAIMS NodeDiskClaims (default 1,000) created at once against N
// NodeDisks (default 10,000, reported Available over 200 nodes) on a real etcd + kube-apiserver, the
// controller already settled on the fleet. Measures the time from the first create to every claim Bound
// (the controller's own claims gauge, then checked in a list), the controller's CPU and RSS, and the API
// server's CPU and requests next to ours, with the machine's load.
//   npm run bench:claims                 N=1000 CLAIMS=100 npm run bench:claims
// Variables: N, CLAIMS, CREATE_CONCURRENCY (creates in flight, default 50), CONTROLLER_ARGS (extra flags),
// CONTROLLER_MAIN (another checkout's controller/main.ts), CONTROLLER_NODE_ARGS (node's own flags for the
// controller, such as `--cpu-prof --cpu-prof-dir=DIR`: the profile is written when it exits at the end),
// PHASE_TIMEOUT_MINUTES (default 30).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NodeDiskClaimClient } from '../api/claim-client.ts';
import { ControlPlane } from '../hack/controlplane/controlplane.ts';
import { newClaim } from '../hack/lib/nodedisks.ts';
import { CONTROLLER_MAIN } from '../hack/lib/programs.ts';
import { ServerProcess } from '../hack/lib/process.ts';
import { eventually } from '../hack/lib/wait.ts';
import { loadKubeConfig } from '../lib/kube/kubeconfig.ts';
import { RestClient } from '../lib/kube/rest.ts';
import { adminClient, apiserverRequests, childPid, controlPlaneCpu, cpuSeconds, formatRequests, loadAverage, peakRssMiB, populateReported, requestDelta, rssMiB, sampleRss } from './lib/fleet.ts';
import { startRecord } from './lib/results.ts';

const N = Number(process.env.N ?? 10_000);
const CLAIMS = Number(process.env.CLAIMS ?? 1000);
const CONCURRENCY = Number(process.env.CREATE_CONCURRENCY ?? 50);
const MAIN = process.env.CONTROLLER_MAIN ?? CONTROLLER_MAIN;
const EXTRA = (process.env.CONTROLLER_ARGS ?? '').split(' ').filter(Boolean);
const NODE_ARGS = (process.env.CONTROLLER_NODE_ARGS ?? '').split(' ').filter(Boolean);
const TIMEOUT_MS = Number(process.env.PHASE_TIMEOUT_MINUTES ?? 30) * 60_000;
const NS = 'bench-claims';
if (!(CLAIMS > 0 && N >= CLAIMS)) throw new Error(`bench:claims: CLAIMS (${CLAIMS}) must be at least 1 and at most N (${N}), so that every claim can bind`);

async function scrape(p: ServerProcess): Promise<string> {
  const port = await eventually('controller http port', async () => Number(/"httpPort":(\d+)/.exec(p.logsOfThisRun())?.[1]) || undefined, 60_000);
  return await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}
const sample = (text: string, line: string) => {
  const l = text.split('\n').find((x) => x.startsWith(`${line} `));
  return l === undefined ? 0 : Number(l.slice(line.length + 1));
};
const sum = (text: string, name: string) =>
  text
    .split('\n')
    .filter((l) => l.startsWith(name) && !l.startsWith('#'))
    .reduce((s, l) => s + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);

const record = startRecord('claims', { nodeDisks: N, claims: CLAIMS, createConcurrency: CONCURRENCY, controllerArgs: EXTRA.join(' '), controllerNodeArgs: NODE_ARGS.join(' ') });
const cp = await ControlPlane.start();
const work = await mkdtemp(join(tmpdir(), 'nodedisks-bench-claims-'));
let controller: ServerProcess | undefined;
try {
  const disks = adminClient(cp);
  const claims = new NodeDiskClaimClient(new RestClient(loadKubeConfig({ kubeconfig: cp.admin().kubeconfig })));
  const populateStarted = performance.now();
  await populateReported(disks, 0, N);
  console.log(`${N} NodeDisks over 200 nodes, reported Available (created in ${((performance.now() - populateStarted) / 1000).toFixed(1)} s); Kubernetes ${cp.binaries.kubernetesVersion}`);
  await cp.kubectl(cp.admin(), ['create', 'namespace', NS]);

  // The controller settles on the fleet first (a status write per NodeDisk): the claims are measured alone.
  // No agents run: their reports must not turn stale during the run. No Node objects either: NodeGone off.
  const kubeconfig = (await cp.controller()).kubeconfig;
  controller = new ServerProcess('controller', join(work, 'controller.log'));
  const args = [
    ...NODE_ARGS,
    MAIN,
    `--kubeconfig=${kubeconfig}`,
    '--http-address=127.0.0.1:0',
    '--identity=controller-bench',
    '--leader-elect=false',
    '--agent-stale-after=24h',
    '--node-lifecycle=false',
    ...EXTRA,
  ];
  controller.start(process.execPath, args);
  const pid = await eventually('controller pid', async () => childPid(controller!.pid, MAIN).catch(() => undefined), 30_000, 20);
  const settleStarted = performance.now();
  await eventually('the controller settled on every NodeDisk', async () => sum(await scrape(controller!).catch(() => ''), 'nodedisks_controller_writes_total') >= N, TIMEOUT_MS, 500);
  console.log(`controller: ${MAIN} ${EXTRA.join(' ')}; settled on ${N} NodeDisks in ${((performance.now() - settleStarted) / 1000).toFixed(1)} s; load before the claims: ${await loadAverage()}`);
  await new Promise((r) => setTimeout(r, 5000)); // the last status writes' watch events in
  const settledRss = await rssMiB(pid);

  const claimReqBefore = await apiserverRequests(cp, 'nodediskclaims');
  const diskReqBefore = await apiserverRequests(cp, 'nodedisks');
  const evBefore = await apiserverRequests(cp, 'events');
  const cpuBefore = await controlPlaneCpu(cp);
  const ctlCpuBefore = await cpuSeconds(pid);
  const rss = sampleRss(pid, 100);
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(CONCURRENCY, CLAIMS) }, async () => {
      for (let i = next++; i < CLAIMS; i = next++) await claims.create(newClaim(NS, `claim-${i}`, { minCapacity: '32Mi' }), { fieldManager: 'bench' });
    }),
  );
  const createdSeconds = (performance.now() - started) / 1000;
  let text = '';
  await eventually(
    `${CLAIMS} claims Bound`,
    async () => {
      if (!controller!.running) throw new Error(`the controller exited:\n${controller!.logsOfThisRun().slice(-4000)}`);
      text = await scrape(controller!).catch(() => '');
      return sample(text, 'nodedisks_controller_claims{phase="Bound"}') >= CLAIMS;
    },
    TIMEOUT_MS,
    100,
  );
  const seconds = (performance.now() - started) / 1000;
  const ctlCpu = (await cpuSeconds(pid)) - ctlCpuBefore;
  const cpuAfter = await controlPlaneCpu(cp);
  const { peakMiB } = rss.stop();
  const hwm = await peakRssMiB(pid);
  const load = await loadAverage();
  const claimReq = requestDelta(claimReqBefore, await apiserverRequests(cp, 'nodediskclaims'));
  const diskReq = requestDelta(diskReqBefore, await apiserverRequests(cp, 'nodedisks'));
  const ev = requestDelta(evBefore, await apiserverRequests(cp, 'events'));

  // What the gauge said, from the API server: every claim Bound, every disk once.
  const list = await claims.list(NS);
  const bound = list.items.filter((c) => c.status?.phase === 'Bound');
  const distinct = new Set(bound.map((c) => c.status?.diskName)).size;
  if (bound.length !== CLAIMS || distinct !== CLAIMS) throw new Error(`expected ${CLAIMS} Bound claims on ${CLAIMS} disks, found ${bound.length} Bound on ${distinct} disks`);
  const histCount = sample(text, 'nodedisks_controller_claim_bind_duration_seconds_count');
  const histSum = sample(text, 'nodedisks_controller_claim_bind_duration_seconds_sum');

  const f = (x: number, d = 1) => x.toFixed(d);
  console.log(
    '| NodeDisks | claims | creates done | all Bound | binds/s | CPU s: kube-apiserver / etcd / controller | controller RSS settled / peak (VmHWM) | claim requests at the API server | NodeDisk requests | Event POSTs | load (1/5/15 min) |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  console.log(
    `| ${N} | ${CLAIMS} | ${f(createdSeconds)} s | ${f(seconds)} s | ${f(CLAIMS / seconds, 0)} | ${f(cpuAfter.apiserver - cpuBefore.apiserver)} / ${f(cpuAfter.etcd - cpuBefore.etcd)} / ${f(ctlCpu)} (kube-apiserver ${f((100 * (cpuAfter.apiserver - cpuBefore.apiserver)) / seconds, 0)} %, controller ${f((100 * ctlCpu) / seconds, 0)} % of a core) | ${f(settledRss, 0)} / ${f(peakMiB, 0)} (${f(hwm, 0)}) MiB | ${formatRequests(claimReq)} | ${formatRequests(diskReq)} | ${ev.get('POST') ?? 0} | ${load} |`,
  );
  console.log(`bind latency (creationTimestamp, whole seconds, to Bound): mean ${f(histSum / Math.max(1, histCount), 2)} s over ${histCount} claims`);
  const round = (x: number, d = 1) => Number(x.toFixed(d));
  record.save({
    kubernetes: cp.binaries.kubernetesVersion,
    createsDoneSeconds: round(createdSeconds, 2),
    allBoundSeconds: round(seconds, 2),
    bindsPerSecond: round(CLAIMS / seconds),
    cpuSeconds: { kubeApiserver: round(cpuAfter.apiserver - cpuBefore.apiserver, 2), etcd: round(cpuAfter.etcd - cpuBefore.etcd, 2), controller: round(ctlCpu, 2) },
    controllerRssMiB: { settled: round(settledRss, 0), peak: round(peakMiB, 0), vmHwm: round(hwm, 0) },
    meanBindSeconds: round(histSum / Math.max(1, histCount), 2),
    loadAverage: load,
  });
} finally {
  await controller?.stop();
  await cp.stop();
  await rm(work, { recursive: true, force: true });
}
