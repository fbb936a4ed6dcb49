// The agent's and the controller's metrics on prom-client (docs/adr/0026), as the programs use them: the
// /metrics endpoint of the ops server, the controller's leader gauge asked at each scrape, the agent's
// disks gauge forgetting a phase no disk is in any more, the controller's NodeDisks gauge, the declared
// histogram buckets.
// test/unit/metrics-oracle.test.ts reads the whole text with Prometheus' own parser and promlint.
import test from 'ava';
import { Gauge, Registry } from 'prom-client';
import { agentMetrics } from '../../agent/metrics.ts';
import type { ConditionStatus, DesiredSpec, NodeDisk, NodePhase } from '../../api/v1alpha1/types.ts';
import { AUTO_OWNER, RECOVERED_OWNER } from '../../api/constants.ts';
import { claimOwner } from '../../api/owner.ts';
import { controllerMetrics } from '../../controller/metrics.ts';
import type { ClaimPhase, NodeDiskClaim } from '../../api/v1alpha1/claim-types.ts';
import { newClaim } from '../../hack/lib/nodedisks.ts';
import { startOpsServer } from '../../lib/runtime/server.ts';

test("/metrics of the ops server: the registry text with the format's content type; a failing collect hook is a 500 with its message", async (t) => {
  const registry = new Registry();
  let fail = false;
  new Gauge({
    name: 'up_now',
    help: 'x',
    registers: [registry],
    collect() {
      if (fail) throw new Error('cannot read the state');
      this.set(1);
    },
  });
  const ops = await startOpsServer({ address: '127.0.0.1:0', registry, healthz: () => undefined, readyz: () => undefined });
  t.teardown(() => ops.close());
  const ok = await fetch(`http://127.0.0.1:${ops.port}/metrics`);
  t.is(ok.status, 200);
  t.is(ok.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
  t.is(await ok.text(), '# HELP up_now x\n# TYPE up_now gauge\nup_now 1\n');
  fail = true;
  const bad = await fetch(`http://127.0.0.1:${ops.port}/metrics`);
  t.is(bad.status, 500);
  t.is(await bad.text(), 'cannot read the state\n');
});

test("the controller's leader gauge is the leadership of the moment of each scrape, never a remembered value", async (t) => {
  let leading = false;
  const m = controllerMetrics(() => leading);
  t.regex(await m.registry.metrics(), /^nodedisks_controller_leader 0$/m);
  leading = true;
  t.regex(await m.registry.metrics(), /^nodedisks_controller_leader 1$/m);
  leading = false;
  t.regex(await m.registry.metrics(), /^nodedisks_controller_leader 0$/m);
});

test("the agent's disks gauge, reset and set per phase at each count, drops a phase no disk is in any more", async (t) => {
  const m = agentMetrics();
  m.disks.set({ phase: 'Available' }, 2);
  m.disks.set({ phase: 'Reserved' }, 1);
  const first = await m.registry.metrics();
  t.regex(first, /^nodedisks_agent_disks\{phase="Available"\} 2$/m);
  t.regex(first, /^nodedisks_agent_disks\{phase="Reserved"\} 1$/m);
  m.disks.reset();
  m.disks.set({ phase: 'Available' }, 3);
  const second = await m.registry.metrics();
  t.regex(second, /^nodedisks_agent_disks\{phase="Available"\} 3$/m);
  t.notRegex(second, /phase="Reserved"/);
});

test('histograms have their declared buckets, +Inf last; a metric without labels is exposed at 0 before its first use', async (t) => {
  const agent = agentMetrics();
  agent.scanSeconds.observe(0.02);
  const text = await agent.registry.metrics();
  t.deepEqual(
    [...text.matchAll(/^nodedisks_agent_scan_duration_seconds_bucket\{le="([^"]+)"\} (\d+)$/gm)].map((b) => [b[1], Number(b[2])]),
    [
      ['0.001', 0],
      ['0.005', 0],
      ['0.01', 0],
      ['0.05', 1],
      ['0.1', 1],
      ['0.5', 1],
      ['1', 1],
      ['5', 1],
      ['+Inf', 1],
    ],
  );
  t.regex(text, /^nodedisks_agent_creates_total 0$/m);
  const controller = await controllerMetrics(() => true).registry.metrics();
  t.is([...controller.matchAll(/^nodedisks_controller_reconcile_duration_seconds_bucket\{le="([^"]+)"\}/gm)].map((b) => b[1]).join(' '), '0.001 0.005 0.01 0.05 0.1 0.5 1 5 +Inf');
  t.regex(controller, /^nodedisks_controller_workqueue_depth 0$/m);
});

test("the controller's NodeDisks gauge counts the cache of the moment of each scrape by node, desired, phase, Accepted and Ready's reason", async (t) => {
  const nd = (node: string, desired: 'Available' | 'Reserved', phase: string | undefined, accepted?: string, ready?: string): NodeDisk => ({
    apiVersion: 'localtest.example.com/v1alpha1',
    kind: 'NodeDisk',
    metadata: { name: `${node}-${phase}` },
    spec: { nodeName: node, diskID: 'd', path: '/x.img', desired: { state: desired } },
    status: {
      ...(phase ? { node: { phase: phase as NodePhase } } : {}),
      conditions: [
        ...(accepted ? [{ type: 'Accepted', status: accepted as ConditionStatus, reason: 'R', message: '', lastTransitionTime: '2026-01-01T00:00:00Z' }] : []),
        ...(ready ? [{ type: 'Ready', status: 'Unknown' as ConditionStatus, reason: ready, message: '', lastTransitionTime: '2026-01-01T00:00:00Z' }] : []),
      ],
    },
  });
  let cache: NodeDisk[] = [
    nd('n1', 'Available', 'Available', 'True', 'PhaseMatchesDesired'),
    nd('n1', 'Available', 'Available', 'True', 'PhaseMatchesDesired'),
    nd('n2', 'Reserved', 'Missing', 'False', 'DiskMissing'),
    nd('n3', 'Available', undefined),
  ];
  const m = controllerMetrics(
    () => true,
    () => cache,
  );
  const first = await m.registry.metrics();
  t.regex(first, /^nodedisks_controller_nodedisks\{node="n1",desired="Available",phase="Available",accepted="True",ready="PhaseMatchesDesired",owner="none"\} 2$/m);
  t.regex(first, /^nodedisks_controller_nodedisks\{node="n2",desired="Reserved",phase="Missing",accepted="False",ready="DiskMissing",owner="manual"\} 1$/m);
  t.regex(first, /^nodedisks_controller_nodedisks\{node="n3",desired="Available",phase="",accepted="",ready="",owner="none"\} 1$/m);
  cache = [nd('n1', 'Available', 'Available', 'True', 'AgentStale')];
  const second = await m.registry.metrics();
  t.regex(second, /^nodedisks_controller_nodedisks\{node="n1",desired="Available",phase="Available",accepted="True",ready="AgentStale",owner="none"\} 1$/m);
  t.notRegex(second, /node="n2"|ready="PhaseMatchesDesired"/);
  // No NodeDisk (a replica that does not lead gives none): no series, not a stale count.
  cache = [];
  t.notRegex(await m.registry.metrics(), /^nodedisks_controller_nodedisks\{/m);
});

const disk = (name: string, node: string, desired: DesiredSpec | undefined, phase?: NodePhase, capacityBytes?: number): NodeDisk => ({
  apiVersion: 'localtest.example.com/v1alpha1',
  kind: 'NodeDisk',
  metadata: { name },
  spec: { nodeName: node, diskID: name, path: `/d/${name}.img`, ...(desired ? { desired } : {}) },
  ...(phase ? { status: { node: { phase, ...(capacityBytes !== undefined ? { capacityBytes } : {}) } } } : {}),
});

test("the controller's NodeDisks gauge tells reservations apart by kind of owner (api/owner.ts), never by the owner string", async (t) => {
  const cache = [
    disk('a', 'n1', undefined, 'Available'),
    disk('b', 'n1', { state: 'Reserved', owner: AUTO_OWNER }, 'Reserved'),
    disk('c', 'n1', { state: 'Reserved', owner: claimOwner('team-a', 'db-0') }, 'Reserved'),
    disk('d', 'n1', { state: 'Reserved', owner: claimOwner('team-b', 'db-1') }, 'Reserved'),
    disk('e', 'n1', { state: 'Reserved', owner: RECOVERED_OWNER }, 'Reserved'),
    disk('f', 'n1', { state: 'Reserved', owner: 'alice' }, 'Reserved'),
  ];
  const text = await controllerMetrics(
    () => true,
    () => cache,
  ).registry.metrics();
  const owners = Object.fromEntries([...text.matchAll(/^nodedisks_controller_nodedisks\{[^}]*owner="(\w+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])]));
  t.deepEqual(owners, { none: 1, policy: 1, claim: 2, recovered: 1, manual: 1 });
  t.notRegex(text, /team-a|alice/);
});

test("the controller's capacity gauge sums the reported bytes by node, desired state and phase, at each scrape", async (t) => {
  const G = 2 ** 30;
  let cache = [
    disk('a', 'n1', undefined, 'Available', G),
    disk('b', 'n1', { state: 'Available' }, 'Available', 2 * G),
    disk('c', 'n1', { state: 'Reserved', owner: 'auto' }, 'Reserved', 4 * G),
    disk('d', 'n2', { state: 'Reserved', owner: 'x' }, 'Missing', 8 * G),
    disk('e', 'n2', undefined), // not reported yet: counted, as 0 bytes
  ];
  const m = controllerMetrics(
    () => true,
    () => cache,
  );
  const first = await m.registry.metrics();
  t.regex(first, new RegExp(`^nodedisks_controller_nodedisk_capacity_bytes\\{node="n1",desired="Available",phase="Available"\\} ${3 * G}$`, 'm'));
  t.regex(first, new RegExp(`^nodedisks_controller_nodedisk_capacity_bytes\\{node="n1",desired="Reserved",phase="Reserved"\\} ${4 * G}$`, 'm'));
  t.regex(first, new RegExp(`^nodedisks_controller_nodedisk_capacity_bytes\\{node="n2",desired="Reserved",phase="Missing"\\} ${8 * G}$`, 'm'));
  t.regex(first, /^nodedisks_controller_nodedisk_capacity_bytes\{node="n2",desired="Available",phase=""\} 0$/m);
  cache = [disk('a', 'n1', undefined, 'Available', G)];
  const second = await m.registry.metrics();
  t.regex(second, new RegExp(`^nodedisks_controller_nodedisk_capacity_bytes\\{node="n1",desired="Available",phase="Available"\\} ${G}$`, 'm'));
  t.notRegex(second, /^nodedisks_controller_nodedisk_capacity_bytes\{node="n2"/m);
});

test("the controller's heartbeat age gauge is the leader's view of each node at each scrape; a node gone has no series", async (t) => {
  let ages = [
    { node: 'n1', ageSeconds: 3.5 },
    { node: 'n2', ageSeconds: 120 },
  ];
  const m = controllerMetrics(
    () => true,
    () => [],
    () => ages,
  );
  const first = await m.registry.metrics();
  t.regex(first, /^nodedisks_controller_agent_heartbeat_age_seconds\{node="n1"\} 3\.5$/m);
  t.regex(first, /^nodedisks_controller_agent_heartbeat_age_seconds\{node="n2"\} 120$/m);
  ages = [{ node: 'n1', ageSeconds: 1 }];
  const second = await m.registry.metrics();
  t.regex(second, /^nodedisks_controller_agent_heartbeat_age_seconds\{node="n1"\} 1$/m);
  t.notRegex(second, /node="n2"/);
});

test("the controller's API errors counter has the verb and the code (none: no answer)", async (t) => {
  const m = controllerMetrics(() => true);
  m.apiErrors.inc({ verb: 'PATCH', code: '409' });
  m.apiErrors.inc({ verb: 'GET', code: 'none' });
  const text = await m.registry.metrics();
  t.regex(text, /^nodedisks_controller_api_errors_total\{verb="PATCH",code="409"\} 1$/m);
  t.regex(text, /^nodedisks_controller_api_errors_total\{verb="GET",code="none"\} 1$/m);
});

test("the controller's tracked-nodes gauge is its per-node state of the moment, by structure; one that is gone has no series", async (t) => {
  let tracked: Record<string, number> = { node_cache: 3, disks_by_node: 2, gone_since: 1, heartbeats: 2, heartbeat_leases: 2 };
  const m = controllerMetrics(
    () => true,
    () => [],
    () => [],
    () => tracked,
  );
  const first = await m.registry.metrics();
  for (const [state, n] of Object.entries(tracked)) t.regex(first, new RegExp(`^nodedisks_controller_tracked_nodes\\{state="${state}"\\} ${n}$`, 'm'), state);
  tracked = { node_cache: 3 };
  const second = await m.registry.metrics();
  t.regex(second, /^nodedisks_controller_tracked_nodes\{state="node_cache"\} 3$/m);
  t.notRegex(second, /state="gone_since"/);
});

test("the controller's claims gauge counts the leader's NodeDiskClaims by phase only (no namespace: one series per team would grow without bound), every phase always there", async (t) => {
  const claim = (ns: string, name: string, phase?: ClaimPhase): NodeDiskClaim => ({ ...newClaim(ns, name), ...(phase ? { status: { phase } } : {}) });
  let cache: NodeDiskClaim[] = [claim('a', 'x', 'Bound'), claim('b', 'y', 'Bound'), claim('a', 'z', 'Pending'), claim('c', 'w')];
  const m = controllerMetrics(
    () => true,
    () => [],
    () => [],
    () => ({}),
    () => cache,
  );
  const text = await m.registry.metrics();
  t.regex(text, /^nodedisks_controller_claims\{phase="Bound"\} 2$/m);
  t.regex(text, /^nodedisks_controller_claims\{phase="Pending"\} 1$/m);
  t.regex(text, /^nodedisks_controller_claims\{phase="Lost"\} 0$/m);
  t.regex(text, /^nodedisks_controller_claims\{phase=""\} 1$/m);
  t.notRegex(text, /nodedisks_controller_claims\{[^}]*namespace/);
  cache = [];
  const none = await m.registry.metrics();
  t.regex(none, /^nodedisks_controller_claims\{phase="Bound"\} 0$/m);
  t.notRegex(none, /^nodedisks_controller_claims\{phase=""\}/m);
  m.claimBindSeconds.observe(0.7);
  t.regex(await m.registry.metrics(), /^nodedisks_controller_claim_bind_duration_seconds_bucket\{le="1"\} 1$/m);
});
