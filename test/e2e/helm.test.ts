// The Helm route on the local 3-node cluster (root only; `npm run test:e2e`): a cluster started with
// `--install=none` (images imported, disks seeded, no NodeDisks), then the seed's `make images-load` (into
// this cluster, not minikube) and `make helm-install` with the locally built images, the seed's walk-through, `helm upgrade` with changed values, `helm test`
// (the chart's hook Pod waits for a disk that went missing, and passes once it is back), `helm rollback`
// to revision 1 and `make helm-uninstall`, every reservation and marker kept throughout. Between the
// walk-through and the upgrade, a real Prometheus scrapes the release's pods with the shipped alerts: an
// agent stopped with SIGSTOP and a refused reservation fire their alerts, which clear again. One cluster for
// the whole file; the tests run in order and each leaves the reservations it documents for the next.
import test from 'ava';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { ensureBinaries } from '../../hack/controlplane/binaries.ts';
import { readSysctls, sh } from '../../hack/cluster/host.ts';
import { CP_CGROUP, DISK_DIR, NODE_NAMES, nodeSpec, SWITCH_NS } from '../../hack/cluster/topology.ts';
import { clusterEnv, interruptAndCheckTornDown, onNode, startCluster, UP, until, waitForOutput, type Run } from '../../hack/cluster/run.ts';
import { ensureHelm, helm, runHelm } from '../../hack/helm/helm.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { Prometheus, type Alert } from '../../hack/promtool/prometheus.ts';
import { SHORT_FOR, shippedRuleGroups, withShortFor } from '../../hack/promtool/rules.ts';
import { heartbeatLeaseName } from '../../api/heartbeat-lease.ts';
import { FINALIZER, LABEL, MINUTES, NS, nodeDisksE2E } from './_nodedisks.ts';

const RELEASE = 'node-disks-manager';
const CRD = 'nodedisks.localtest.example.com';
const LOCAL_VALUES = 'charts/node-disks-manager/ci/local-cluster-values.yaml';
const [M02, M03, M04] = NODE_NAMES as [string, string, string];

const { dataDir, env } = clusterEnv();
const kubeconfig = join(dataDir, 'kubeconfig');
const before = await readSysctls();
let run: Run | undefined;
let kubectl = '';
let helmBin = '';
let prom: Prometheus | undefined;
const { k, ndName, seedLine, markers, allMarkers, reservations, reserve, pods } = nodeDisksE2E(dataDir, env, () => kubectl);

test.before(async () => {
  [kubectl, helmBin] = await Promise.all([ensureBinaries().then((b) => b.kubectl), ensureHelm()]);
  run = startCluster(env, ['--install=none']);
  await waitForOutput(run, UP, 40 * MINUTES);
});

test.after.always(async () => {
  await prom?.stop();
  if (run && run.child.exitCode === null) {
    run.child.kill('SIGINT');
    await run.exited;
  }
  rmSync(dataDir, { recursive: true, force: true });
});

const h = (args: string[]) => helm(helmBin, [...args, '-n', NS], { env: { KUBECONFIG: kubeconfig } });
/** The Makefile's target as a user runs it, pointed at this cluster by KUBECONFIG; its output. */
const make = (target: string, helmExtra?: string) =>
  sh('make', ['-C', REPO_ROOT, target, ...(helmExtra === undefined ? [] : [`HELM_EXTRA=${helmExtra}`])], { env: { ...process.env, KUBECONFIG: kubeconfig }, timeoutMs: 10 * MINUTES });
/** name → Ready condition status of every NodeDisk. */
async function readiness(): Promise<Record<string, string>> {
  const out = await k(['get', 'nodedisks', '-o', 'jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}']);
  return Object.fromEntries(
    out
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split('=') as [string, string]),
  );
}
const allReady = (r: Record<string, string>) => Object.keys(r).length === 9 && Object.values(r).every((s) => s === 'True');

/** Every pod of the release replaced by a Ready one (after a change to both pod templates). */
async function rolledOut(old: Set<string>): Promise<void> {
  await k(['-n', NS, 'rollout', 'status', 'daemonset/node-disks-agent', '--timeout=300s'], 6 * MINUTES);
  await k(['-n', NS, 'rollout', 'status', 'deployment/node-disks-operator', '--timeout=300s'], 6 * MINUTES);
  await until(
    'three new agents and two new controllers are Ready, and no old pod is left',
    3 * MINUTES,
    async () => [...(await pods('node-disks-agent')), ...(await pods('node-disks-operator'))],
    (p) => p.length === 5 && p.every((x) => !old.has(x.uid) && x.ready === 'True'),
  );
}
const podUids = async () => new Set([...(await pods('node-disks-agent')), ...(await pods('node-disks-operator'))].map((p) => p.uid));
const agentArgs = () => k(['-n', NS, 'get', 'daemonset/node-disks-agent', '-o', 'jsonpath={.spec.template.spec.containers[0].args}']);
const controllerAnnotations = () => k(['-n', NS, 'get', 'deployment/node-disks-operator', '-o', 'jsonpath={.spec.template.metadata.annotations}']);
/** revision → status of every revision of the release. */
async function history(): Promise<Record<number, string>> {
  const revs = JSON.parse(await h(['history', RELEASE, '-o', 'json'])) as { revision: number; status: string }[];
  return Object.fromEntries(revs.map((r) => [r.revision, r.status]));
}

let held: Record<string, string> = {};
let marked: Record<string, string[]> = {};

/** The manifest digest the node's containerd holds under `ref`, or '' when it has no such image. */
async function nodeImage(node: string, ref: string): Promise<string> {
  const socket = join(nodeSpec(dataDir, node, NODE_NAMES.indexOf(node)).dir, 'run-containerd', 'containerd.sock');
  const out = await sh('ctr', ['--address', socket, '-n', 'k8s.io', 'images', 'ls', `name==${ref}`]);
  return (
    out
      .split('\n')
      .slice(1)
      .find((l) => l.startsWith(`${ref} `))
      ?.split(/\s+/)[2] ?? ''
  );
}

test.serial("the seed's make images-load builds the images from this checkout and loads them into every node of the running local cluster", async (t) => {
  t.timeout(10 * MINUTES);
  const agent = 'docker.io/library/node-disks-agent:dev';
  const operator = 'docker.io/library/node-disks-operator:dev';
  // One node loses its agent image, so only a real load brings it back.
  const socket = join(nodeSpec(dataDir, M04, NODE_NAMES.indexOf(M04)).dir, 'run-containerd', 'containerd.sock');
  await sh('ctr', ['--address', socket, '-n', 'k8s.io', 'images', 'rm', agent]);
  t.is(await nodeImage(M04, agent), '');
  const t0 = Date.now();
  const out = await make('images-load');
  t.log(`make images-load: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  const loaded = Object.fromEntries([...out.matchAll(/^loaded (\S+)@(sha256:[0-9a-f]{64})$/gm)].map((m) => [m[1], m[2]]));
  t.truthy(loaded[agent], out);
  t.truthy(loaded[operator], out);
  t.regex(out, /rollout restart/);
  for (const node of NODE_NAMES) {
    t.is(await nodeImage(node, agent), loaded[agent], `${node}: ${agent}`);
    t.is(await nodeImage(node, operator), loaded[operator], `${node}: ${operator}`);
  }
});

test.serial("the seed's make helm-install, with the locally built images, installs NodeDisks: agents on 3 nodes, 2 controllers, the CSI driver, every NodeDisk Ready", async (t) => {
  t.timeout(10 * MINUTES);
  // --install=none: nothing of NodeDisks is there yet, but the disks are.
  t.false((await k(['get', 'crd', '-o', 'name'])).includes(CRD));
  t.deepEqual((await onNode(env, M03, ['ls', '-1', DISK_DIR])).split('\n').filter(Boolean), ['disk1.img', 'disk2.img', 'disk3.img']);
  const t0 = Date.now();
  // The Makefile's images (node-disks-operator:dev, node-disks-agent:dev) are the ones the cluster imported;
  // HELM_EXTRA replaces the seeder (its busybox cannot be pulled here) by the local cluster's network values.
  const out = await make('helm-install', `-f ${LOCAL_VALUES}`);
  t.regex(
    out,
    /upgrade --install node-disks-manager charts\/node-disks-manager -n node-disks-system --create-namespace\s+\\?\s*--set controller\.image\.repository=node-disks-operator\s+\\?\s*--set controller\.image\.tag=dev\s+\\?\s*--set agent\.image\.repository=node-disks-agent\s+\\?\s*--set agent\.image\.tag=dev/,
  );
  t.regex(out, /STATUS: deployed/);
  await until('every NodeDisk is reported and Ready', 5 * MINUTES, readiness, allReady);
  t.log(`make helm-install to nine Ready NodeDisks: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  // The seed's next step: kubectl -n node-disks-system get pods -o wide.
  // Each agent pod has two containers (the agent and the CSI driver's csi-node), as has the CSI controller's
  // (csi-controller and csi-provisioner); the chart installs the driver by default (csi.enabled).
  const wide = await until(
    'six pods Running with every container ready',
    3 * MINUTES,
    () => k(['-n', NS, 'get', 'pods', '-o', 'wide']),
    (o) => (o.match(/\s(1\/1|2\/2)\s+Running\s/g) ?? []).length === 6,
  );
  t.is((wide.match(/^node-disks-agent-\S+\s+2\/2\s+Running\s/gm) ?? []).length, 3);
  t.is((wide.match(/^node-disks-operator-\S+\s+1\/1\s+Running\s/gm) ?? []).length, 2);
  t.is((wide.match(/^node-disks-csi-controller-\S+\s+2\/2\s+Running\s/gm) ?? []).length, 1);
  t.deepEqual((await pods('node-disks-agent')).map((p) => p.node).sort(), [...NODE_NAMES]);
  t.deepEqual(await history(), { 1: 'deployed' });
});

test.serial('the seed walk-through on the Helm install: a label reserves a disk, its marker appears on that node only, and removing the label releases it', async (t) => {
  t.timeout(10 * MINUTES);
  const nd = ndName(M02, 'disk1');
  t.deepEqual(await allMarkers(), { [M02]: [], [M03]: [], [M04]: [] });
  await reserve(M02, 'disk1');
  t.is(await k(['get', 'nodedisk', nd, '-o', 'jsonpath={.spec.nodeName} {.spec.diskID}']), `${M02} disk1`);
  t.is(await onNode(env, M02, ['cat', `${DISK_DIR}/disk1.img.reserved`]), 'reserved\n');
  t.deepEqual(await allMarkers(), { [M02]: ['disk1.img.reserved'], [M03]: [], [M04]: [] }, 'the marker is on that node only');
  await k(['label', 'nodedisk', nd, `${LABEL}-`]);
  t.is(
    await until(
      'the release',
      3 * MINUTES,
      () => seedLine(nd),
      (l) => l === 'Available  Available 67108864',
    ),
    'Available  Available 67108864',
  );
  await until(
    'the marker is gone',
    2 * MINUTES,
    () => markers(M02),
    (m) => m.length === 0,
  );
  // Two reservations the helm operations below must keep.
  await reserve(M03, 'disk2');
  await reserve(M04, 'disk1');
  held = await reservations();
  marked = await allMarkers();
  t.is(held[ndName(M03, 'disk2')], `Reserved auto Reserved ["${FINALIZER}"]`);
  t.is(held[ndName(M04, 'disk1')], `Reserved auto Reserved ["${FINALIZER}"]`);
  t.deepEqual(marked, { [M02]: [], [M03]: ['disk2.img.reserved'], [M04]: ['disk1.img.reserved'] });
});

// ---- a real Prometheus scraping the release's pods -----------------------------------------------

/** One pod of the release as Prometheus scrapes it: its node's address (host network) and its port. */
interface Scraped {
  name: string;
  app: string;
  node: string;
  address: string;
}
async function scrapedPods(): Promise<Scraped[]> {
  const out = await k([
    '-n',
    NS,
    'get',
    'pods',
    '-o',
    'jsonpath={range .items[*]}{.metadata.name} {.metadata.labels.app\\.kubernetes\\.io/name} {.spec.nodeName} {.status.hostIP}:{.spec.containers[0].ports[0].containerPort}{"\\n"}{end}',
  ]);
  return out
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [name = '', app = '', node = '', address = ''] = l.split(' ');
      return { name, app, node, address };
    });
}

/**
 * Prometheus (the pinned Debian build) in the cluster's switch namespace, where every node's host-network
 * ports are reachable over the bridge, its API reached from here through a relay (hack/promtool/prometheus.ts);
 * lifeline ends it with this process, the cluster's teardown with its cgroup. Started by whichever
 * alert test runs first, stopped by the last one.
 */
async function prometheus(): Promise<Prometheus> {
  if (prom) return prom;
  const targets = await scrapedPods();
  const agents = targets.filter((p) => p.app === 'node-disks-agent');
  const controllers = targets.filter((p) => p.app === 'node-disks-operator');
  // Target labels as the shipped PodMonitor (namespace, pod; node by relabelling) and ServiceMonitor
  // (namespace, pod) give them: the agent alerts group by them.
  prom = await Prometheus.start({
    netns: { name: SWITCH_NS, cgroup: CP_CGROUP },
    groups: withShortFor(shippedRuleGroups()),
    jobs: [
      { job: 'node-disks-operator', targets: controllers.map((p) => ({ address: p.address, labels: { namespace: NS, pod: p.name } })) },
      { job: 'node-disks-agent', targets: agents.map((p) => ({ address: p.address, labels: { namespace: NS, pod: p.name, node: p.node } })) },
    ],
  });
  const p = prom;
  await until(
    'Prometheus scrapes the three agents and the two controllers',
    2 * MINUTES,
    () => p.targets(),
    (ts) => ts.length === 5 && ts.every((x) => x.health === 'up'),
  );
  return p;
}
const active = async (alertname: string, node: string): Promise<Alert | undefined> => (await prom!.alerts()).find((a) => a.labels.alertname === alertname && a.labels.node === node);

/** The host PID of the process a pod's (first) container runs, from its node's containerd. */
async function containerPid(node: string, pod: string): Promise<number> {
  const id = (await k(['-n', NS, 'get', 'pod', pod, '-o', 'jsonpath={.status.containerStatuses[0].containerID}'])).replace(/^containerd:\/\//, '');
  const socket = join(nodeSpec(dataDir, node, NODE_NAMES.indexOf(node)).dir, 'run-containerd', 'containerd.sock');
  const line = (await sh('ctr', ['--address', socket, '-n', 'k8s.io', 'tasks', 'ls'])).split('\n').find((l) => l.startsWith(`${id} `));
  const pid = Number(line?.split(/\s+/)[1]);
  if (!id || !pid) throw new Error(`no task of ${pod}'s container ${id} on ${node}`);
  return pid;
}
const restarts = (pod: string) => k(['-n', NS, 'get', 'pod', pod, '-o', 'jsonpath={.status.containerStatuses[0].restartCount}']);

test.serial(
  "Prometheus, scraping the release's pods with the shipped alerts: the agent container on m02 stopped with SIGSTOP fires NodeDisksAgentHeartbeatStale for m02; after SIGCONT it clears",
  async (t) => {
    t.timeout(10 * MINUTES);
    const t0 = Date.now();
    const p = await prometheus();
    t.log(`Prometheus in ${SWITCH_NS} ready ${p.startedInMs} ms after its start, every target up ${((Date.now() - t0) / 1000).toFixed(1)} s after the test's`);
    await until(
      'no stale-agent alert while the agents run',
      MINUTES,
      () => active('NodeDisksAgentHeartbeatStale', M02),
      (a) => a === undefined,
    );
    const [agent] = await pods('node-disks-agent').then((ps) => ps.filter((x) => x.node === M02));
    const pid = await containerPid(M02, agent!.name);
    t.regex(await sh('cat', [`/proc/${pid}/cmdline`]), /node-disks-agent\.mjs/, 'the PID is the agent program');
    const restartsBefore = await restarts(agent!.name);
    const lease = heartbeatLeaseName(M02);
    const leaseSpec = () => k(['-n', NS, 'get', 'lease', lease, '-o', 'jsonpath={.spec.leaseDurationSeconds} {.spec.renewTime}']);
    const [duration, renewedBefore] = (await leaseSpec()).split(' ');
    t.is(duration, '240', 'the install renews every 60 s, and the Lease lasts four periods');
    const agentUp = async () => (await prom!.query(`up{job="node-disks-agent",node="${M02}"}`))[0]?.value?.[1];
    process.kill(pid, 'SIGSTOP');
    const stoppedAt = Date.now();
    let alert: Alert;
    try {
      // The install's Lease lasts 240 s, and its liveness probe (every 20 s, three failures, then a 15 s
      // grace period) restarts a stopped agent within about 75 s: with the shipped timing a stopped agent
      // is restarted, never stale. So the Lease the stopped agent last wrote is given 10 s (the agent's own
      // next renewal writes 240 again): the controller judges it expired, from its own record of the last
      // renewal, while the process is still stopped.
      await k(['-n', NS, 'patch', 'lease', lease, '--type=merge', '-p', '{"spec":{"leaseDurationSeconds":10}}']);
      alert = (await until(
        'NodeDisksAgentHeartbeatStale firing for m02',
        MINUTES,
        () => active('NodeDisksAgentHeartbeatStale', M02),
        (a) => a?.state === 'firing',
      )) as Alert;
      // Stopped indeed: its /metrics does not answer, and it has not renewed since.
      await until("m02's agent target down", MINUTES, agentUp, (v) => v === '0');
      t.is((await leaseSpec()).split(' ')[1], renewedBefore, 'no renewal while stopped');
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const fired = Date.now() - stoppedAt;
    t.is(alert.labels.severity, 'critical');
    t.regex(alert.annotations.summary ?? '', new RegExp(`The NodeDisks agent on ${M02} stopped renewing its heartbeat`));
    t.regex(alert.annotations.runbook_url ?? '', /runbooks\.md#nodedisksagentheartbeatstale$/);
    t.is(Number(alert.value), 3, "m02's three NodeDisks are stale");
    t.deepEqual(
      (await prom!.alerts()).filter((a) => a.labels.alertname === 'NodeDisksAgentHeartbeatStale').map((a) => a.labels.node),
      [M02],
      'only the stopped node',
    );
    const resumedAt = Date.now();
    // The agent renews at its next period (within 60 s), with the install's duration.
    await until(
      'NodeDisksAgentHeartbeatStale cleared',
      3 * MINUTES,
      () => active('NodeDisksAgentHeartbeatStale', M02),
      (a) => a === undefined,
    );
    const cleared = Date.now() - resumedAt;
    const [durationAfter, renewedAfter] = (await leaseSpec()).split(' ');
    t.is(durationAfter, '240', "the agent's renewal wrote the install's duration again");
    t.not(renewedAfter, renewedBefore);
    await until("m02's agent target up again", MINUTES, agentUp, (v) => v === '1');
    t.is(await restarts(agent!.name), restartsBefore, 'the stopped process itself resumed (its liveness probe did not restart it)');
    await until('every NodeDisk is Ready again', 2 * MINUTES, readiness, allReady);
    t.log(`stale-agent alert firing ${fired} ms after SIGSTOP (Lease given 10 s, for: ${SHORT_FOR}), cleared ${cleared} ms after SIGCONT; test ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  },
);

test.serial(
  'Prometheus: a reservation refused (the label asks for a disk reserved by hand for team-db) fires NodeDisksReservationRefused for m02; it clears once the label is removed, and the hand release restores every reservation',
  async (t) => {
    t.timeout(10 * MINUTES);
    const t0 = Date.now();
    await prometheus();
    const nd = ndName(M02, 'disk2');
    const before = await reservations();
    const markedBefore = await allMarkers();
    await until(
      'no refused-reservation alert yet',
      MINUTES,
      () => active('NodeDisksReservationRefused', M02),
      (a) => a === undefined,
    );
    await k(['patch', 'nodedisk', nd, '--type=merge', '-p', '{"spec":{"desired":{"state":"Reserved","owner":"team-db"}}}']);
    await until(
      'the hand reservation is carried out',
      3 * MINUTES,
      () => seedLine(nd),
      (l) => l === 'Reserved team-db Reserved 67108864',
    );
    await k(['label', 'nodedisk', nd, `${LABEL}=true`]);
    const labelledAt = Date.now();
    const alert = (await until(
      'NodeDisksReservationRefused firing for m02',
      2 * MINUTES,
      () => active('NodeDisksReservationRefused', M02),
      (a) => a?.state === 'firing',
    )) as Alert;
    const fired = Date.now() - labelledAt;
    t.is(await k(['get', 'nodedisk', nd, '-o', 'jsonpath={.status.conditions[?(@.type=="Accepted")].status} {.status.conditions[?(@.type=="Accepted")].reason}']), 'False ReservedByOther');
    t.is(alert.labels.severity, 'warning');
    t.is(Number(alert.value), 1);
    t.regex(alert.annotations.runbook_url ?? '', /runbooks\.md#nodedisksreservationrefused$/);
    await k(['label', 'nodedisk', nd, `${LABEL}-`]);
    const unlabelledAt = Date.now();
    await until(
      'NodeDisksReservationRefused cleared',
      2 * MINUTES,
      () => active('NodeDisksReservationRefused', M02),
      (a) => a === undefined,
    );
    const cleared = Date.now() - unlabelledAt;
    t.is(await seedLine(nd), 'Reserved team-db Reserved 67108864', "the refused label never touched team-db's reservation");
    // The hand release: the reservations and markers the following tests hold the release to.
    await k(['patch', 'nodedisk', nd, '--type=merge', '-p', '{"spec":{"desired":{"state":"Available","owner":null}}}']);
    await until('the hand release', 3 * MINUTES, reservations, (r) => JSON.stringify(r) === JSON.stringify(before));
    await until('the marker of disk2 is gone from m02', 2 * MINUTES, allMarkers, (m) => JSON.stringify(m) === JSON.stringify(markedBefore));
    t.deepEqual(await reservations(), held);
    t.deepEqual(await allMarkers(), marked);
    t.log(`refused-reservation alert firing ${fired} ms after the label, cleared ${cleared} ms after its removal; test ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    await prom!.stop();
    prom = undefined;
  },
);

test.serial('helm upgrade with changed values (agent.scanPeriod, a controller pod annotation) rolls every pod and keeps every reservation and marker', async (t) => {
  t.timeout(15 * MINUTES);
  const old = await podUids();
  t.is(old.size, 5);
  const t0 = Date.now();
  const out = await make('helm-install', `-f ${LOCAL_VALUES} --set agent.scanPeriod=15s --set controller.podAnnotations.e2e-upgrade=two`);
  t.regex(out, /REVISION: 2/);
  t.regex(await agentArgs(), /"--rescan-interval=15s"/);
  t.regex(await controllerAnnotations(), /"e2e-upgrade":"two"/);
  await rolledOut(old);
  t.log(`helm upgrade to every pod replaced and Ready: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  t.deepEqual(await reservations(), held);
  t.deepEqual(await allMarkers(), marked);
  t.true(allReady(await readiness()));
  t.deepEqual(await history(), { 1: 'superseded', 2: 'deployed' });
});

test.serial("helm test runs the chart's hook Pod: it waits while a disk is missing, and passes once every NodeDisk is Ready", async (t) => {
  t.timeout(10 * MINUTES);
  const nd = ndName(M02, 'disk3');
  const image = `${DISK_DIR}/disk3.img`;
  await onNode(env, M02, ['rm', image]);
  await until(
    `${nd} is not Ready`,
    2 * MINUTES,
    () => k(['get', 'nodedisk', nd, '-o', 'jsonpath={.status.node.phase} {.status.conditions[?(@.type=="Ready")].status}']),
    (s) => s === 'Missing False',
  );
  const t0 = Date.now();
  let settled = false;
  const testing = runHelm(helmBin, ['test', RELEASE, '-n', NS, '--timeout', '5m'], { env: { KUBECONFIG: kubeconfig } }).finally(() => (settled = true));
  const pod = `${RELEASE}-test-ready`;
  await until(
    'the hook Pod says which NodeDisk it waits for',
    3 * MINUTES,
    () => k(['-n', NS, 'logs', pod]),
    (l) => l.includes(`waiting until these NodeDisks are Ready: ${nd}`),
  );
  t.false(settled, 'helm test still waits');
  await onNode(env, M02, ['truncate', '-s', '64M', image]);
  const r = await testing;
  t.is(r.code, 0, r.stderr);
  t.regex(r.stdout, new RegExp(`TEST SUITE:\\s+${pod}[\\s\\S]*Phase:\\s+Succeeded`));
  t.log(`helm test, from its start to its pass after the disk came back: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  t.true(allReady(await readiness()));
  // Succeeded, the hook Pod is deleted (hook-delete-policy hook-succeeded).
  await until(
    'the hook Pod is gone',
    MINUTES,
    () => k(['-n', NS, 'get', 'pods', '-l', 'app.kubernetes.io/name=node-disks-test', '-o', 'name']),
    (o) => o === '',
  );
  t.deepEqual(await reservations(), held);
  t.deepEqual(await allMarkers(), marked);
});

test.serial('helm rollback to revision 1 restores its values, rolls every pod and keeps every reservation and marker', async (t) => {
  t.timeout(15 * MINUTES);
  const old = await podUids();
  await h(['rollback', RELEASE, '1']);
  t.notRegex(await agentArgs(), /rescan-interval/);
  t.notRegex(await controllerAnnotations(), /e2e-upgrade/);
  await rolledOut(old);
  t.deepEqual(await reservations(), held);
  t.deepEqual(await allMarkers(), marked);
  t.true(allReady(await readiness()));
  t.deepEqual(await history(), { 1: 'superseded', 2: 'superseded', 3: 'deployed' });
});

test.serial('make helm-uninstall removes the release but keeps the CRD, every NodeDisk and its reservation, and the markers', async (t) => {
  t.timeout(10 * MINUTES);
  await make('helm-uninstall');
  await until(
    'no pod of the release is left',
    3 * MINUTES,
    () => k(['-n', NS, 'get', 'pods', '-o', 'name']),
    (o) => o === '',
  );
  t.is(await k(['-n', NS, 'get', 'daemonsets,deployments,services', '-o', 'name']), '');
  t.deepEqual(JSON.parse(await h(['list', '-o', 'json'])), []);
  t.is(await k(['get', 'crd', CRD, '-o', 'jsonpath={.metadata.annotations.helm\\.sh/resource-policy}']), 'keep');
  t.deepEqual(await reservations(), held);
  t.deepEqual(await allMarkers(), marked);
});

test.serial('Ctrl-C tears the cluster down and leaves the host as found', async (t) => {
  t.timeout(5 * MINUTES);
  await interruptAndCheckTornDown(t, run!, before);
});
