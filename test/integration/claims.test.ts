// NodeDiskClaims end to end: a real control plane with the install's CRDs, RBAC and admission policies, the
// real controller and agents as separate processes, files on disk, and team users that have only the
// namespaced claims role. The tests run one after the other: the controller's log counts every NodeDisk.
import { existsSync, readFileSync, unlinkSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { NodeDiskClaimClient } from '../../api/claim-client.ts';
import { NodeDiskClient, type NodeDiskApply } from '../../api/client.ts';
import { API_VERSION, CLAIM_FINALIZER, DEFAULT_DISK_DIR, FIELD_MANAGER, KIND, LABEL_NODE } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDiskClaim, NodeDiskClaimSpec } from '../../api/v1alpha1/claim-types.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { ensureHealthcheck, evaluateHealth, type Verdict } from '../../hack/healthcheck/healthcheck.ts';
import { newClaim, newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { seedDisks, startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { claimGone } from '../harness/claims.ts';
import { fluxKustomization, healthFixtures } from '../harness/gitops-health.ts';
import { loadKubeConfig } from '../../lib/kube/kubeconfig.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import { denied, nodeDisksFor, useControlPlane } from './_controlplane.ts';

// Audited: the Pending line's writes are counted.
const controlPlane = useControlPlane(test, { auditWrites: true });
const MiB = 2 ** 20;
let work = '';
let controller: Program;
const agents: Program[] = [];
const diskDir = (node: string) => join(work, node, 'disks');
const admin = () => nodeDisksFor(controlPlane().admin());
const adminClaims = () => new NodeDiskClaimClient(admin().rest);
const kubectl = (...args: string[]) => controlPlane().kubectl(controlPlane().admin(), args);

/** A person, impersonated by the admin: RBAC and admission judge the person. */
function as(user: string): RestClient {
  return new RestClient(loadKubeConfig({ kubeconfig: controlPlane().admin().kubeconfig, as: user }), { timeoutMs: 30_000 });
}

async function namespace(name: string, teamUser?: string): Promise<void> {
  await kubectl('create', 'namespace', name);
  if (teamUser) await kubectl('create', 'rolebinding', `${teamUser}-claims`, '-n', name, '--clusterrole=nodedisks-claims-editor', `--user=${teamUser}`);
}

async function agentWithDisks(node: string, count: number, bytes = 64 * MiB): Promise<void> {
  await seedDisks(diskDir(node), count, bytes);
  agents.push(await startAgent(controlPlane(), { node, diskDir: diskDir(node), logDir: join(work, 'logs'), rescanInterval: '1s' }));
  await eventually(`${count} Available disks on ${node}`, async () => {
    const list = await admin().list({ labelSelector: `${LABEL_NODE}=${node}` });
    return list.items.filter((d) => d.status?.node?.phase === 'Available').length === count;
  });
}

function claim(ns: string, name: string, spec: NodeDiskClaimSpec = {}): NodeDiskClaim {
  return newClaim(ns, name, spec);
}

async function claimWhere(ns: string, name: string, what: string, ok: (c: NodeDiskClaim) => boolean, timeoutMs?: number): Promise<NodeDiskClaim> {
  return await eventually(
    `claim ${ns}/${name} ${what}`,
    async () => {
      const c = await adminClaims().get(ns, name);
      return ok(c) ? c : undefined;
    },
    timeoutMs,
  );
}

const cond = (c: NodeDiskClaim, type: string) => c.status?.conditions?.find((x) => x.type === type);
const readyAndBound = (c: NodeDiskClaim) => c.status?.phase === 'Bound' && cond(c, 'Ready')?.status === 'True';

let healthcheck: Promise<string> | undefined;
/** kstatus's generic verdict on the claim as the API server serves it: what a tool with no custom check for claims reads. */
async function kstatusOf(c: NodeDiskClaim): Promise<Verdict> {
  healthcheck ??= ensureHealthcheck();
  const [r] = await evaluateHealth(await healthcheck, {
    argocd: { healthLua: healthFixtures('NodeDiskClaim').healthLua },
    flux: { healthCheckExprs: fluxKustomization().spec.healthCheckExprs },
    objects: [{ name: 'claim', yaml: JSON.stringify(c) }],
  });
  return r!.kstatus;
}

/** `kubectl wait --for=condition=Ready` on a claim: its output, or its error when it gave up. */
async function waitReady(ns: string, name: string, timeout: string): Promise<{ ok: boolean; out: string }> {
  return await kubectl('wait', 'ndc', name, '-n', ns, '--for=condition=Ready', `--timeout=${timeout}`).then(
    (out) => ({ ok: true, out }),
    (err: Error) => ({ ok: false, out: err.message }),
  );
}

interface ClaimEvent {
  type: string;
  reason: string;
  action: string;
  note: string;
  reportingController: string;
  regarding: { kind: string; name: string; namespace: string; uid?: string };
  related?: { kind: string; name: string };
}

/** The Events about claim ns/name, as its team reads them in its namespace. */
async function claimEvents(ns: string, name: string, reason?: string): Promise<ClaimEvent[]> {
  const list = await admin().rest.request<{ items: ClaimEvent[] }>('GET', `/apis/events.k8s.io/v1/namespaces/${ns}/events`);
  return list.items.filter((e) => e.regarding.kind === 'NodeDiskClaim' && e.regarding.name === name && (reason === undefined || e.reason === reason));
}

/** Waits for `count` Events of `reason` about claim ns/name (posted after the status write, not waited for by the controller). */
async function eventsWhere(ns: string, name: string, reason: string, count = 1): Promise<ClaimEvent[]> {
  return await eventually(`${count} ${reason} event(s) on claim ${ns}/${name}`, async () => {
    const evs = await claimEvents(ns, name, reason);
    return evs.length >= count ? evs : undefined;
  });
}

async function gone(ns: string, name: string): Promise<void> {
  await claimGone(adminClaims(), ns, name);
}

/** A NodeDisk as an agent would report it, made by the admin: no agent runs for its node. */
async function fakeDisk(node: string, disk: string, o: { bytes: number; owner?: string; seenMsAgo?: number }): Promise<NodeDisk> {
  const nd = newNodeDisk(node, disk);
  if (o.owner) nd.spec.desired = { state: 'Reserved', owner: o.owner };
  const created = await admin().create(nd, { fieldManager: FIELD_MANAGER.agent });
  const lastSeenTime = new Date(Date.now() - (o.seenMsAgo ?? 0)).toISOString().replace(/\.\d+Z$/, 'Z');
  return await admin().applyStatus(
    { apiVersion: API_VERSION, kind: KIND, metadata: { name: created.metadata.name! }, status: { node: { phase: o.owner ? 'Reserved' : 'Available', capacityBytes: o.bytes, lastSeenTime } } },
    { fieldManager: FIELD_MANAGER.agent },
  );
}

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-claims-'));
  controller = await startController(controlPlane(), { logDir: join(work, 'logs') });
});

test.afterEach.always((t) => {
  if (t.passed) return;
  for (const p of [controller, ...agents]) if (p) console.error(`----- ${p.name} -----\n${p.logs(6000)}`);
});

test.after.always(async () => {
  await Promise.all([controller, ...agents].map((p) => p?.stop()));
  await rm(work, { recursive: true, force: true });
});

test.serial('the CRD refuses a minCapacity that is not a quantity and a selector with a wrong operator', async (t) => {
  await namespace('crd-checks');
  const bad = await denied(t, adminClaims().create(claim('crd-checks', 'x', { minCapacity: '32 megs' }), { fieldManager: 'test', dryRun: true }));
  t.regex(bad.message, /spec\.minCapacity must be a Kubernetes quantity such as 32Mi or 1Gi/);
  const op = await denied(t, adminClaims().create(claim('crd-checks', 'y', { selector: { matchExpressions: [{ key: 'a', operator: 'Near' as 'In' }] } }), { fieldManager: 'test', dryRun: true }));
  t.regex(op.message, /Unsupported value: "Near"/);
  const ok = await adminClaims().create(claim('crd-checks', 'z', { minCapacity: '1.5Gi' }), { fieldManager: 'test', dryRun: true });
  t.is(ok.spec.reclaimPolicy, 'Delete');
});

test.serial("a claim no disk fits is Pending and says what it asks in one line, written once; the controller's log counts every disk by why it does not fit", async (t) => {
  await namespace('pending');
  // Nine disks of nodes with no agent: 4 reserved, 3 too small, 2 whose agent reported an hour ago.
  const made: NodeDisk[] = [];
  for (let i = 1; i <= 4; i++) made.push(await fakeDisk('pending-r', `disk${i}`, { bytes: 64 * MiB, owner: 'alice' }));
  for (let i = 1; i <= 3; i++) made.push(await fakeDisk('pending-s', `disk${i}`, { bytes: MiB }));
  for (let i = 1; i <= 2; i++) made.push(await fakeDisk('pending-t', `disk${i}`, { bytes: 64 * MiB, seenMsAgo: 3600_000 }));
  await adminClaims().create(claim('pending', 'db', { minCapacity: '32Mi' }), { fieldManager: 'test' });
  try {
    const pending = await claimWhere('pending', 'db', 'Pending', (c) => c.status?.phase === 'Pending');
    t.is(pending.status?.message, 'no free disk of at least 32Mi');
    await eventually('the cluster-wide count in the log', async () => controller.logs().includes('"disks":"0/9 disks fit: 4 reserved, 3 smaller than 32Mi, 2 on nodes whose agent is stale"'));
    t.like(cond(pending, 'Bound'), { status: 'False', reason: 'NoDiskFits', message: pending.status?.message });
    // Tools with no custom check for claims wait on it: kstatus says InProgress, kubectl wait keeps waiting.
    t.like(cond(pending, 'Ready'), { status: 'False', reason: 'NoDiskFits', message: pending.status?.message, observedGeneration: 1 });
    t.deepEqual(await kstatusOf(pending), { status: 'InProgress', message: pending.status?.message });
    const waited = await waitReady('pending', 'db', '1s');
    t.false(waited.ok);
    t.regex(waited.out, /timed out waiting for the condition/);
    const column = await kubectl('get', 'ndc', '-n', 'pending', 'db', '-o', 'wide');
    t.regex(column, /^NAME\s+STATUS\s+DISK\s+NODE\s+CAPACITY\s+AGE\s+MESSAGE\n/);
    t.regex(column, /\ndb\s+Pending\s+\S+\s+no free disk of at least 32Mi\n/);

    // Someone reserves two of the small disks, and touches another: the counts move, the team's line
    // (what its claim asks) does not, and the claim is looked at again after each change.
    for (const disk of ['disk1', 'disk2']) {
      await admin().apply(
        { apiVersion: API_VERSION, kind: KIND, metadata: { name: nodeDiskName('pending-s', disk) }, spec: { desired: { state: 'Reserved', owner: 'bob' } } },
        { fieldManager: FIELD_MANAGER.plugin, force: true },
      );
    }
    await admin().mergePatch(nodeDiskName('pending-r', 'disk1'), { metadata: { labels: { touched: 'yes' } } }, { fieldManager: 'test' });
    // A disk only another claim fits (too small for db), made last: once it is bound, the looks after the
    // changes above are behind us.
    await fakeDisk('pending-s', 'disk9', { bytes: MiB });
    await adminClaims().create(claim('pending', 'probe', { diskName: nodeDiskName('pending-s', 'disk9') }), { fieldManager: 'test' });
    await claimWhere('pending', 'probe', 'Bound', (c) => c.status?.phase === 'Bound');
    t.is((await adminClaims().get('pending', 'db')).status?.message, 'no free disk of at least 32Mi');
    // The line written once, however many NodeDisk events came (the controller's own conditions on the
    // nine disks among them): written when it changes only.
    const statusWrites = (await controlPlane().auditedWrites()).filter(
      (w) => w.objectRef?.resource === 'nodediskclaims' && w.objectRef.subresource === 'status' && w.objectRef.namespace === 'pending' && w.objectRef.name === 'db',
    );
    t.is(statusWrites.length, 1);
    // A Warning for the line, as a PVC's FailedBinding: one for each line, not one for each look.
    const failed = await eventsWhere('pending', 'db', 'FailedBinding', 1);
    t.deepEqual(
      failed.map((e) => e.note),
      [pending.status?.message],
    );
    t.like(failed[0], { type: 'Warning', action: 'Bind', reportingController: 'localtest.example.com/node-disks-operator', regarding: { namespace: 'pending', uid: pending.metadata.uid } });
    t.is((await claimEvents('pending', 'db')).length, 1);
  } finally {
    // Not left Pending for the disks of the tests after this one.
    for (const name of ['db', 'probe']) {
      await adminClaims()
        .delete('pending', name)
        .catch(() => undefined);
      await gone('pending', name);
    }
    for (const nd of [...made.map((d) => d.metadata.name!), nodeDiskName('pending-s', 'disk9')]) await kubectl('delete', 'nodedisk', nd, '--ignore-not-found');
  }
});

test.serial('a team claims a disk in its namespace: Bound, the marker on the node, status says where; deleting the claim releases it', async (t) => {
  await agentWithDisks('claims-a', 2);
  await namespace('team-a', 'tina');
  const team = new NodeDiskClaimClient(as('tina'));
  const started = Date.now();
  const created = await team.create(claim('team-a', 'db', { nodeName: 'claims-a', minCapacity: '32Mi' }), { fieldManager: 'kubectl' });
  const bound = await claimWhere('team-a', 'db', 'Bound and Ready', readyAndBound);
  const seconds = (Date.now() - started) / 1000;
  t.log(`Bound and Ready ${seconds.toFixed(2)} s after the create`);
  const diskName = nodeDiskName('claims-a', 'disk1');
  t.like(bound.status, { phase: 'Bound', diskName, nodeName: 'claims-a', path: `${DEFAULT_DISK_DIR}/disk1.img`, capacityBytes: 64 * MiB, observedGeneration: 1 });
  t.like(cond(bound, 'Bound'), { status: 'True', reason: 'Bound', observedGeneration: 1 });
  t.like(cond(bound, 'Ready'), { status: 'True', reason: 'MarkerOnNode' });
  t.deepEqual(bound.metadata.finalizers, [CLAIM_FINALIZER]);
  const nd = await admin().get(diskName);
  t.deepEqual(nd.spec.desired, { state: 'Reserved', owner: 'claim:team-a/db', ownerUID: created.metadata.uid });
  t.is(readFileSync(join(diskDir('claims-a'), 'disk1.img.reserved'), 'utf8'), 'reserved\n');
  const table = await controlPlane().kubectl(controlPlane().admin(), ['get', 'ndc', '-n', 'team-a', '--as', 'tina']);
  t.regex(table, /^NAME\s+STATUS\s+DISK\s+NODE\s+CAPACITY\s+AGE\n/);
  t.regex(table, new RegExp(`\\ndb\\s+Bound\\s+${diskName}\\s+claims-a\\s+${64 * MiB}\\s+`));
  t.regex(await kubectl('get', 'ndisk', diskName, '-o', 'wide'), /claim:team-a\/db/);
  t.like(await kstatusOf(bound), { status: 'Current' });
  t.true((await waitReady('team-a', 'db', '30s')).ok);
  const [boundEvent] = await eventsWhere('team-a', 'db', 'Bound');
  t.like(boundEvent, { type: 'Normal', action: 'Bind', note: `bound to NodeDisk ${diskName} on node claims-a (${DEFAULT_DISK_DIR}/disk1.img)`, related: { kind: 'NodeDisk', name: diskName } });
  // Where kubectl describe shows them.
  t.regex(await controlPlane().kubectl(controlPlane().admin(), ['describe', 'ndc', 'db', '-n', 'team-a']), /Normal\s+Bound\s+.*bound to NodeDisk/);

  await team.delete('team-a', 'db');
  await gone('team-a', 'db');
  const released = await eventually('the disk Available again, its marker gone', async () => {
    const d = await admin().get(diskName);
    return d.status?.node?.phase === 'Available' && !existsSync(join(diskDir('claims-a'), 'disk1.img.reserved')) ? d : undefined;
  });
  // Released with a wipe request, which the agent reported done with the phase Available (ADR 38).
  t.regex(released.spec.desired?.wipe ?? '', /^claim-[0-9a-f-]{36}$/);
  t.deepEqual(released.spec.desired, { state: 'Available', wipe: released.status?.node?.wipedFor });
  const [releasedEvent] = await eventsWhere('team-a', 'db', 'Released');
  t.like(releasedEvent, {
    type: 'Normal',
    action: 'Release',
    note: `claim deleted: NodeDisk ${diskName} on node claims-a released; its node agent wipes it before it is free again`,
    related: { name: diskName },
  });
});

test.serial('a Bound claim says when its disk goes Missing, and is Lost when its NodeDisk is gone', async (t) => {
  await namespace('team-m');
  const diskName = nodeDiskName('claims-a', 'disk2');
  await adminClaims().create(claim('team-m', 'logs', { diskName }), { fieldManager: 'test' });
  await claimWhere('team-m', 'logs', 'Bound and Ready', readyAndBound);
  unlinkSync(join(diskDir('claims-a'), 'disk2.img'));
  const missing = await claimWhere('team-m', 'logs', 'Ready False', (c) => cond(c, 'Ready')?.status === 'False');
  t.is(missing.status?.phase, 'Bound');
  t.like(cond(missing, 'Ready'), { reason: 'DiskMissing', message: `disk image ${DEFAULT_DISK_DIR}/disk2.img is missing on node claims-a` });
  t.is(missing.status?.message, `disk image ${DEFAULT_DISK_DIR}/disk2.img is missing on node claims-a`);
  t.like(cond(missing, 'Stalled'), { status: 'True', reason: 'DiskMissing' });
  t.is((await kstatusOf(missing)).status, 'Failed');

  // A NodeDisk no agent holds (its finalizer would keep it): deleted, the claim bound to it is Lost. The
  // claims policy refuses that delete to everyone (ADR 28), so only a break-glass removal of its binding
  // (ADR 34) or a loss outside the API gets here; the binding is installed again after.
  const lone = await fakeDisk('claims-lost', 'disk1', { bytes: 64 * MiB });
  await adminClaims().create(claim('team-m', 'cache', { diskName: lone.metadata.name! }), { fieldManager: 'test' });
  await claimWhere('team-m', 'cache', 'Bound', (c) => c.status?.phase === 'Bound');
  await kubectl('delete', 'validatingadmissionpolicybinding', 'nodedisks-claims.localtest.example.com');
  await eventually(
    'the claims binding gone',
    () =>
      kubectl('delete', 'nodedisk', lone.metadata.name!).then(
        () => true,
        () => false,
      ),
    30_000,
    200,
  );
  await controlPlane().installBase();
  const lost = await claimWhere('team-m', 'cache', 'Lost', (c) => c.status?.phase === 'Lost');
  t.like(lost.status, { diskName: lone.metadata.name, nodeName: 'claims-lost', message: `NodeDisk ${lone.metadata.name} is gone` });
  t.like(cond(lost, 'Bound'), { status: 'False', reason: 'DiskGone' });
  // A person must act (the controller never moves a Bound claim): Stalled, which kstatus reads as Failed.
  t.like(cond(lost, 'Stalled'), { status: 'True', reason: 'DiskGone', message: `NodeDisk ${lone.metadata.name} is gone` });
  t.deepEqual(await kstatusOf(lost), { status: 'Failed', message: `NodeDisk ${lone.metadata.name} is gone` });
  const [lostEvent] = await eventsWhere('team-m', 'cache', 'Lost');
  t.like(lostEvent, { type: 'Warning', note: `NodeDisk ${lone.metadata.name} is gone: the claim stays Lost until a person acts (it is never moved to another disk)` });
  // A Lost claim is not moved to another disk by itself, and its deletion has nothing to release.
  await adminClaims().delete('team-m', 'cache');
  await gone('team-m', 'cache');
});

test.serial('100 claims racing for 20 disks: 20 Bound, 80 Pending, no disk twice', async (t) => {
  await agentWithDisks('race-a', 10);
  await agentWithDisks('race-b', 10);
  await namespace('race');
  const selector = { matchExpressions: [{ key: LABEL_NODE, operator: 'In' as const, values: ['race-a', 'race-b'] }] };
  const started = Date.now();
  await Promise.all(Array.from({ length: 100 }, (_, i) => adminClaims().create(claim('race', `c${i}`, { selector }), { fieldManager: 'test' })));
  const settled = await eventually(
    '20 Bound and 80 Pending',
    async () => {
      const list = await adminClaims().list('race');
      const bound = list.items.filter((c) => c.status?.phase === 'Bound');
      const pending = list.items.filter((c) => c.status?.phase === 'Pending');
      return bound.length === 20 && pending.length === 80 ? { bound, pending } : undefined;
    },
    60_000,
  );
  t.log(`100 claims for 20 disks settled in ${((Date.now() - started) / 1000).toFixed(2)} s`);
  const disks = settled.bound.map((c) => c.status!.diskName!);
  t.is(new Set(disks).size, 20);
  for (const c of settled.bound) {
    const nd = await admin().get(c.status!.diskName!);
    t.is(nd.spec.desired?.owner, `claim:race/${c.metadata.name}`);
  }
  // The controller's metrics, as Prometheus scrapes them: claims by phase, and the binds timed.
  const port = Number(/"httpPort":(\d+)/.exec(controller.logs())?.[1]);
  const scraped = await eventually('the claims gauge counts 80 Pending', async () => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    return /^nodedisks_controller_claims\{phase="Pending"\} 80$/m.test(text) ? text : undefined;
  });
  const sample = (re: RegExp) => Number(re.exec(scraped)?.[1]);
  t.true(sample(/^nodedisks_controller_claims\{phase="Bound"\} (\d+)$/m) >= 20);
  t.true(sample(/^nodedisks_controller_claim_bind_duration_seconds_count (\d+)$/m) >= 20);
  t.true(sample(/^nodedisks_controller_claim_bind_duration_seconds_bucket\{le="\+Inf"\} (\d+)$/m) >= 20);
  for (const c of settled.pending) t.is(c.status!.message!, `no free disk matches the selector ${LABEL_NODE} in (race-a,race-b)`);
  // Deleting the Bound ones hands their disks to 20 of the Pending ones.
  const before = Date.now();
  await Promise.all(settled.bound.map((c) => adminClaims().delete('race', c.metadata.name!)));
  const second = await eventually(
    '20 of the 80 Bound',
    async () => {
      const list = await adminClaims().list('race');
      const bound = list.items.filter((c) => c.status?.phase === 'Bound');
      return list.items.length === 80 && bound.length === 20 ? bound : undefined;
    },
    60_000,
  );
  t.log(`20 released and rebound in ${((Date.now() - before) / 1000).toFixed(2)} s`);
  t.is(new Set(second.map((c) => c.status!.diskName)).size, 20);
  await kubectl('delete', 'ndc', '-n', 'race', '--all', '--wait=true', '--timeout=60s');
});

test.serial("a team with only the namespaced role claims, but sees no other namespace's claims and cannot touch NodeDisks", async (t) => {
  await namespace('team-t', 'terry');
  await namespace('team-u', 'uma');
  const terry = new NodeDiskClaimClient(as('terry'));
  await new NodeDiskClaimClient(as('uma')).create(claim('team-u', 'theirs', { nodeName: 'nowhere' }), { fieldManager: 'kubectl' });
  const mine = await terry.create(claim('team-t', 'mine', { nodeName: 'nowhere' }), { fieldManager: 'kubectl' });
  t.is(mine.metadata.namespace, 'team-t');
  t.deepEqual(
    (await terry.list('team-t')).items.map((c) => c.metadata.name),
    ['mine'],
  );
  t.is((await denied(t, terry.list('team-u'))).statusCode, 403);
  t.is((await denied(t, terry.get('team-u', 'theirs'))).statusCode, 403);
  t.is((await denied(t, terry.delete('team-u', 'theirs'))).statusCode, 403);
  t.is((await denied(t, terry.list(undefined))).statusCode, 403);
  const asTerry = new NodeDiskClient(as('terry'));
  t.is((await denied(t, asTerry.list())).statusCode, 403);
  t.is((await denied(t, asTerry.mergePatch(nodeDiskName('claims-a', 'disk1'), { metadata: { labels: { a: 'b' } } }, { fieldManager: 'kubectl' }))).statusCode, 403);
  // Nor the claim's status: that is the controller's.
  const status = await denied(
    t,
    terry.applyStatus({ apiVersion: API_VERSION, kind: 'NodeDiskClaim', metadata: { name: 'mine', namespace: 'team-t' }, status: { phase: 'Bound', diskName: 'x' } }, { fieldManager: 'kubectl' }),
  );
  t.is(status.statusCode, 403);
  await terry.delete('team-t', 'mine');
  await gone('team-t', 'mine');
});

test.serial('ResourceQuota count/nodediskclaims.localtest.example.com limits how many claims a namespace holds', async (t) => {
  await namespace('quota-q');
  const resource = 'count/nodediskclaims.localtest.example.com';
  await kubectl('create', 'quota', 'claims', '-n', 'quota-q', `--hard=${resource}=2`);
  // No kube-controller-manager runs here: its quota controller's first status is written as it would be.
  await kubectl(
    'patch',
    'resourcequota',
    'claims',
    '-n',
    'quota-q',
    '--subresource=status',
    '--type=merge',
    '-p',
    JSON.stringify({ status: { hard: { [resource]: '2' }, used: { [resource]: '0' } } }),
  );
  await adminClaims().create(claim('quota-q', 'one', { nodeName: 'nowhere' }), { fieldManager: 'test' });
  await adminClaims().create(claim('quota-q', 'two', { nodeName: 'nowhere' }), { fieldManager: 'test' });
  const third = await denied(t, adminClaims().create(claim('quota-q', 'three', { nodeName: 'nowhere' }), { fieldManager: 'test' }));
  t.is(third.statusCode, 403);
  t.regex(
    third.message,
    /exceeded quota: claims, requested: count\/nodediskclaims\.localtest\.example\.com=1, used: count\/nodediskclaims\.localtest\.example\.com=2, limited: count\/nodediskclaims\.localtest\.example\.com=2/,
  );
});

test.serial("only the controller changes a claim's reservation: an editor can neither release it nor reserve a disk for a claim, nor can an admin", async (t) => {
  await namespace('team-e');
  await kubectl('create', 'clusterrolebinding', 'eddie-nodedisks-editor', '--clusterrole=nodedisks-editor', '--user=eddie');
  await adminClaims().create(claim('team-e', 'db', { nodeName: 'claims-a' }), { fieldManager: 'test' });
  const bound = await claimWhere('team-e', 'db', 'Bound and Ready', readyAndBound);
  const diskName = bound.status!.diskName!;
  const eddie = new NodeDiskClient(as('eddie'));
  // As `kubectl nodedisks release` writes it: state and owner, both.
  const release: NodeDiskApply = { apiVersion: API_VERSION, kind: KIND, metadata: { name: diskName }, spec: { desired: { state: 'Available', owner: '' } } };
  for (const who of [eddie, admin()]) {
    const err = await denied(t, who.apply(release, { fieldManager: FIELD_MANAGER.plugin, force: true }));
    t.regex(
      err.message,
      /ValidatingAdmissionPolicy 'nodedisks-claims\.localtest\.example\.com'.*is reserved for NodeDiskClaim team-e\/db: only the controller changes that reservation; release the disk by deleting the claim/,
    );
    const handOver = await denied(t, who.mergePatch(diskName, { spec: { desired: { owner: 'eddie' } } }, { fieldManager: FIELD_MANAGER.plugin }));
    t.regex(handOver.message, /only the controller changes that reservation/);
  }
  // Nor bind another namespace's claim by writing its owner on a free disk.
  await agentWithDisks('claims-e', 1);
  const free = nodeDiskName('claims-e', 'disk1');
  const forge = await denied(
    t,
    eddie.apply(
      { apiVersion: API_VERSION, kind: KIND, metadata: { name: free }, spec: { desired: { state: 'Reserved', owner: 'claim:team-a/db' } } },
      { fieldManager: FIELD_MANAGER.plugin, force: true },
    ),
  );
  t.regex(forge.message, /only the controller reserves a NodeDisk for a claim \(owner claim:team-a\/db\): create a NodeDiskClaim in the namespace instead/);
  // A person's own reservation of a free disk is as before.
  await eddie.apply(
    { apiVersion: API_VERSION, kind: KIND, metadata: { name: free }, spec: { desired: { state: 'Reserved', owner: 'eddie' } } },
    { fieldManager: FIELD_MANAGER.plugin, force: true },
  );
  t.is((await admin().get(diskName)).spec.desired?.owner, 'claim:team-e/db');
  await adminClaims().delete('team-e', 'db');
  await gone('team-e', 'db');
});

test.serial(
  'reclaimPolicy Retain keeps the disk reserved for the deleted claim; a claim created again under its name does not get it; a person releases it once the controller says ClaimGone',
  async (t) => {
    await namespace('team-r');
    const first = await adminClaims().create(claim('team-r', 'keep', { nodeName: 'claims-a', reclaimPolicy: 'Retain' }), { fieldManager: 'test' });
    const bound = await claimWhere('team-r', 'keep', 'Bound and Ready', readyAndBound);
    const diskName = bound.status!.diskName!;
    await adminClaims().delete('team-r', 'keep');
    await gone('team-r', 'keep');
    const kept = await admin().get(diskName);
    t.deepEqual(kept.spec.desired, { state: 'Reserved', owner: 'claim:team-r/keep', ownerUID: first.metadata.uid });
    const [retained] = await eventsWhere('team-r', 'keep', 'Retained');
    t.like(retained, { type: 'Normal', note: `claim deleted with reclaimPolicy Retain: NodeDisk ${diskName} on node claims-a stays reserved for claim:team-r/keep` });
    t.deepEqual(await claimEvents('team-r', 'keep', 'Released'), []);
    // The binding is the claim object's (its UID): the claim again under the name is another object, and
    // waits rather than take the retained disk (no other disk of the node is free).
    await adminClaims().create(claim('team-r', 'keep', { nodeName: 'claims-a' }), { fieldManager: 'test' });
    await claimWhere('team-r', 'keep', 'Pending', (c) => c.status?.phase === 'Pending');
    const released = await eventually('the disk says ClaimGone', async () => {
      const d = await admin().get(diskName);
      return d.status?.conditions?.some((c) => c.type === 'Accepted' && c.reason === 'ClaimGone') ? d : undefined;
    });
    t.is(released.spec.desired?.ownerUID, first.metadata.uid);
    // A person releases it (as kubectl nodedisks release writes it); the waiting claim then gets it.
    await admin().jsonPatch(
      diskName,
      [
        { op: 'test', path: '/metadata/resourceVersion', value: released.metadata.resourceVersion },
        { op: 'replace', path: '/spec/desired', value: { state: 'Available' } },
      ],
      { fieldManager: FIELD_MANAGER.plugin },
    );
    const again = await claimWhere('team-r', 'keep', 'Bound', (c) => c.status?.phase === 'Bound');
    t.is(again.status?.diskName, diskName);
    await adminClaims().delete('team-r', 'keep');
    await gone('team-r', 'keep');
    await eventually('the disk released', async () => (await admin().get(diskName)).spec.desired?.state === 'Available');
  },
);

test.serial("deleting a claim's namespace releases its disk", async (t) => {
  await namespace('team-gone');
  await adminClaims().create(claim('team-gone', 'db', { nodeName: 'claims-a' }), { fieldManager: 'test' });
  const bound = await claimWhere('team-gone', 'db', 'Bound and Ready', readyAndBound);
  const diskName = bound.status!.diskName!;
  await kubectl('delete', 'namespace', 'team-gone', '--wait=false');
  // No kube-controller-manager runs here: its namespace controller's part, deleting what the namespace holds, is played by hand.
  await kubectl('delete', 'ndc', '-n', 'team-gone', '--all', '--wait=false');
  await gone('team-gone', 'db');
  const released = await eventually('the disk released', async () => {
    const d = await admin().get(diskName);
    return d.spec.desired?.state === 'Available' ? d : undefined;
  });
  t.is(released.spec.desired?.owner, undefined);
});

test.serial('a restarted controller finds its bindings on the disks: the same disk, never a second one', async (t) => {
  await namespace('team-restart');
  await adminClaims().create(claim('team-restart', 'db', { nodeName: 'claims-a' }), { fieldManager: 'test' });
  const bound = await claimWhere('team-restart', 'db', 'Bound and Ready', readyAndBound);
  await controller.stop();
  // The claim's status forgotten while no controller runs: only the owner on the disk remembers.
  await kubectl('patch', 'ndc', 'db', '-n', 'team-restart', '--subresource=status', '--type=json', '-p', '[{"op":"remove","path":"/status/phase"},{"op":"remove","path":"/status/diskName"}]');
  controller = await startController(controlPlane(), { logDir: join(work, 'logs'), identity: 'controller-1' });
  const again = await claimWhere('team-restart', 'db', 'Bound again', (c) => c.status?.phase === 'Bound');
  t.is(again.status?.diskName, bound.status?.diskName);
  const held = (await admin().list()).items.filter((d) => d.spec.desired?.owner === 'claim:team-restart/db');
  t.deepEqual(
    held.map((d) => d.metadata.name),
    [bound.status!.diskName],
  );
});
