// PVC-backed pods on the local cluster, measured: COUNTS (default 30 and 100) pods, each with its own PVC of
// StorageClass nodedisks, created at once across the three nodes; the time from the create to each pod
// Running (p50, p95, the last) and the API writes it took, beside the same number of pods with an emptyDir
// volume in the same run (csi-driver-host-path, the usual yardstick, has no module served on this
// machine). Each round is torn down as a team frees disks: the pods first (each pod's own teardown timed
// against the emptyDir pods'), then, once no pod mounts them, the claims, timed from each PV's release to
// its disk wiped and Available again. Then a StatefulSet scaled from 0 to STATEFULSET_REPLICAS (default 30,
// 0: none), with an emptyDir and with a claim template. Then the memory of the agent and the CSI driver's
// containers as shipped. `sudo npm run bench:csi`; the figures are appended to
// bench/results/csi-pods.jsonl. CSI_NODE_OPTIONS=<flags> runs `csi-node` with that NODE_OPTIONS instead of
// the shipped one (kustomize/agent/daemonset.yaml), e.g. CSI_NODE_OPTIONS= (empty) for V8's defaults.
// CSI_TOOL_RUNNER=1 runs `csi-node` with --tool-runner (its tools started by nodedisks-toolrunner, ADR 48);
// CSI_FORMATS_AT_ONCE=<n> with --formats-at-once=<n> (mkfs runs at once on a node).
// DISKS_PER_NODE=<n> seeds n disk images a node instead of just enough for the largest round (issue 41's
// memory goal is at 300 disks). The node side's memory is also taken per node as what its agent and
// csi-node hold together, each physical page once (hack/lib/page-frames.ts), and as the agent pod's working
// set (its memory cgroup: usage less inactive file pages, what the kubelet evicts by).
// KEEP_LOGS=1 keeps the cluster's logs (the pods' and the kubelets') of a run that passed too, to read the
// provisioner's and the drivers' own account of a round.
import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sh, sleep } from '../hack/cluster/host.ts';
import { PAUSE_IMAGE } from '../hack/cluster/images.ts';
import { CSI_IMAGE } from '../hack/lib/image-spec.ts';
import { clusterEnv, collectPodLogs, keepLogs, seedNodeUniqueDisks, startCluster, UP, waitForOutput } from '../hack/cluster/run.ts';
import { NODE_NAMES } from '../hack/cluster/topology.ts';
import { ensureBinaries } from '../hack/controlplane/binaries.ts';
import { pvOwner } from '../csi/controller-service.ts';
import { type CallHistograms, combine, parseCallHistograms, parseHistograms, quantileOf, slowerThan } from './lib/call-histogram.ts';
import { quantile } from './lib/samples.ts';
import { type KubeletVolumeTimes, kubeletVolumeTimes, podUnmountStarts, type Step, step } from './lib/volume-timeline.ts';
import { startRecord } from './lib/results.ts';
import { distinctMiB } from '../hack/lib/page-frames.ts';

const COUNTS = (process.env.COUNTS ?? '30,100').split(',').map(Number);
/** NODE_OPTIONS for the `csi-node` containers (e.g. `--jitless`), to measure a runtime flag; unset: as shipped. */
const CSI_NODE_OPTIONS = process.env.CSI_NODE_OPTIONS;
const KEEP_LOGS = process.env.KEEP_LOGS === '1';
/** Replicas of the StatefulSet scaled up from 0 after the pod rounds, once with emptyDir and once with claims; 0: none. */
const STATEFULSET_REPLICAS = Number(process.env.STATEFULSET_REPLICAS ?? 30);
const CSI_TOOL_RUNNER = process.env.CSI_TOOL_RUNNER === '1';
const CSI_FORMATS_AT_ONCE = process.env.CSI_FORMATS_AT_ONCE;
const MiB = 2 ** 20;
/** Disk images added on each node: enough for the largest round, with a spare each, or DISKS_PER_NODE. */
const PER_NODE = Math.max(Math.ceil(Math.max(...COUNTS) / NODE_NAMES.length) + 3, Number(process.env.DISKS_PER_NODE ?? 0));
const DISK_BYTES = 32 * MiB;
const record = startRecord('csi-pods', {
  counts: COUNTS.join(','),
  disksPerNode: PER_NODE,
  diskMiB: DISK_BYTES / MiB,
  ...(CSI_NODE_OPTIONS !== undefined ? { csiNodeOptions: CSI_NODE_OPTIONS } : {}),
  ...(CSI_TOOL_RUNNER ? { csiToolRunner: true } : {}),
  ...(CSI_FORMATS_AT_ONCE ? { csiFormatsAtOnce: Number(CSI_FORMATS_AT_ONCE) } : {}),
});
const { dataDir, env } = clusterEnv();
const kubectl = (await ensureBinaries()).kubectl;
const kubeconfig = join(dataDir, 'kubeconfig');
const k = (args: string[], timeoutMs = 300_000) => sh(kubectl, [`--kubeconfig=${kubeconfig}`, ...args], { timeoutMs });

/** The API server's write requests so far, by resource (its own counter, apiserver_request_total). */
async function writes(): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const line of (await k(['get', '--raw', '/metrics'])).split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const verb = /verb="([A-Z]+)"/.exec(line)?.[1] ?? '';
    if (!['POST', 'PUT', 'PATCH', 'DELETE', 'APPLY', 'DELETECOLLECTION'].includes(verb)) continue;
    const resource = /resource="([^"]*)"/.exec(line)?.[1] ?? '';
    const sub = /subresource="([^"]*)"/.exec(line)?.[1] ?? '';
    const key = sub ? `${resource}/${sub}` : resource;
    out.set(key, (out.get(key) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)));
  }
  return out;
}

function diff(after: Map<string, number>, before: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, n] of after) {
    const d = n - (before.get(key) ?? 0);
    if (d > 0) out[key] = d;
  }
  return out;
}

/**
 * Each line of a `kubectl get --watch -o jsonpath=…` (one object a line), split on spaces, with the time it
 * arrived. kubectl ends quietly when the API server ends the watch: it is then started again, and its first
 * lines list every object once more, so a change made meanwhile is seen late, not lost.
 */
function watchLines(args: string[], onLine: (fields: string[], at: number) => void) {
  let stopped = false;
  let child: ReturnType<typeof spawn>;
  const start = () => {
    child = spawn(kubectl, [`--kubeconfig=${kubeconfig}`, 'get', '--watch', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let rest = '';
    child.stdout!.on('data', (b: Buffer) => {
      const at = Date.now();
      const lines = (rest + b.toString()).split('\n');
      rest = lines.pop() ?? '';
      for (const l of lines) onLine(l.split(' '), at);
    });
    child.on('exit', () => {
      if (stopped) return;
      console.log(`  (kubectl get --watch ${args.join(' ').slice(0, 60)}… ended: started again)`);
      start();
    });
  };
  start();
  return () => {
    stopped = true;
    child.kill();
  };
}

/** The first time each key was seen, in ms since the epoch. */
const first = (m: Map<string, number>, key: string, at: number) => {
  if (!m.has(key)) m.set(key, at);
};

type Volume = 'pvc' | 'emptyDir';

/** A namespace for one round, its pods held to the baseline Pod Security level. */
async function benchNamespace(ns: string): Promise<void> {
  await k(['create', 'namespace', ns]);
  await k(['label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=baseline']);
}

function pod(ns: string, i: number, volume: Volume) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `p${i}`, namespace: ns },
    spec: {
      terminationGracePeriodSeconds: 0,
      containers: [{ name: 'c', image: PAUSE_IMAGE, imagePullPolicy: 'Never', volumeMounts: [{ name: 'd', mountPath: '/data' }] }],
      volumes: [volume === 'pvc' ? { name: 'd', persistentVolumeClaim: { claimName: `c${i}` } } : { name: 'd', emptyDir: {} }],
    },
  };
}

const pvc = (ns: string, i: number) => ({
  apiVersion: 'v1',
  kind: 'PersistentVolumeClaim',
  metadata: { name: `c${i}`, namespace: ns },
  spec: { storageClassName: 'nodedisks', accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '16Mi' } } },
});

const freeDisks = async () =>
  (await k(['get', 'nodedisks', '-o', 'jsonpath={range .items[*]}{.spec.desired.state}/{.status.node.phase}{"\\n"}{end}'])).split('\n').filter((l) => l === 'Available/Available').length;

async function waitFor(what: string, minutes: number, ok: () => Promise<boolean>): Promise<number> {
  const s = Date.now();
  for (const deadline = s + minutes * 60_000; !(await ok()); await sleep(1000)) if (Date.now() > deadline) throw new Error(`${what}: not within ${minutes} minutes`);
  return Date.now() - s;
}

interface Round {
  volume: Volume;
  count: number;
  p50Ms: number;
  p95Ms: number;
  lastMs: number;
  writes: number;
  writesByResource: Record<string, number>;
  teardownS: number;
  /** CPU seconds by program from the create to the last pod Running (bench runs alone on this machine). */
  cpuSeconds: Record<string, number>;
  /** PVC rounds: where each pod's time went, step by step (bench/lib/volume-timeline.ts). */
  provisioning?: Step[];
  /** From the pods' deletion to each pod's kubelet starting to unmount its volumes: the pod's own teardown. */
  podTeardown: Step;
  /** PVC rounds: from the pods' deletion to their volumes unstaged, step by step (the kubelet's teardown). */
  unmount?: Step[];
  /** PVC rounds: from each PV released (its claim deleted after its pod was gone and unmounted) to its disk wiped and Available, step by step. */
  freeAgain?: Step[];
  /** PVC rounds: the CSI calls as the driver timed them, until every pod ran and in the teardown. */
  driverCalls?: { bringUp: DriverCall[]; teardown: DriverCall[] };
  /** PVC rounds: how long the API server queued requests (Priority and Fairness), by priority level. */
  apiQueueWait?: QueueWait[];
  /** Seconds each program waited, runnable, for a CPU: until every pod ran, and from the delete to every disk free. */
  cpuWaitSeconds: { bringUp: Record<string, number>; teardown: Record<string, number> };
}

type QueueWait = { level: string; requests: number; p95Ms?: number; over10s: number };

/** The API server's queue wait (API Priority and Fairness) of the requests it ran, by priority level. */
async function scrapeQueueWait(): Promise<CallHistograms> {
  return parseHistograms(await k(['get', '--raw', '/metrics']), 'apiserver_flowcontrol_request_wait_duration_seconds', (labels) =>
    labels.get('execute') === 'true' ? (labels.get('priority_level') ?? '') : `${labels.get('priority_level') ?? ''} (rejected)`,
  );
}

function queueWaits(after: CallHistograms, before: CallHistograms): QueueWait[] {
  return [...combine([{ after, before }])].map(([level, h]) => {
    const p95 = quantileOf(h, 0.95);
    return { level, requests: h.count, ...(p95 !== undefined ? { p95Ms: Math.round(p95 * 1000) } : {}), over10s: slowerThan(h, 10) };
  });
}

type DriverCall = {
  call: string;
  count: number;
  p50Ms?: number;
  p95Ms?: number;
};

/** The driver's call histograms now: the CSI controller's and every node side's, by pod. */
async function scrapeDriver(): Promise<Map<string, CallHistograms>> {
  const pods = (await k(['-n', 'node-disks-system', 'get', 'pods', '-o', 'jsonpath={range .items[*]}{.metadata.name} {.metadata.labels.app\\.kubernetes\\.io/name}{"\\n"}{end}']))
    .trim()
    .split('\n')
    .map((l) => l.split(' '));
  const ports: Record<string, number> = { 'node-disks-csi-controller': 8082, 'node-disks-agent': 8083 };
  const out = new Map<string, CallHistograms>();
  for (const [pod = '', app = ''] of pods) {
    const port = ports[app];
    if (port) out.set(pod, parseCallHistograms(await k(['get', '--raw', `/api/v1/namespaces/node-disks-system/pods/${pod}:${port}/proxy/metrics`])));
  }
  return out;
}

function driverCalls(after: Map<string, CallHistograms>, before: Map<string, CallHistograms>): DriverCall[] {
  const calls = combine([...after].map(([pod, h]) => ({ after: h, before: before.get(pod) })));
  return [...calls]
    .filter(([key]) => !/^(Probe|GetPluginInfo|GetPluginCapabilities|NodeGetInfo|NodeGetCapabilities|ControllerGetCapabilities) /.test(key))
    .map(([call, h]) => {
      const p50 = quantileOf(h, 0.5);
      const p95 = quantileOf(h, 0.95);
      return { call, count: h.count, ...(p50 !== undefined ? { p50Ms: Math.round(p50 * 1000) } : {}), ...(p95 !== undefined ? { p95Ms: Math.round(p95 * 1000) } : {}) };
    })
    .sort((a, b) => a.call.localeCompare(b.call));
}

const showCalls = (title: string, calls: DriverCall[]) =>
  console.log(`  ${title}: ${calls.map((c) => `${c.call} ×${c.count} ${((c.p50Ms ?? 0) / 1000).toFixed(1)}/${((c.p95Ms ?? 0) / 1000).toFixed(1)} s`).join(', ')} (p50/p95 from the buckets)`);

/**
 * The kubelets' logs as read so far: each read parses only what was appended since the last one (the waits
 * below poll every second while the cluster is under measurement, and the logs grow to megabytes), up to
 * its last whole line.
 */
const kubeletLog = { at: new Map<string, { offset: number; rest: Buffer }>(), volumes: new Map<string, KubeletVolumeTimes>(), pods: new Map<string, number>() };

function readKubeletLogs(): void {
  const year = new Date().getUTCFullYear();
  for (const node of NODE_NAMES) {
    const file = join(dataDir, 'logs', `kubelet-${node.slice(node.lastIndexOf('-') + 1)}.log`);
    if (!existsSync(file)) continue;
    const seen = kubeletLog.at.get(file) ?? { offset: 0, rest: Buffer.alloc(0) };
    const size = statSync(file).size;
    if (size <= seen.offset) continue;
    const added = Buffer.alloc(size - seen.offset);
    const fd = openSync(file, 'r');
    try {
      readSync(fd, added, 0, added.length, seen.offset);
    } finally {
      closeSync(fd);
    }
    const text = Buffer.concat([seen.rest, added]);
    const whole = text.lastIndexOf(0x0a) + 1;
    kubeletLog.at.set(file, { offset: size, rest: text.subarray(whole) });
    const lines = text.subarray(0, whole).toString('utf8');
    kubeletVolumeTimes(lines, year, kubeletLog.volumes);
    podUnmountStarts(lines, year, kubeletLog.pods);
  }
}

/** What the kubelets logged for each PV so far. */
function kubeletTimes(): ReadonlyMap<string, KubeletVolumeTimes> {
  readKubeletLogs();
  return kubeletLog.volumes;
}

/** When each pod's kubelet started to unmount its volumes so far, by pod UID. */
function podUnmounts(): ReadonlyMap<string, number> {
  readKubeletLogs();
  return kubeletLog.pods;
}

/** Waits until the kubelets have logged each of these PVs unstaged (NodeUnstageVolume done). */
const volumesUnstaged = (pvs: string[]) =>
  waitFor('every volume unmounted by its kubelet', 15, async () => {
    const kt = kubeletTimes();
    return pvs.every((pv) => kt.get(pv)?.unstaged !== undefined);
  });

const showSteps = (title: string, steps: Step[]) =>
  console.log(`  ${title}: ${steps.map((x) => `${x.step} ${(x.p50Ms / 1000).toFixed(1)}/${(x.p95Ms / 1000).toFixed(1)} s`).join(', ')} (p50/p95)`);

async function round(volume: Volume, count: number): Promise<Round> {
  const ns = `bench-${volume.toLowerCase()}-${count}`;
  await benchNamespace(ns);
  const items = [...(volume === 'pvc' ? Array.from({ length: count }, (_, i) => pvc(ns, i)) : []), ...Array.from({ length: count }, (_, i) => pod(ns, i, volume))];
  const file = join(dataDir, `${ns}.json`);
  writeFileSync(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
  const before = await writes();
  const driverBefore = volume === 'pvc' ? await scrapeDriver() : undefined;
  const waitBefore = runWaitByProgram();
  const queueBefore = volume === 'pvc' ? await scrapeQueueWait() : undefined;
  const cpuBefore = cpuByProgram();
  const running = new Map<string, number>();
  const podUid = new Map<string, string>();
  const scheduled = new Map<string, number>();
  const bound = new Map<string, number>();
  const nodePicked = new Map<string, number>();
  const pvOf = new Map<string, string>();
  // Inside CreateVolume's step: when a disk was reserved for each PV name (its owner) and when the PV appeared.
  const reservedFor = new Map<string, number>();
  const pvCreated = new Map<string, number>();
  const stops = [
    watchLines(['-n', ns, 'pods', '-o', 'jsonpath={.metadata.name} {.status.phase} {.spec.nodeName} {.metadata.uid}{"\\n"}'], ([name = '', phase, node, uid], at) => {
      if (uid) podUid.set(name, uid);
      if (phase === 'Running') first(running, name, at);
      if (node) first(scheduled, name, at);
    }),
    watchLines(
      ['-n', ns, 'pvc', '-o', 'jsonpath={.metadata.name} {.status.phase} {.spec.volumeName} {.metadata.annotations.volume\\.kubernetes\\.io/selected-node}{"\\n"}'],
      ([name = '', phase, pv, node], at) => {
        if (node) first(nodePicked, name, at);
        if (phase === 'Bound' && pv) {
          first(bound, name, at);
          pvOf.set(name, pv);
        }
      },
    ),
    ...(volume === 'pvc'
      ? [
          watchLines(['nodedisks', '-o', 'jsonpath={.metadata.name} {.spec.desired.state} {.spec.desired.owner}{"\\n"}'], ([, desired, owner], at) => {
            if (desired === 'Reserved' && owner) first(reservedFor, owner, at);
          }),
          watchLines(['pv', '-o', 'jsonpath={.metadata.name}{"\\n"}'], ([name = ''], at) => {
            if (name) first(pvCreated, name, at);
          }),
        ]
      : []),
  ];
  const t0 = Date.now();
  await k(['create', '-f', file]);
  await waitFor(`${count} pods Running in ${ns}`, 15, async () => running.size >= count);
  const took = diff(await writes(), before);
  const cpu = cpuUsed(cpuByProgram(), cpuBefore);
  const waitUp = runWaitByProgram();
  const driverUp = driverBefore ? await scrapeDriver() : undefined;
  const times = [...running.values()].map((t) => t - t0);
  let provisioning: Step[] | undefined;
  if (volume === 'pvc') {
    const kt = kubeletTimes();
    const pods = Array.from({ length: count }, (_, i) => `p${i}`);
    const pvs = pods.map((_, i) => pvOf.get(`c${i}`) ?? '');
    const at = (f: (i: number) => number | undefined) => pods.map((_, i) => f(i));
    const created = at(() => t0);
    const claimBound = at((i) => bound.get(`c${i}`));
    const picked = at((i) => nodePicked.get(`c${i}`));
    const podScheduled = at((i) => scheduled.get(`p${i}`));
    const kubelet = (key: keyof KubeletVolumeTimes) => at((i) => kt.get(pvs[i]!)?.[key]);
    const podRunning = at((i) => running.get(`p${i}`));
    provisioning = [
      step('created → the scheduler picks a node for the claim', created, picked),
      step('node picked → claim bound (CreateVolume, PV, binding)', picked, claimBound),
      step(
        'node picked → disk reserved (provisioner, CreateVolume)',
        picked,
        at((i) => reservedFor.get(pvOwner(pvs[i]!))),
      ),
      step(
        'disk reserved → PV created (provisioner)',
        at((i) => reservedFor.get(pvOwner(pvs[i]!))),
        at((i) => pvCreated.get(pvs[i]!)),
      ),
      step(
        'PV created → claim bound (PV controller)',
        at((i) => pvCreated.get(pvs[i]!)),
        claimBound,
      ),
      step('claim bound → pod bound to its node', claimBound, podScheduled),
      step('pod bound → kubelet mounts', podScheduled, kubelet('mountStarted')),
      step('NodeStageVolume (attach, mkfs, mount)', kubelet('mountStarted'), kubelet('staged')),
      step('NodePublishVolume', kubelet('staged'), kubelet('published')),
      step('published → Running', kubelet('published'), podRunning),
    ];
  }
  for (const stop of stops.splice(0)) stop();

  // Teardown in two steps, as a team frees a disk (a StatefulSet scaled down, then its claims deleted): first
  // the pods go and their kubelets unmount the volumes, the same teardown an emptyDir pod goes through; then
  // the claims go, each PV is released, and its disk is wiped and freed. Issue 41's "free again" starts at
  // the release of a PV no pod mounts any more.
  const released = new Map<string, number>();
  const diskOf = new Map<string, string>();
  const held = new Set<string>();
  const diskReleased = new Map<string, number>();
  const free = new Map<string, number>();
  const waitTeardownBefore = runWaitByProgram();
  const podsDeleted = Date.now();
  await k(['delete', 'pods', '--all', '-n', ns, '--wait=true', '--timeout=15m'], 16 * 60_000);
  const pvNames = [...pvOf.values()];
  // Each pod's own teardown ends when its kubelet starts to unmount its volumes: emptyDir and PVC pods alike.
  const uids = [...podUid.values()];
  await waitFor("every pod's volumes being unmounted", 15, async () => {
    const started = podUnmounts();
    return uids.every((uid) => started.has(uid));
  });
  const podsTornDown = podUnmounts();
  if (volume === 'pvc') {
    await volumesUnstaged(pvNames);
    stops.push(
      watchLines(['pv', '-o', 'jsonpath={.metadata.name} {.status.phase} {.spec.csi.volumeHandle}{"\\n"}'], ([name = '', phase, handle = ''], at) => {
        diskOf.set(name, handle.split('/')[0] ?? '');
        if (phase === 'Released') first(released, name, at);
      }),
      // A disk of the round is seen held first (the watch lists every disk as it starts), then given back
      // (DeleteVolume's release), then wiped and reported Available by its agent.
      watchLines(['nodedisks', '-o', 'jsonpath={.metadata.name} {.spec.desired.state} {.status.node.phase}{"\\n"}'], ([name = '', desired, phase], at) => {
        if (desired === 'Reserved') held.add(name);
        if (!held.has(name) || desired !== 'Available') return;
        first(diskReleased, name, at);
        if (phase === 'Available') first(free, name, at);
      }),
    );
    // Both watches have listed what is there before the claims go.
    await sleep(2000);
  }
  const claimsDeleted = Date.now();
  if (volume === 'pvc') await k(['delete', 'pvc', '--all', '-n', ns, '--wait=false']);
  await k(['delete', 'namespace', ns, '--wait=true', '--timeout=15m'], 16 * 60_000);
  // The next round starts with every disk free again: released, wiped by its agent, reported Available.
  await waitFor('every disk free again', 15, async () => (await freeDisks()) >= PER_NODE * NODE_NAMES.length);
  const cpuWait = { bringUp: cpuUsed(waitUp, waitBefore), teardown: cpuUsed(runWaitByProgram(), waitTeardownBefore) };
  // And with every container of the round gone: a pod leaves the API before its runtime has cleaned up,
  // and a round's shims still exiting would take CPU from the next round.
  const teardownS = Math.round((Date.now() - podsDeleted) / 1000);
  await containersGone(`${volume} ${count}`);
  let freeAgain: Step[] | undefined;
  let unmount: Step[] | undefined;
  let driver: Round['driverCalls'];
  let apiQueueWait: QueueWait[] | undefined;
  if (volume === 'pvc' && driverBefore && driverUp && queueBefore) {
    driver = { bringUp: driverCalls(driverUp, driverBefore), teardown: driverCalls(await scrapeDriver(), driverUp) };
    apiQueueWait = queueWaits(await scrapeQueueWait(), queueBefore);
  }
  if (volume === 'pvc') {
    await sleep(2000);
    for (const stop of stops.splice(0)) stop();
    const kt = kubeletTimes();
    const at = (f: (pv: string) => number | undefined) => pvNames.map(f);
    const kubelet = (key: keyof KubeletVolumeTimes) => at((pv) => kt.get(pv)?.[key]);
    const disk = (m: Map<string, number>) => at((pv) => m.get(diskOf.get(pv) ?? ''));
    unmount = [
      step(
        'pods deleted → kubelet unmounts this volume',
        at(() => podsDeleted),
        kubelet('unmountStarted'),
      ),
      step('NodeUnpublishVolume', kubelet('unmountStarted'), kubelet('unpublished')),
      step('NodeUnstageVolume', kubelet('unpublished'), kubelet('unstaged')),
    ];
    const rel = at((pv) => released.get(pv));
    freeAgain = [
      step('PV released → disk free again (the goal)', rel, disk(free)),
      step(
        'claims deleted → PV released (PV controller)',
        at(() => claimsDeleted),
        rel,
      ),
      step('PV released → disk given back (provisioner, DeleteVolume)', rel, disk(diskReleased)),
      step('disk given back → wiped and Available (agent)', disk(diskReleased), disk(free)),
    ];
  }
  const podTeardown = step(
    'pods deleted → kubelet starts unmounting (the pod torn down)',
    uids.map(() => podsDeleted),
    uids.map((uid) => podsTornDown.get(uid)),
  );
  const r: Round = {
    volume,
    count,
    p50Ms: quantile(times, 0.5),
    p95Ms: quantile(times, 0.95),
    lastMs: Math.max(...times),
    writes: Object.entries(took)
      .filter(([key]) => key !== 'leases')
      .reduce((sum, [, n]) => sum + n, 0),
    writesByResource: took,
    teardownS,
    cpuSeconds: cpu,
    ...(provisioning ? { provisioning } : {}),
    podTeardown,
    ...(unmount ? { unmount } : {}),
    ...(freeAgain ? { freeAgain } : {}),
    ...(driver ? { driverCalls: driver } : {}),
    ...(apiQueueWait ? { apiQueueWait } : {}),
    cpuWaitSeconds: cpuWait,
  };
  console.log(
    `${String(count).padStart(3)} pods, ${volume.padEnd(8)}: Running p50 ${(r.p50Ms / 1000).toFixed(1)} s, p95 ${(r.p95Ms / 1000).toFixed(1)} s, last ${(r.lastMs / 1000).toFixed(1)} s; ` +
      `${r.writes} API writes besides Leases (${Object.entries(took)
        .sort((a, b) => b[1] - a[1])
        .map(([key, n]) => `${key} ${n}`)
        .join(', ')}); deleted and free again in ${r.teardownS} s`,
  );
  console.log(
    `  CPU seconds until Running: ${Object.entries(cpu)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  );
  const waits = (w: Record<string, number>) =>
    Object.entries(w)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
  console.log(`  seconds waiting for a CPU until Running: ${waits(cpuWait.bringUp)}; from the delete to every disk free: ${waits(cpuWait.teardown)}`);
  if (provisioning) showSteps('provisioning', provisioning);
  showSteps('teardown', [podTeardown]);
  if (unmount) showSteps('unmount', unmount);
  if (freeAgain) showSteps('free again', freeAgain);
  if (driver) {
    showCalls("the driver's own time for its calls until every pod ran", driver.bringUp);
    showCalls("the driver's own time for its calls in the teardown", driver.teardown);
  }
  if (apiQueueWait) {
    console.log(
      `  the API server's queue wait (Priority and Fairness) over the round: ${apiQueueWait
        .map((w) => `${w.level} ×${w.requests} p95 ${((w.p95Ms ?? 0) / 1000).toFixed(2)} s, ${w.over10s} over 10 s`)
        .join('; ')}`,
    );
  }
  return r;
}

/** Waits until a round's containers are gone: its shims back to the idle count. */
async function containersGone(what: string): Promise<void> {
  // A shim with no process under it has no container left: under load containerd sometimes leaves one
  // behind for good (its container removed, "failed to handle container TaskExit event"), idle.
  const shimsMs = await waitFor("the round's containers gone", 5, async () => shims().filter((x) => x.children > 0).length <= idleShims).catch((err: Error) => {
    throw new Error(
      `${err.message}; the shims left (idle: ${idleShims}):\n${shims()
        .map((x) => `${x.pid} (${x.children} processes) ${x.cmd}`)
        .join('\n')}`,
    );
  });
  // The rest of the round's shims are exiting: a moment for them.
  await sleep(5000);
  const leaked = shims().filter((x) => x.children === 0);
  console.log(
    `  ${what}: the last of its containers went ${(shimsMs / 1000).toFixed(0)} s after its disks were free${leaked.length ? `; shims left with no container: ${leaked.map((x) => x.pid).join(', ')}` : ''}`,
  );
}

/** A StatefulSet's scale-up from 0, each pod on its own volume: a claim from its template, or an emptyDir. */
interface StatefulSetRound {
  volume: Volume;
  replicas: number;
  /** From the scale-up to the last pod Running (OrderedReady: each pod starts once the one before runs). */
  allRunningMs: number;
  /** Per pod, step by step; for claims, split where the claim is bound (the provisioning a pod waits for). */
  steps: Step[];
}

function statefulSet(ns: string, volume: Volume) {
  const template = pod(ns, 0, volume).spec;
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'db', namespace: ns },
    spec: {
      replicas: 0,
      serviceName: 'db',
      selector: { matchLabels: { app: 'db' } },
      template: { metadata: { labels: { app: 'db' } }, spec: { ...template, volumes: volume === 'emptyDir' ? template.volumes : [] } },
      ...(volume === 'pvc' ? { volumeClaimTemplates: [{ metadata: { name: 'd' }, spec: pvc(ns, 0).spec }] } : {}),
    },
  };
}

async function statefulSetRound(volume: Volume, replicas: number): Promise<StatefulSetRound> {
  const ns = `bench-sts-${volume.toLowerCase()}`;
  await benchNamespace(ns);
  const file = join(dataDir, `${ns}.json`);
  writeFileSync(file, JSON.stringify(statefulSet(ns, volume)));
  await k(['create', '-f', file]);
  const created = new Map<string, number>();
  const scheduled = new Map<string, number>();
  const running = new Map<string, number>();
  const bound = new Map<string, number>();
  const pvOf = new Map<string, string>();
  const stops = [
    watchLines(['-n', ns, 'pods', '-o', 'jsonpath={.metadata.name} {.status.phase} {.spec.nodeName}{"\\n"}'], ([name = '', phase, node], at) => {
      if (!name) return;
      first(created, name, at);
      if (node) first(scheduled, name, at);
      if (phase === 'Running') first(running, name, at);
    }),
    watchLines(['-n', ns, 'pvc', '-o', 'jsonpath={.metadata.name} {.status.phase} {.spec.volumeName}{"\\n"}'], ([name = '', phase, pv], at) => {
      if (phase !== 'Bound' || !pv) return;
      first(bound, name, at);
      pvOf.set(name, pv);
    }),
  ];
  await sleep(2000);
  const t0 = Date.now();
  await k(['-n', ns, 'scale', 'statefulset', 'db', `--replicas=${replicas}`]);
  await waitFor(`${replicas} StatefulSet pods Running in ${ns}`, 20, async () => running.size >= replicas);
  const allRunningMs = Math.max(...running.values()) - t0;
  const pods = Array.from({ length: replicas }, (_, i) => `db-${i}`);
  const at = (m: Map<string, number>, name: (p: string) => string = (p) => p) => pods.map((p) => m.get(name(p)));
  const claimBound = at(bound, (p) => `d-${p}`);
  const kt = kubeletTimes();
  const kubelet = (key: keyof KubeletVolumeTimes) => pods.map((p) => kt.get(pvOf.get(`d-${p}`) ?? '')?.[key]);
  const steps =
    volume === 'pvc'
      ? [
          step('pod created → Running', at(created), at(running)),
          step('pod created → its claim bound (provisioning)', at(created), claimBound),
          step('claim bound → pod bound to its node', claimBound, at(scheduled)),
          step('pod bound → kubelet mounts', at(scheduled), kubelet('mountStarted')),
          step('NodeStageVolume (attach, mkfs, mount)', kubelet('mountStarted'), kubelet('staged')),
          step('NodePublishVolume', kubelet('staged'), kubelet('published')),
          step('published → Running', kubelet('published'), at(running)),
        ]
      : [
          step('pod created → Running', at(created), at(running)),
          step('pod created → pod bound to its node', at(created), at(scheduled)),
          step('pod bound → Running', at(scheduled), at(running)),
        ];
  for (const stop of stops) stop();
  // Down to 0, the volumes unmounted, then the claims go and their disks are wiped before the next round.
  await k(['-n', ns, 'scale', 'statefulset', 'db', '--replicas=0']);
  await waitFor(`the StatefulSet pods gone from ${ns}`, 15, async () => (await k(['-n', ns, 'get', 'pods', '-o', 'name'])).trim() === '');
  const pvs = [...pvOf.values()];
  await volumesUnstaged(pvs);
  await k(['delete', 'namespace', ns, '--wait=true', '--timeout=15m'], 16 * 60_000);
  await waitFor('every disk free again', 15, async () => (await freeDisks()) >= PER_NODE * NODE_NAMES.length);
  await containersGone(`StatefulSet ${volume} ${replicas}`);
  console.log(`StatefulSet of ${volume} scaled 0 → ${replicas}: all Running after ${(allRunningMs / 1000).toFixed(1)} s`);
  showSteps('per pod', steps);
  return { volume, replicas, allRunningMs, steps };
}

/** The containerd shims running, with their command line (its `-id`) and how many processes they started. */
function shims(): { pid: number; cmd: string; children: number }[] {
  const out: { pid: number; cmd: string; children: number }[] = [];
  const parents = new Map<number, number>();
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parents.set(ppid, (parents.get(ppid) ?? 0) + 1);
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('containerd-shim'))
        out.push({ pid: Number(pid), cmd: readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim(), children: 0 });
    } catch {
      // gone meanwhile
    }
  }
  for (const x of out) x.children = parents.get(x.pid) ?? 0;
  return out;
}
let idleShims = Number.POSITIVE_INFINITY;

/**
 * CPU seconds used so far by each program on this machine (user + system, with its children's once it has
 * waited for them: a csi-node's mkfs and losetup runs count as its own), by the program's name.
 */
function cpuByProgram(): Map<string, number> {
  const out = new Map<string, number>();
  const tick = 100;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      // Kernel threads have no command line: by their name in brackets, as ps shows them.
      const name = cmd[0] ? programName(cmd) : `[${stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))}]`;
      const secs = (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / tick;
      out.set(name, (out.get(name) ?? 0) + secs);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** The programs whose wait for a CPU a round reports (their threads' run-queue time, /proc/<pid>/task/<tid>/schedstat). */
const WAIT_PROGRAMS = new Set(['csi-node', 'csi-controller', 'agent', 'operator', 'csi-provisioner', 'kube-apiserver', 'kubelet', 'containerd', 'nodedisks-toolrunner']);

/** Seconds each of WAIT_PROGRAMS' processes has waited, runnable, for a CPU, summed over its threads and by program. */
function runWaitByProgram(): Map<string, number> {
  const out = new Map<string, number>();
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const name = programName(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0'));
      if (!WAIT_PROGRAMS.has(name)) continue;
      let ns = 0;
      for (const tid of readdirSync(`/proc/${pid}/task`)) ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[1]);
      out.set(name, (out.get(name) ?? 0) + ns / 1e9);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** A process's program, by its command line: the NodeDisks bundles by their side, everything else by its executable. */
function programName(cmd: string[]): string {
  const line = cmd.join(' ');
  if (line.includes('node-disks-csi.mjs node')) return 'csi-node';
  if (line.includes('node-disks-csi.mjs controller')) return 'csi-controller';
  if (line.includes('node-disks-agent.mjs')) return 'agent';
  if (line.includes('node-disks-operator.mjs')) return 'operator';
  const exe = (cmd[0] ?? '').slice((cmd[0] ?? '').lastIndexOf('/') + 1);
  return exe === 'node' || exe === 'npm' ? `node ${(cmd[1] ?? '').slice((cmd[1] ?? '').lastIndexOf('/') + 1)}` : exe;
}

/** The programs that used the most CPU between two readings, in seconds. */
function cpuUsed(after: Map<string, number>, before: Map<string, number>): Record<string, number> {
  return Object.fromEntries(
    [...after]
      .map(([k, v]) => [k, Math.round((v - (before.get(k) ?? 0)) * 10) / 10] as const)
      .filter(([, v]) => v >= 1)
      .sort((a, b) => b[1] - a[1]),
  );
}

/** VmRSS (MiB) of every process whose command line matches, in the cluster's node cgroups. */
function rssOf(re: RegExp): number[] {
  const out: number[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/cgroup`, 'utf8').includes('/ndc-')) continue;
      if (!re.test(readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' '))) continue;
      out.push(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024);
    } catch {
      // gone meanwhile
    }
  }
  return out.map((x) => Math.round(x * 10) / 10);
}
/** The local cluster node (m02…) whose cgroup a process runs in, if any. */
function clusterNodeOf(pid: string): string | undefined {
  return /\/ndc-(m\d+)\//.exec(readFileSync(`/proc/${pid}/cgroup`, 'utf8'))?.[1];
}

/** The node side of each node: its agent, csi-node and tool runner processes, and the pod they run in. */
const NODE_SIDE = /node-disks-agent\.mjs|node-disks-csi\.mjs node|nodedisks-toolrunner/;

type NodeSideMemory = {
  /** Each process's VmRSS added up: a page two of them map counts twice. */
  vmRssSumMiB: number;
  /** The distinct physical pages they map together, each once. */
  togetherMiB: number;
  /** The agent pod's memory cgroup: usage less inactive file pages (cAdvisor's working set). */
  podWorkingSetMiB: number;
};

/** Per node, the memory of its node side (NodeSideMemory). */
async function nodeSideMemory(): Promise<Record<string, NodeSideMemory>> {
  const byNode = new Map<string, { pids: number[]; rss: number; podCgroup?: string }>();
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const node = clusterNodeOf(pid);
      const cmdline = node ? readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ') : '';
      if (!node || !NODE_SIDE.test(cmdline)) continue;
      const entry = byNode.get(node) ?? { pids: [], rss: 0 };
      entry.pids.push(Number(pid));
      entry.rss += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
      // The container's memory cgroup; its parent is the pod's.
      const container = /^\d+:memory:(\/.*)$/m.exec(readFileSync(`/proc/${pid}/cgroup`, 'utf8'))?.[1];
      if (container && /node-disks-agent\.mjs/.test(cmdline)) entry.podCgroup = join('/sys/fs/cgroup/memory', container, '..');
      byNode.set(node, entry);
    } catch {
      // gone meanwhile
    }
  }
  const out: Record<string, NodeSideMemory> = {};
  const round1 = (x: number) => Math.round(x * 10) / 10;
  for (const [node, { pids, rss, podCgroup }] of [...byNode].sort()) {
    let workingSet = Number.NaN;
    if (podCgroup) {
      const usage = Number(readFileSync(join(podCgroup, 'memory.usage_in_bytes'), 'utf8'));
      const inactive = Number(/^total_inactive_file (\d+)$/m.exec(readFileSync(join(podCgroup, 'memory.stat'), 'utf8'))?.[1] ?? 0);
      workingSet = (usage - inactive) / MiB;
    }
    out[node] = { vmRssSumMiB: round1(rss), togetherMiB: round1(await distinctMiB(pids)), podWorkingSetMiB: round1(workingSet) };
  }
  return out;
}

const memory = () => ({
  agent: rssOf(/node-disks-agent\.mjs/),
  csiNode: rssOf(/node-disks-csi\.mjs node/),
  toolRunner: rssOf(/nodedisks-toolrunner/),
  csiController: rssOf(/node-disks-csi\.mjs controller/),
  csiProvisioner: rssOf(/csi-provisioner /),
});

const run = startCluster(env);
let failed = false;
try {
  await waitForOutput(run, UP, 40 * 60_000);
  // csi-node's environment as this run asks, set at once (one rollout).
  const csiNodeEnv = [
    ...(CSI_TOOL_RUNNER ? [`TOOL_RUNNER=${CSI_IMAGE.toolRunner.path}`] : []),
    ...(CSI_FORMATS_AT_ONCE ? [`FORMATS_AT_ONCE=${CSI_FORMATS_AT_ONCE}`] : []),
    ...(CSI_NODE_OPTIONS !== undefined ? [`NODE_OPTIONS=${CSI_NODE_OPTIONS}`] : []),
  ];
  if (csiNodeEnv.length) {
    await k(['-n', 'node-disks-system', 'set', 'env', 'daemonset/node-disks-agent', '-c', 'csi-node', ...csiNodeEnv]);
    await k(['-n', 'node-disks-system', 'rollout', 'status', 'daemonset/node-disks-agent', '--timeout=300s']);
    console.log(`csi-node runs with ${csiNodeEnv.join(' ')}`);
  }
  seedNodeUniqueDisks(
    dataDir,
    Array.from({ length: PER_NODE }, () => DISK_BYTES),
  );
  await waitFor(`${PER_NODE * NODE_NAMES.length} disks Available`, 10, async () => (await freeDisks()) === PER_NODE * NODE_NAMES.length);
  await sleep(20_000);
  const idle = memory();
  const idleNodeSide = await nodeSideMemory();
  idleShims = shims().filter((x) => x.children > 0).length;
  const rounds: Round[] = [];
  let peak = idle;
  let peakNodeSide = idleNodeSide;
  for (const count of COUNTS) {
    rounds.push(await round('emptyDir', count));
    rounds.push(await round('pvc', count));
    if (count === Math.max(...COUNTS)) {
      peak = memory();
      peakNodeSide = await nodeSideMemory();
    }
  }
  const statefulSets: StatefulSetRound[] = [];
  if (STATEFULSET_REPLICAS > 0) for (const volume of ['emptyDir', 'pvc'] as const) statefulSets.push(await statefulSetRound(volume, STATEFULSET_REPLICAS));
  console.log('| pods | volume | Running p50 | p95 | last | API writes (not Leases) |');
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (const r of rounds)
    console.log(
      `| ${r.count} | ${r.volume === 'pvc' ? 'PVC nodedisks' : 'emptyDir'} | ${(r.p50Ms / 1000).toFixed(1)} s | ${(r.p95Ms / 1000).toFixed(1)} s | ${(r.lastMs / 1000).toFixed(1)} s | ${r.writes} |`,
    );
  const fmt = (xs: number[]) => xs.map((x) => `${x} MiB`).join(', ');
  console.log(
    `memory (VmRSS), idle with ${PER_NODE * 3} disks: agent ${fmt(idle.agent)}; csi-node ${fmt(idle.csiNode)}; tool runner ${fmt(idle.toolRunner)}; csi-controller ${fmt(idle.csiController)}; csi-provisioner ${fmt(idle.csiProvisioner)}`,
  );
  console.log(
    `memory after the largest round: agent ${fmt(peak.agent)}; csi-node ${fmt(peak.csiNode)}; tool runner ${fmt(peak.toolRunner)}; csi-controller ${fmt(peak.csiController)}; csi-provisioner ${fmt(peak.csiProvisioner)}`,
  );
  const nodeSideLine = (m: Record<string, NodeSideMemory>) =>
    Object.entries(m)
      .map(([node, x]) => `${node} ${x.togetherMiB} MiB together (VmRSS added up ${x.vmRssSumMiB}, pod working set ${x.podWorkingSetMiB})`)
      .join('; ');
  console.log(`node side, idle: ${nodeSideLine(idleNodeSide)}`);
  console.log(`node side, after the largest round: ${nodeSideLine(peakNodeSide)}`);
  record.save({
    rounds: rounds.map((r) => ({ ...r })),
    statefulSets: statefulSets.map((r) => ({ ...r })),
    memoryIdleMiB: idle,
    memoryAfterMiB: peak,
    nodeSideIdleMiB: idleNodeSide,
    nodeSideAfterMiB: peakNodeSide,
  });
  // The pods' logs go with the cluster's teardown: taken while it still runs.
  if (KEEP_LOGS) collectPodLogs(dataDir);
} catch (err) {
  collectPodLogs(dataDir);
  failed = true;
  throw err;
} finally {
  const s = Date.now();
  run.child.kill('SIGINT');
  console.log(`teardown: exit ${await run.exited} after ${((Date.now() - s) / 1000).toFixed(1)} s`);
  if (failed || KEEP_LOGS) keepLogs(dataDir, failed ? 'bench-csi' : 'bench-csi-passed');
  rmSync(dataDir, { recursive: true, force: true });
}
