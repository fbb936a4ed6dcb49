// The shipped alerts against a real Prometheus (Debian's 2.42, hack/promtool/prometheus.ts) scraping the
// real agent and controller on a real control plane: every vector selector of every alert expression (as
// Prometheus' own PromQL parser lists them, hack/promql) has series, so a typo'd metric or label fails;
// an agent stopped with SIGSTOP fires the stale-agent alert and it clears after SIGCONT; a refused
// reservation fires its alert and it clears once the label is removed; every query of the Grafana
// dashboard returns series from the same Prometheus, which also scrapes both sides of the CSI driver.
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { status as grpcStatus } from '@grpc/grpc-js';
import test from 'ava';
import { markerName } from '../../agent/markers.ts';
import { CONDITION, DEFAULT_DISK_DIR, DEFAULT_SYSTEM_NAMESPACE, LABEL_AUTO_RESERVE } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { seedDisks, startAgent, startController, startCsiController, startCsiNode, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { ensurePromql, vectorSelectors } from '../../hack/promql/promql.ts';
import { Prometheus, type Alert } from '../../hack/promtool/prometheus.ts';
import { SHORT_FOR, shippedRuleGroups, withShortFor, type Rule } from '../../hack/promtool/rules.ts';
import { csiClient } from '../../hack/lib/csi-client.ts';
import { nodeDisksFor, restFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const DASHBOARD = join(REPO_ROOT, 'kustomize/components/grafana-dashboard/nodedisks-dashboard.json');
/** Long enough for a loaded machine (2 shared cores): Lease expiry, a scrape, an evaluation, `for:`. */
const DEADLINE_MS = 60_000;
/** The healthy node (stale and refused alerts); the node whose agent's API writes are refused; a node whose controller writes are refused. */
const NODE = 'node-prom-a';
const NODE_REFUSED_CREATES = 'node-prom-b';
const NODE_REFUSED_CONTROLLER = 'node-prom-c';
const FOR = SHORT_FOR;

const shipped = shippedRuleGroups();
const alertRules = shipped.flatMap((g) => g.rules).filter((r): r is Rule & { alert: string } => r.alert !== undefined);
const groups = withShortFor(shipped, FOR);

let work = '';
let prom: Prometheus | undefined;
let promqlBin = '';
const started: Program[] = [];
let agent: Program;
const admin = () => nodeDisksFor(controlPlane().admin());
const figures: string[] = [];

const httpPort = (p: Program) => eventually(`${p.name}'s http port`, async () => Number(/"httpPort":(\d+)/.exec(p.logsOfThisRun())?.[1]) || undefined, DEADLINE_MS);
const kubectlApply = (yaml: string) => controlPlane().kubectl(controlPlane().admin(), ['apply', '--server-side', '--field-manager=nodedisks-test', '-f', '-'], yaml);
const leasePath = (node: string) => `/apis/coordination.k8s.io/v1/namespaces/${DEFAULT_SYSTEM_NAMESPACE}/leases/node-disks-agent-${node}`;

/** A NodeDisk as an agent would create it, written by the admin (for a node no agent runs on). */
const adminNodeDisk = (node: string, diskID: string): NodeDisk => ({
  apiVersion: 'localtest.example.com/v1alpha1',
  kind: 'NodeDisk',
  metadata: { name: nodeDiskName(node, diskID) },
  spec: { nodeName: node, diskID, path: `${DEFAULT_DISK_DIR}/${diskID}.img` },
});

/** The programs' and Prometheus' logs, for a failed test or a failed setup. */
function printLogs(): void {
  for (const p of started) console.error(`----- ${p.name} -----\n${p.logs(6000)}`);
  if (prom) console.error(`----- prometheus -----\n${prom.logs(12_000)}`);
}

test.serial.before(async (t) => {
  t.timeout(20 * 60_000, 'building the PromQL parser, fetching Prometheus and starting everything took more than 20 minutes');
  try {
    await setUp();
  } catch (err) {
    printLogs();
    throw err;
  }
});

async function setUp(): Promise<void> {
  const cp = controlPlane();
  work = await mkdtemp(join(tmpdir(), 'nodedisks-prometheus-test-'));
  const logDir = join(work, 'logs');
  promqlBin = await ensurePromql();

  // A failed reconcile needs a controller write the API server refuses. A test-only admission policy
  // refuses the controller's updates of NODE_REFUSED_CONTROLLER's NodeDisks; it is in force before the
  // controller starts: the admin's probe annotation (refused by the same policy) says when.
  await kubectlApply(
    JSON.stringify({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: 'test-refuse-controller-writes' },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: {
          resourceRules: [{ apiGroups: ['localtest.example.com'], apiVersions: ['*'], operations: ['UPDATE'], resources: ['nodedisks', 'nodedisks/status'] }],
        },
        validations: [
          {
            expression: `object.spec.nodeName != '${NODE_REFUSED_CONTROLLER}' || !request.userInfo.username.endsWith(':node-disks-operator')`,
            message: 'refused by the test: the controller may not update this NodeDisk',
          },
          {
            expression: "!has(object.metadata.annotations) || !('nodedisks.test/probe' in object.metadata.annotations)",
            message: 'refused by the test: the policy is in force',
          },
        ],
      },
    }),
  );
  await kubectlApply(
    JSON.stringify({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: 'test-refuse-controller-writes' },
      spec: { policyName: 'test-refuse-controller-writes', validationActions: ['Deny'] },
    }),
  );
  const refused = await admin().create(adminNodeDisk(NODE_REFUSED_CONTROLLER, 'disk1'), { fieldManager: 'nodedisks-test' });
  await admin().applyStatus(
    {
      apiVersion: 'localtest.example.com/v1alpha1',
      kind: 'NodeDisk',
      metadata: { name: refused.metadata.name ?? '' },
      status: { node: { phase: 'Available', capacityBytes: 1024 * 1024, lastSeenTime: new Date().toISOString() } },
    },
    { fieldManager: 'nodedisks-test' },
  );
  await eventually(
    'the test admission policy in force',
    async () => {
      try {
        await admin().mergePatch(refused.metadata.name ?? '', { metadata: { annotations: { 'nodedisks.test/probe': 'x' } } }, { fieldManager: 'nodedisks-test' });
        return false;
      } catch (err) {
        return /the policy is in force/.test((err as Error).message);
      }
    },
    DEADLINE_MS,
  );

  // NODE: disk1 for the refused reservation, disk2 deleted once discovered (Missing), disk3 with a
  // directory where its reservation marker goes (the agent cannot remove it: Error, marker errors).
  const diskDir = join(work, NODE);
  await seedDisks(diskDir, 3, 1024 * 1024);
  await mkdir(join(diskDir, markerName('disk3')));
  // NODE_REFUSED_CREATES: an agent whose spec.path is outside the install's disk dir, so the admission
  // policy refuses its creates: the agent's API errors.
  const otherDir = join(work, NODE_REFUSED_CREATES);
  await seedDisks(otherDir, 1, 1024 * 1024);

  // The controller's leader gauge and NodeDisk counts; a 1 s heartbeat: the Lease lasts 4 s.
  const controller = await startController(cp, { logDir });
  started.push(controller);
  agent = await startAgent(cp, { node: NODE, diskDir, logDir, heartbeat: '1s', rescanInterval: '1s' });
  started.push(agent);
  const other = await startAgent(cp, { node: NODE_REFUSED_CREATES, diskDir: otherDir, hostDiskDir: '/srv/not-the-install-disk-dir', logDir, heartbeat: '1s', rescanInterval: '1s' });
  started.push(other);
  // The CSI driver, both sides: their call histogram is on the dashboard.
  const csiAddress = join(work, 'csi.sock');
  const csiController = await startCsiController(cp, { logDir, csiAddress });
  started.push(csiController);
  const csiNodeAddress = join(work, 'csi-node.sock');
  const csiNode = startCsiNode({ logDir, csiAddress: csiNodeAddress, node: NODE, diskDir });
  started.push(csiNode);
  const [controllerPort, agentPort, otherPort, csiPort, csiNodePort] = await Promise.all([httpPort(controller), httpPort(agent), httpPort(other), httpPort(csiController), httpPort(csiNode)]);

  // Target labels as the PodMonitor and the Prometheus Operator give an agent (namespace, pod, node by
  // relabelling) and as the ServiceMonitor gives the controller: the agent alerts group by them.
  prom = await Prometheus.start({
    groups,
    jobs: [
      { job: 'node-disks-operator', targets: [{ address: `127.0.0.1:${controllerPort}`, labels: { namespace: DEFAULT_SYSTEM_NAMESPACE, pod: 'node-disks-operator-0' } }] },
      {
        job: 'node-disks-agent',
        targets: [NODE, NODE_REFUSED_CREATES].map((node, i) => ({
          address: `127.0.0.1:${[agentPort, otherPort][i]}`,
          labels: { namespace: DEFAULT_SYSTEM_NAMESPACE, pod: `node-disks-agent-${node}`, node },
        })),
      },
      // csi-node as the agents' PodMonitor labels it (it runs in the agent's pod); the CSI controller as its own PodMonitor does, with no node.
      { job: 'node-disks-agent-csi', targets: [{ address: `127.0.0.1:${csiNodePort}`, labels: { namespace: DEFAULT_SYSTEM_NAMESPACE, pod: `node-disks-agent-${NODE}`, node: NODE } }] },
      { job: 'node-disks-csi-controller', targets: [{ address: `127.0.0.1:${csiPort}`, labels: { namespace: DEFAULT_SYSTEM_NAMESPACE, pod: 'node-disks-csi-controller-0' } }] },
    ],
  });
  figures.push(`Prometheus ready ${prom.startedInMs} ms after start`);

  await eventually(`${NODE}'s 3 disks discovered`, async () => (await admin().list({ fieldSelector: `spec.nodeName=${NODE}` })).items.length === 3, DEADLINE_MS);
  await unlink(join(diskDir, 'disk2.img'));
  await eventually(
    'every target scraped',
    async () => {
      const targets = await prom!.targets();
      return targets.length === 5 && targets.every((x) => x.health === 'up');
    },
    DEADLINE_MS,
  );
  // A call each side times: as csi-provisioner asks for CSIStorageCapacity, and as the kubelet asks a node.
  const controllerSide = csiClient(csiAddress, 'Controller');
  const nodeSide = csiClient(csiNodeAddress, 'Node');
  try {
    await controllerSide.call.GetCapacity({ volume_capabilities: [{ access_mode: { mode: 'SINGLE_NODE_WRITER' }, mount: { fs_type: 'ext4', mount_flags: [] } }] });
    await nodeSide.call.NodeGetCapabilities({});
    // A refused call, as the alert on failing CSI calls counts them: stats for no volume are an InvalidArgument.
    await nodeSide.call.NodeGetVolumeStats({ volume_id: '', volume_path: '' }).then(
      () => {
        throw new Error('NodeGetVolumeStats without a volume was answered');
      },
      (err: { code?: number }) => {
        if (err.code !== grpcStatus.INVALID_ARGUMENT) throw err;
      },
    );
  } finally {
    controllerSide.close();
    nodeSide.close();
  }

  // A failed heartbeat renewal: the admin hands NODE's Lease to another holder, which the heartbeat
  // admission policy refuses the agent to renew; handed back, it renews again.
  const rest = restFor(cp.admin());
  await eventually(`${NODE}'s heartbeat Lease`, () => rest.request('GET', leasePath(NODE)).catch(() => undefined), DEADLINE_MS);
  await rest.request('PATCH', leasePath(NODE), { body: { spec: { holderIdentity: 'someone-else' } }, contentType: 'application/merge-patch+json' });
  await eventually('a failed heartbeat renewal scraped', async () => (await prom!.query(`nodedisks_agent_heartbeat_renewals_total{result="failed",node="${NODE}"} > 0`)).length > 0, DEADLINE_MS);
  const renewed = async () => Number((await prom!.query(`nodedisks_agent_heartbeat_renewals_total{result="renewed",node="${NODE}"}`))[0]?.value?.[1] ?? 0);
  const before = await renewed();
  await rest.request('PATCH', leasePath(NODE), { body: { spec: { holderIdentity: NODE } }, contentType: 'application/merge-patch+json' });
  await eventually('the heartbeat renewed again', async () => (await renewed()) > before, DEADLINE_MS);
}

test.afterEach.always((t) => {
  if (!t.passed) printLogs();
});

test.after.always(async () => {
  if (figures.length > 0) console.error(`prometheus.test.ts figures: ${figures.join('; ')}`);
  await prom?.stop();
  await Promise.all(started.map((p) => p.stop()));
  if (work) await rm(work, { recursive: true, force: true });
});

const active = async (alertname: string, node: string): Promise<Alert | undefined> => (await prom!.alerts()).find((a) => a.labels.alertname === alertname && a.labels.node === node);
const firing = async (alertname: string, node: string) => {
  const a = await active(alertname, node);
  return a?.state === 'firing' ? a : undefined;
};

test.serial('an agent stopped with SIGSTOP fires NodeDisksAgentHeartbeatStale for its node; after SIGCONT it clears', async (t) => {
  t.timeout(4 * DEADLINE_MS, 'each wait has its own deadline; this bounds their sum');
  await eventually('no stale-agent alert while the agent runs', async () => (await active('NodeDisksAgentHeartbeatStale', NODE)) === undefined, DEADLINE_MS);
  await agent.signal('SIGSTOP');
  const stoppedAt = Date.now();
  let alert: Alert;
  try {
    alert = await eventually('NodeDisksAgentHeartbeatStale firing', () => firing('NodeDisksAgentHeartbeatStale', NODE), DEADLINE_MS, 250);
  } finally {
    await agent.signal('SIGCONT');
  }
  const fired = Date.now() - stoppedAt;
  t.is(alert.labels.severity, 'critical');
  t.regex(alert.annotations.summary ?? '', new RegExp(`The NodeDisks agent on ${NODE} stopped renewing its heartbeat`));
  t.regex(alert.annotations.runbook_url ?? '', /runbooks\.md#nodedisksagentheartbeatstale$/);
  t.is(Number(alert.value), 3, "the node's three NodeDisks are stale");
  const resumedAt = Date.now();
  await eventually('NodeDisksAgentHeartbeatStale cleared', async () => (await active('NodeDisksAgentHeartbeatStale', NODE)) === undefined, DEADLINE_MS, 250);
  const cleared = Date.now() - resumedAt;
  figures.push(`stale-agent alert firing ${fired} ms after SIGSTOP (Lease 4 s, for: ${FOR}), cleared ${cleared} ms after SIGCONT`);
  t.log(figures.at(-1));
});

test.serial('a reservation refused (the label asks for a disk reserved by someone else) fires NodeDisksReservationRefused; it clears once the label is removed', async (t) => {
  t.timeout(4 * DEADLINE_MS, 'each wait has its own deadline; this bounds their sum');
  const name = nodeDiskName(NODE, 'disk1');
  await eventually('no refused-reservation alert yet', async () => (await active('NodeDisksReservationRefused', NODE)) === undefined, DEADLINE_MS);
  await admin().mergePatch(name, { spec: { desired: { state: 'Reserved', owner: 'team-db' } } }, { fieldManager: 'kubectl-patch' });
  const labelledAt = Date.now();
  await admin().mergePatch(name, { metadata: { labels: { [LABEL_AUTO_RESERVE]: 'true' } } }, { fieldManager: 'kubectl-label' });
  const alert = await eventually('NodeDisksReservationRefused firing', () => firing('NodeDisksReservationRefused', NODE), DEADLINE_MS, 250);
  const fired = Date.now() - labelledAt;
  const nd = await admin().get(name);
  const accepted = nd.status?.conditions?.find((c) => c.type === CONDITION.accepted);
  t.is(accepted?.status, 'False');
  t.is(accepted?.reason, 'ReservedByOther');
  t.is(alert.labels.severity, 'warning');
  t.is(Number(alert.value), 1);
  const unlabelledAt = Date.now();
  await admin().mergePatch(name, { metadata: { labels: { [LABEL_AUTO_RESERVE]: null } } }, { fieldManager: 'kubectl-label' });
  await eventually('NodeDisksReservationRefused cleared', async () => (await active('NodeDisksReservationRefused', NODE)) === undefined, DEADLINE_MS, 250);
  const cleared = Date.now() - unlabelledAt;
  figures.push(`refused-reservation alert firing ${fired} ms after the label, cleared ${cleared} ms after its removal`);
  t.log(figures.at(-1));
});

/**
 * Each distinct selector has at least one series in Prometheus' TSDB (which keeps what it scraped since
 * it started, the tests above included): the metric exists with those label values. And each label an
 * expression groups or matches by is on some series it reads (a `by (nod)` would silently drop it).
 */
async function selectorsHaveSeries(t: { log: (m: string) => void }, what: string, exprs: { id: string; expr: string }[]): Promise<string[]> {
  const parsed = await vectorSelectors(
    promqlBin,
    exprs.map((e) => e.expr),
  );
  const problems: string[] = [];
  const selectors = new Map<string, string[]>();
  parsed.forEach((p, i) => {
    if (p.error) problems.push(`${exprs[i]!.id}: ${p.error}`);
    else if (p.selectors.length === 0) problems.push(`${exprs[i]!.id}: reads no metric`);
    for (const s of p.selectors) selectors.set(s, [...(selectors.get(s) ?? []), exprs[i]!.id]);
  });
  // Polled: a counter's first increment, or a gauge's new label values, reach the TSDB at the next scrape.
  const deadline = Date.now() + DEADLINE_MS;
  let empty = [...selectors.keys()];
  while (empty.length > 0 && Date.now() < deadline) {
    const still: string[] = [];
    for (const s of empty) if ((await prom!.series(s)).length === 0) still.push(s);
    empty = still;
    if (empty.length > 0) await new Promise((r) => setTimeout(r, 1000));
  }
  problems.push(...empty.map((s) => `${s} (${selectors.get(s)!.join(', ')}): no series`));
  const series = new Map<string, Record<string, string>[]>();
  for (const s of selectors.keys()) series.set(s, await prom!.series(s));
  parsed.forEach((p, i) => {
    for (const l of p.labels) if (!p.selectors.some((s) => series.get(s)!.some((x) => l in x))) problems.push(`${exprs[i]!.id}: no series it reads has the label ${l}`);
  });
  t.log(`${selectors.size} distinct selectors in ${exprs.length} ${what}: ${[...selectors.keys()].join(' ')}; grouped by ${[...new Set(parsed.flatMap((p) => p.labels))].join(', ')}`);
  return problems;
}

// Declared after the alert tests: the AgentStale and Accepted=False series are theirs.
test.serial('every vector selector of every alert expression has series in Prometheus: no typo in a metric or label', async (t) => {
  t.timeout(4 * DEADLINE_MS, 'each wait has its own deadline; this bounds their sum');
  t.is(alertRules.length, 14);
  // Every one of them happened above or in the before hook: Missing (disk2 deleted), Error and marker
  // errors (a directory at disk3's marker), failed heartbeat renewals (the Lease handed away), agent API
  // errors (creates refused), failed reconciles (the controller's writes refused), AgentStale, Accepted=False, a CSI
  // call refused (NodeGetVolumeStats without a volume); the orphaned claim reservations and failing disks gauges have their series at 0 (disk-health.test.ts fires the latter).
  const problems = await selectorsHaveSeries(
    t,
    'alert expressions',
    alertRules.map((r) => ({ id: r.alert, expr: r.expr })),
  );
  t.deepEqual(problems, []);
  // The judge can fail: a typo'd metric name and a typo'd label value have no series.
  const typos = await vectorSelectors(promqlBin, [
    'sum by (node) (nodedisks_controller_nodedisk{ready="AgentStale"}) > 0',
    'sum(rate(nodedisks_controller_reconcile_total{result="errors"}[5m])) > 0',
  ]);
  for (const s of typos.flatMap((x) => x.selectors)) t.deepEqual(await prom!.series(s), [], s);
  // So can the label check: no series has a label `nod`.
  t.deepEqual(await selectorsHaveSeries(t, 'mistyped expressions', [{ id: 'typo', expr: 'sum by (nod) (nodedisks_controller_nodedisks) > 0' }]), ['typo: no series it reads has the label nod']);
  // And every expression is valid for this Prometheus too (it evaluates each without error).
  for (const r of alertRules) await t.notThrowsAsync(prom!.query(r.expr), r.alert);
});

interface Panel {
  title?: string;
  targets?: { expr?: string; refId?: string }[];
  panels?: Panel[];
}
/**
 * Grafana's interpolation of what the dashboard's queries use, done as Grafana does it (text, before
 * PromQL): a template variable in a regex matcher (`node=~"$node"`) becomes `.+`, every value (what
 * "All" selects); `$__rate_interval` 1m (Grafana's is at least four scrape intervals: 1 m spans 60 of
 * this Prometheus' 1 s scrapes); `$__interval` and `$__range` as a 15 s step over a 5 min graph.
 */
function interpolate(expr: string): string {
  return expr
    .replace(/\$__rate_interval|\$\{__rate_interval\}/g, '1m')
    .replace(/\$__interval|\$\{__interval\}/g, '15s')
    .replace(/\$__range|\$\{__range\}/g, '5m')
    .replace(/=~\s*"\$\{?(\w+)(?::\w+)?\}?"/g, '=~".+"');
}

interface Variable {
  name: string;
  type: string;
  query?: string | { query?: string };
}

test.serial('every query of the Grafana dashboard returns series from Prometheus', async (t) => {
  t.timeout(4 * DEADLINE_MS, 'each wait has its own deadline; this bounds their sum');
  t.true(existsSync(DASHBOARD), `the dashboard ${DASHBOARD} is missing`);
  if (!existsSync(DASHBOARD)) return;
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels?: Panel[]; templating?: { list?: Variable[] } };
  const queries: { id: string; expr: string }[] = [];
  const walk = (panels: Panel[] = []) => {
    for (const p of panels) {
      for (const target of p.targets ?? []) if (target.expr) queries.push({ id: `${p.title ?? '?'}/${target.refId ?? '?'}`, expr: interpolate(target.expr) });
      walk(p.panels);
    }
  };
  walk(dashboard.panels);
  t.true(queries.length > 0, 'the dashboard has no query');
  // A variable left after interpolation is one this test does not know how to fill: say which.
  t.deepEqual(
    queries.filter((q) => q.expr.includes('$')).map((q) => `${q.id}: ${q.expr}`),
    [],
  );
  t.deepEqual(await selectorsHaveSeries(t, 'dashboard queries', queries), []);
  // A query variable's label_values(<selector>, <label>) (Grafana's, around PromQL): the selector has series that carry the label.
  for (const v of dashboard.templating?.list ?? []) {
    if (v.type !== 'query') continue;
    const q = typeof v.query === 'string' ? v.query : (v.query?.query ?? '');
    const m = /^label_values\((?:(.+),\s*)?(\w+)\)$/.exec(q.trim());
    if (!m) {
      t.fail(`variable ${v.name}: a query this test does not know how to check: ${q}`);
      continue;
    }
    const [parsed] = await vectorSelectors(promqlBin, [m[1] ?? `{${m[2]}=~".+"}`]);
    t.falsy(parsed?.error, `variable ${v.name}: ${parsed?.error}`);
    const values = new Set<string>();
    for (const s of parsed?.selectors ?? []) for (const x of await prom!.series(s)) if (x[m[2]!] !== undefined) values.add(x[m[2]!]!);
    t.true(values.size > 0, `variable ${v.name}: ${q} has no values`);
    t.log(`variable ${v.name}: ${q} = ${[...values].sort().join(', ')}`);
  }
  for (const q of queries) {
    const result = await prom!.query(q.expr);
    t.true(result.length > 0, `${q.id}: ${q.expr} returned nothing`);
  }
});
