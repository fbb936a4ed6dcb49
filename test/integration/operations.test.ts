// Running the programs as an operator would: leader election between two controllers, the /metrics,
// /healthz and /readyz endpoints, and clear refusals of bad configuration.
import { execFile } from 'node:child_process';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { nodeDiskName } from '../../api/names.ts';
import { AGENT_MAIN, CONTROLLER_MAIN, seedDisks, startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { ensurePromtext, parseExposition } from '../../hack/promtext/promtext.ts';
import { nodeDisksFor, restFor, useControlPlane } from './_controlplane.ts';

const run = promisify(execFile);
const controlPlane = useControlPlane(test);
let work = '';
const started: Program[] = [];

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-ops-'));
});
test.afterEach.always((t) => {
  if (!t.passed) for (const p of started) console.error(`----- ${p.name} -----\n${p.logs(4000)}`);
});
test.after.always(async () => {
  await Promise.all(started.map((p) => p.stop()));
  await rm(work, { recursive: true, force: true });
});

const portOf = (p: Program) => eventually(`${p.name} http port`, async () => Number(/"httpPort":(\d+)/.exec(p.logs())?.[1]) || undefined);
async function get(p: Program, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${await portOf(p)}${path}`);
  return { status: res.status, body: await res.text() };
}
interface Lease {
  spec: { holderIdentity?: string; leaseTransitions?: number };
}
const lease = () => restFor(controlPlane().admin()).request<Lease>('GET', '/apis/coordination.k8s.io/v1/namespaces/node-disks-system/leases/node-disks-operator.localtest.example.com');

test.serial('two controllers: one leads, the other takes over when the leader dies, and acts', async (t) => {
  const cp = controlPlane();
  const node = 'node-ha';
  await seedDisks(join(work, node), 2, 1024);
  // A 1 s heartbeat: its Lease lasts 4 s, so the end of the test sees the agent's death soon.
  const agent = await startAgent(cp, { node, diskDir: join(work, node), logDir: join(work, 'logs'), rescanInterval: '1s', heartbeat: '1s' });
  started.push(agent);
  const a = await startController(cp, { logDir: join(work, 'logs'), identity: 'ctl-a' });
  started.push(a);
  await eventually('ctl-a leads', async () => (await lease()).spec.holderIdentity === 'ctl-a');
  const b = await startController(cp, { logDir: join(work, 'logs'), identity: 'ctl-b' });
  started.push(b);
  t.is((await get(b, '/readyz')).status, 200, 'a standby is ready');
  t.regex((await get(b, '/metrics')).body, /^nodedisks_controller_leader 0$/m);
  t.regex((await get(a, '/metrics')).body, /^nodedisks_controller_leader 1$/m);

  const client = nodeDisksFor(cp.admin());
  await eventually('disks discovered', async () => (await client.get(nodeDiskName(node, 'disk1'))).status?.node?.phase === 'Available');
  // The leader counts its cache at each scrape (what the alerts read); the standby counts nothing.
  await eventually('the leader counts two free disks on node-ha', async () =>
    /^nodedisks_controller_nodedisks\{node="node-ha",desired="Available",phase="Available",accepted="True",ready="PhaseMatchesDesired",owner="none"\} 2$/m.test((await get(a, '/metrics')).body),
  );
  // The dashboard's capacity and heartbeat age, from the same caches: the bytes the agent reported, and a
  // heartbeat younger than its 4 s Lease.
  const reported = (await Promise.all(['disk1', 'disk2'].map(async (d) => (await client.get(nodeDiskName(node, d))).status?.node?.capacityBytes ?? 0))).reduce((x, y) => x + y, 0);
  t.true(reported > 0);
  const leaderText = (await get(a, '/metrics')).body;
  t.regex(leaderText, new RegExp(`^nodedisks_controller_nodedisk_capacity_bytes\\{node="node-ha",desired="Available",phase="Available"\\} ${reported}$`, 'm'));
  // The heartbeat Leases are a cache of their own, synced apart from the NodeDisks'.
  // Younger than its Lease at some scrape: one renewal late on a loaded machine may make one scrape older.
  let age = Number.NaN;
  await eventually('the leader shows a node-ha heartbeat age younger than its 4 s Lease', async () => {
    const m = /^nodedisks_controller_agent_heartbeat_age_seconds\{node="node-ha"\} (\S+)$/m.exec((await get(a, '/metrics')).body);
    age = m ? Number(m[1]) : Number.NaN;
    return age >= 0 && age < 4;
  });
  t.true(age >= 0 && age < 4, `heartbeat age ${age}`);
  // Every request of the process counts in the API errors counter: the first controller's GET of the
  // leader Lease found none (404) before it created it.
  t.regex(leaderText, /^nodedisks_controller_api_errors_total\{verb="GET",code="404"\} [1-9]\d*$/m);
  const standbyText = (await get(b, '/metrics')).body;
  t.notRegex(standbyText, /^nodedisks_controller_nodedisks\{/m);
  t.notRegex(standbyText, /^nodedisks_controller_(nodedisk_capacity_bytes|agent_heartbeat_age_seconds)\{/m);
  await a.crash();
  await cp.kubectl(cp.admin(), ['label', 'nodedisk', nodeDiskName(node, 'disk1'), 'localtest.example.com/auto-reserve=true']);
  const took = Date.now();
  await eventually('ctl-b leads', async () => (await lease()).spec.holderIdentity === 'ctl-b', 30_000);
  t.log(`takeover after the leader died: ${((Date.now() - took) / 1000).toFixed(1)} s`);
  await eventually('reserved by the new leader', async () => (await client.get(nodeDiskName(node, 'disk1'))).status?.node?.phase === 'Reserved', 30_000);
  // A reservation of the label policy, by its kind of owner (the dashboard's reservations panel).
  await eventually('the new leader counts a policy reservation', async () =>
    /^nodedisks_controller_nodedisks\{node="node-ha",desired="Reserved",phase="Reserved",[^}]*owner="policy"\} 1$/m.test((await get(b, '/metrics')).body),
  );
  t.true(b.logs().includes('"msg":"became leader"'));

  // A clean stop releases the lease: a new replica takes over without waiting out the lease.
  const c = await startController(cp, { logDir: join(work, 'logs'), identity: 'ctl-c' });
  started.push(c);
  await b.stop();
  const handover = Date.now();
  await eventually('ctl-c leads', async () => (await lease()).spec.holderIdentity === 'ctl-c', 15_000);
  // Waiting out the lease instead would take 13 s or more (15 s lease, renewed every 2 s).
  t.true(Date.now() - handover < 12_000, `handover took ${Date.now() - handover} ms`);

  // An agent that stops reporting is shown, not hidden: Ready turns Unknown (AgentStale) on its own.
  await agent.crash();
  const stale = await eventually(
    'Ready AgentStale',
    async () => {
      const ready = (await client.get(nodeDiskName(node, 'disk2'))).status?.conditions?.find((x) => x.type === 'Ready');
      return ready?.reason === 'AgentStale' ? ready : undefined;
    },
    20_000,
  );
  t.is(stale.status, 'Unknown');
  t.regex(stale.message, /the node agent on node-ha has not renewed its heartbeat \(Lease node-disks-system\/node-disks-agent-node-ha, last renewed /);
  // What the stale-agent alert reads, from the leader that judged it.
  await eventually('the leader counts node-ha stale', async () => /^nodedisks_controller_nodedisks\{node="node-ha",[^}]*ready="AgentStale"[^}]*\} [12]$/m.test((await get(c, '/metrics')).body));
});

test.serial('the agent serves metrics, health and readiness; a missing disk dir makes it unready, not destructive', async (t) => {
  const cp = controlPlane();
  const node = 'node-ops';
  const dir = join(work, node);
  await seedDisks(dir, 1, 4096);
  const agent = await startAgent(cp, { node, diskDir: dir, logDir: join(work, 'logs'), rescanInterval: '500ms' });
  started.push(agent);
  await eventually('agent ready', async () => (await get(agent, '/readyz')).status === 200);
  t.is((await get(agent, '/healthz')).status, 200);
  await eventually('disk reported', async () => (await nodeDisksFor(cp.admin()).get(nodeDiskName(node, 'disk1'))).status?.node?.phase === 'Available');
  const metrics = (await get(agent, '/metrics')).body;
  t.regex(metrics, /^nodedisks_agent_disks\{phase="Available"\} 1$/m);
  t.regex(metrics, /^nodedisks_agent_creates_total 1$/m);
  t.regex(metrics, /^nodedisks_agent_status_writes_total\{cause="change"\} 1$/m);
  t.regex(metrics, /^process_cpu_seconds_total /m);
  // The whole scrape as Prometheus takes it: the format's content type, its own parser, and promlint.
  const scrape = await fetch(`http://127.0.0.1:${await portOf(agent)}/metrics`);
  t.is(scrape.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
  const parsed = await parseExposition(await ensurePromtext(), await scrape.text());
  t.is(parsed.error, undefined);
  t.deepEqual(parsed.problems, []);
  t.true(parsed.families.some((f) => f.name === 'nodejs_heap_size_used_bytes' && f.type === 'GAUGE'));

  // The dir disappears at once (as when its mount goes away), not file by file.
  await rename(dir, `${dir}.away`);
  const unready = await eventually('agent unready', async () => {
    const r = await get(agent, '/readyz');
    return r.status === 503 ? r.body : undefined;
  });
  t.regex(unready, /cannot read disk dir .*node-ops: ENOENT/);
  const nd = await nodeDisksFor(cp.admin()).get(nodeDiskName(node, 'disk1'));
  t.is(nd.status?.node?.phase, 'Available', 'an unreadable dir is not taken as "every disk is gone"');
  await rename(`${dir}.away`, dir);
  await eventually('ready again', async () => (await get(agent, '/readyz')).status === 200);
});

async function fails(main: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stderr: string }> {
  try {
    await run(process.execPath, [main, ...args], { env: { PATH: process.env.PATH, ...env }, timeout: 20_000 });
  } catch (err) {
    const e = err as { code: number; stderr: string };
    return { code: e.code, stderr: e.stderr };
  }
  throw new Error('the program exited 0');
}

test('bad configuration exits 2 with the problem and the fix', async (t) => {
  const cp = controlPlane();
  const kc = (await cp.agent('node-cfg')).kubeconfig;
  const noNode = await fails(AGENT_MAIN, [`--kubeconfig=${kc}`]);
  t.is(noNode.code, 2);
  t.regex(noNode.stderr, /NODE_NAME is required/);

  const broken = join(work, 'broken-kubeconfig');
  await writeFile(broken, 'apiVersion: v1\nclusters: [ {{ not yaml');
  const badKc = await fails(AGENT_MAIN, [`--kubeconfig=${broken}`, '--node-name=node-cfg']);
  t.is(badKc.code, 2);
  t.regex(badKc.stderr, /kubeconfig .*broken-kubeconfig is not valid YAML: .*; fix the file or point --kubeconfig at a valid one/);

  const missing = await fails(CONTROLLER_MAIN, ['--kubeconfig=/nonexistent/kubeconfig']);
  t.is(missing.code, 2);
  t.regex(missing.stderr, /kubeconfig \/nonexistent\/kubeconfig does not exist/);
});

test.serial("an unchanged disk is never re-reported: the heartbeat renews the node's Lease instead", async (t) => {
  const cp = controlPlane();
  const node = 'node-heartbeat';
  await seedDisks(join(work, node), 1, 4096);
  const agent = await startAgent(cp, { node, diskDir: join(work, node), logDir: join(work, 'logs'), rescanInterval: '200ms', heartbeat: '1s' });
  started.push(agent);
  const client = nodeDisksFor(cp.admin());
  const name = nodeDiskName(node, 'disk1');
  const first = await eventually('reported', async () => {
    const x = await client.get(name);
    return x.status?.node?.lastSeenTime ? x : undefined;
  });
  const heartbeat = () =>
    restFor(cp.admin()).request<{ spec: { renewTime?: string; holderIdentity?: string; leaseDurationSeconds?: number } }>(
      'GET',
      `/apis/coordination.k8s.io/v1/namespaces/node-disks-system/leases/node-disks-agent-${node}`,
    );
  const lease = await eventually('the heartbeat Lease', heartbeat);
  t.like(lease.spec, { holderIdentity: node, leaseDurationSeconds: 4 });
  // Rescans every 200 ms and a 1 s heartbeat: the Lease moves, the NodeDisk does not.
  await eventually('the Lease renewed', async () => (await heartbeat()).spec.renewTime !== lease.spec.renewTime, 10_000);
  await new Promise((r) => setTimeout(r, 3000));
  const later = await client.get(name);
  // (The controller of the first test still runs and may write status.controller: only the agent's part counts.)
  t.deepEqual(later.status?.node, first.status?.node, 'status.node was not written again');
  const metrics = (await get(agent, '/metrics')).body;
  t.regex(metrics, /^nodedisks_agent_heartbeat_renewals_total\{result="renewed"\} [2-9]/m);
  t.regex(metrics, /^nodedisks_agent_status_writes_total\{cause="change"\} 1$/m);
  t.notRegex(metrics, /cause="heartbeat"/);
});
