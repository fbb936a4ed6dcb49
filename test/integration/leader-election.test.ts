// Two controller replicas never act at once. The leader loses its network path to the API server (a
// black hole: connections stay open, no byte passes) or is frozen (SIGSTOP) past its lease and resumed;
// meanwhile the standby takes over and labels keep changing. Throughout, both replicas' `leader` metric is
// sampled at the same moments and must never read 1 on both, and the API server's audit log must show no
// write from the old leader once the new one holds the lease.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { FIELD_MANAGER, LABEL_AUTO_RESERVE } from '../../api/constants.ts';
import { leasesPath, type Lease } from '../../lib/kube/lease.ts';
import type { AuditedWrite } from '../../hack/controlplane/controlplane.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { startController, type Program } from '../../hack/lib/programs.ts';
import { BlackHoleProxy } from '../harness/proxy.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { nodeDisksFor, restFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test, { auditWrites: true });
// Short timings, as kube-controller-manager's --leader-elect-* flags allow, so a takeover takes seconds.
const LEASE = { duration: 4000, renewDeadline: 3000, retryPeriod: 1000 };
const leaseFlags = (id: string) => [`--lease-duration=${LEASE.duration}ms`, `--renew-deadline=${LEASE.renewDeadline}ms`, `--retry-period=${LEASE.retryPeriod}ms`, `--leader-election-id=${id}`];
let work = '';
const started: Program[] = [];
const proxies: BlackHoleProxy[] = [];

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-leader-'));
});
test.afterEach.always((t) => {
  if (!t.passed) for (const p of started) console.error(`----- ${p.name} -----\n${p.logs(8000)}`);
});
test.after.always(async () => {
  for (const p of started) await p.signal('SIGCONT').catch(() => undefined);
  await Promise.all(started.map((p) => p.stop()));
  await Promise.all(proxies.map((p) => p.close()));
  await rm(work, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const portOf = (p: Program) => eventually(`${p.name} http port`, async () => Number(/"httpPort":(\d+)/.exec(p.logs())?.[1]) || undefined);

/** The `leader` gauge of a replica, or undefined when it does not answer within 500 ms (frozen, say). */
async function leaderMetric(p: Program): Promise<number | undefined> {
  try {
    const res = await fetch(`http://127.0.0.1:${await portOf(p)}/metrics`, { signal: AbortSignal.timeout(500) });
    const m = /^nodedisks_controller_leader (\d+)$/m.exec(await res.text());
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

async function readyz(p: Program): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${await portOf(p)}/readyz`, { signal: AbortSignal.timeout(2000) });
  return { status: res.status, body: await res.text() };
}

/** Samples both replicas' `leader` gauges together until stopped; returns the samples where both read 1. */
function sampleLeaders(a: Program, b: Program): { stop(): Promise<{ samples: number; both: string[] }> } {
  let running = true;
  const both: string[] = [];
  let samples = 0;
  const loop = (async () => {
    while (running) {
      const at = new Date().toISOString();
      const [x, y] = await Promise.all([leaderMetric(a), leaderMetric(b)]);
      samples++;
      if (x === 1 && y === 1) both.push(at);
      await sleep(50);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { samples, both };
    },
  };
}

/** Keeps the controller busy: toggles the auto-reserve label of one NodeDisk after another. */
function churn(names: string[]): { stop(): Promise<number> } {
  const client = nodeDisksFor(controlPlane().admin());
  let running = true;
  let flips = 0;
  const loop = (async () => {
    for (let i = 0; running; i++) {
      const name = names[i % names.length]!;
      const on = Math.floor(i / names.length) % 2 === 0;
      await client.mergePatch(name, { metadata: { labels: { [LABEL_AUTO_RESERVE]: on ? 'true' : null } } }, { fieldManager: 'kubectl-label' });
      flips++;
      await sleep(150);
    }
  })();
  loop.catch(() => undefined); // reported by stop()
  return {
    async stop() {
      running = false;
      await loop;
      return flips;
    },
  };
}

async function seed(node: string, count: number): Promise<string[]> {
  const client = nodeDisksFor(controlPlane().admin());
  const names: string[] = [];
  for (let i = 1; i <= count; i++) names.push((await client.create(newNodeDisk(node, `disk${i}`), { fieldManager: FIELD_MANAGER.agent })).metadata.name ?? '');
  return names;
}

const holder = async (id: string) => (await restFor(controlPlane().admin()).request<Lease>('GET', `${leasesPath('node-disks-system')}/${id}`)).spec?.holderIdentity;

const by = (identity: string) => (w: AuditedWrite) => w.userAgent.includes(`(${identity})`);
const isWork = (w: AuditedWrite) => w.objectRef?.resource === 'nodedisks' || w.objectRef?.resource === 'events';
const ok = (w: AuditedWrite) => (w.responseStatus?.code ?? 0) < 300;

/**
 * From the audit log: when `next` acquired lease `id` (its first successful write to it: a standby only
 * reads the lease until it takes it), and what `prev` sent about NodeDisks (spec, status, Events) from then on.
 */
async function writesAfterTakeover(id: string, prev: string, next: string) {
  const writes = await controlPlane().auditedWrites();
  const acquired = writes.find((w) => by(next)(w) && w.objectRef?.resource === 'leases' && w.objectRef.name === id && ok(w));
  if (!acquired) throw new Error(`no successful lease write by ${next} in the audit log`);
  const t0 = acquired.requestReceivedTimestamp;
  const late = writes.filter((w) => by(prev)(w) && isWork(w) && w.requestReceivedTimestamp >= t0);
  return {
    acquiredAt: t0,
    late: late.map((w) => `${w.requestReceivedTimestamp} ${w.verb} ${w.requestURI} → ${w.responseStatus?.code}`),
    prevBefore: writes.filter((w) => by(prev)(w) && isWork(w) && ok(w) && w.requestReceivedTimestamp < t0).length,
    nextAfter: writes.filter((w) => by(next)(w) && isWork(w) && ok(w) && w.requestReceivedTimestamp >= t0).length,
  };
}

test.serial('a leader cut off by a black hole steps down within the renew deadline; the standby takes over; never two leaders', async (t) => {
  const cp = controlPlane();
  const id = 'lease-black-hole';
  const names = await seed('node-black-hole', 8);
  const proxy = await BlackHoleProxy.start(cp.server);
  proxies.push(proxy);
  const identity = await cp.controller();
  const viaProxy = join(work, 'kubeconfig-via-proxy.yaml');
  await writeFile(viaProxy, (await readFile(identity.kubeconfig, 'utf8')).replaceAll(cp.server, proxy.url), { mode: 0o600 });

  const a = await startController(cp, { logDir: join(work, 'logs'), identity: 'bh-a', kubeconfig: viaProxy, extraArgs: leaseFlags(id) });
  started.push(a);
  await eventually('bh-a leads', async () => (await holder(id).catch(() => undefined)) === 'bh-a');
  const b = await startController(cp, { logDir: join(work, 'logs'), identity: 'bh-b', extraArgs: leaseFlags(id) });
  started.push(b);
  await eventually('bh-b is up', async () => (await leaderMetric(b)) === 0);

  const sampler = sampleLeaders(a, b);
  const labels = churn(names);
  t.teardown(async () => void (await Promise.allSettled([sampler.stop(), labels.stop()])));
  await sleep(2000);

  const cut = Date.now();
  proxy.blackHole();
  await eventually('bh-a no longer leads', async () => (await leaderMetric(a)) === 0, 15_000, 20);
  const stepDown = Date.now() - cut;
  await eventually('bh-b leads', async () => (await holder(id)) === 'bh-b' && (await leaderMetric(b)) === 1, 20_000);
  const takeover = Date.now() - cut;
  // Cut off, bh-a can do nothing: it says so.
  const unready = await eventually(
    'bh-a unready',
    async () => {
      const r = await readyz(a);
      return r.status === 503 ? r.body : undefined;
    },
    15_000,
  );

  await sleep(2000);
  proxy.restore();
  await eventually('bh-a ready again, as a standby', async () => (await readyz(a)).status === 200, 20_000);
  await sleep(2000);
  const flips = await labels.stop();
  const leaders = await sampler.stop();

  t.log(`black hole: bh-a stepped down after ${stepDown} ms, bh-b led after ${takeover} ms; ${leaders.samples} samples, ${flips} label flips`);
  // Promptness only, with room for a loaded machine's timers: that no two replicas ever acted at once is
  // what the samples and the audit log below prove.
  t.true(stepDown <= LEASE.renewDeadline + 4000, `the cut-off leader stepped down only after ${stepDown} ms`);
  t.regex(unready, /lease|API server/);
  t.deepEqual(leaders.both, [], 'leader=1 on both replicas at these moments');
  const w = await writesAfterTakeover(id, 'bh-a', 'bh-b');
  t.deepEqual(w.late, [], `writes by bh-a after bh-b acquired the lease at ${w.acquiredAt}`);
  t.true(w.prevBefore > 0 && w.nextAfter > 0, `both replicas did work in their own term (bh-a ${w.prevBefore} writes, bh-b ${w.nextAfter})`);
  await Promise.all([a.stop(), b.stop()]);
});

test.serial('a leader frozen (SIGSTOP) past its lease and resumed writes nothing more; never two leaders', async (t) => {
  const cp = controlPlane();
  const id = 'lease-sigstop';
  const names = await seed('node-sigstop', 8);
  const a = await startController(cp, { logDir: join(work, 'logs'), identity: 'stop-a', extraArgs: leaseFlags(id) });
  started.push(a);
  await eventually('stop-a leads', async () => (await holder(id).catch(() => undefined)) === 'stop-a');
  const b = await startController(cp, { logDir: join(work, 'logs'), identity: 'stop-b', extraArgs: leaseFlags(id) });
  started.push(b);
  await eventually('stop-b is up', async () => (await leaderMetric(b)) === 0);

  const sampler = sampleLeaders(a, b);
  const labels = churn(names);
  t.teardown(async () => void (await Promise.allSettled([sampler.stop(), labels.stop()])));
  await sleep(2000);
  await a.signal('SIGSTOP');
  t.teardown(() => a.signal('SIGCONT').catch(() => undefined));
  const frozen = Date.now();
  await eventually('stop-b leads', async () => (await holder(id)) === 'stop-b' && (await leaderMetric(b)) === 1, 20_000);
  // Let stop-b act while stop-a's watch connection fills with events it will read on waking.
  await sleep(2000);
  await a.signal('SIGCONT');
  const pause = Date.now() - frozen;
  await eventually('stop-a knows it lost', async () => a.logs().includes('lost leadership'), 10_000);
  await sleep(3000);
  const flips = await labels.stop();
  const leaders = await sampler.stop();

  t.log(`SIGSTOP: frozen for ${pause} ms; ${leaders.samples} samples, ${flips} label flips`);
  t.deepEqual(leaders.both, [], 'leader=1 on both replicas at these moments');
  const w = await writesAfterTakeover(id, 'stop-a', 'stop-b');
  t.deepEqual(w.late, [], `writes by stop-a after stop-b acquired the lease at ${w.acquiredAt}`);
  t.true(w.prevBefore > 0 && w.nextAfter > 0, `both replicas did work in their own term (stop-a ${w.prevBefore} writes, stop-b ${w.nextAfter})`);
  t.is(await leaderMetric(a), 0);
  await Promise.all([a.stop(), b.stop()]);
});
