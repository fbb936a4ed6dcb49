// What a team sees of the pool through its claims, and how much of it a team can hold: a real control
// plane with the install's CRDs, RBAC and policies, the real controller as a separate process, and team
// users whose only rights are the built-in `edit` in their namespace. NodeDisks are made by the admin as
// an agent would report them (no agent runs: nothing here needs a file on a node).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { claimsPath, NodeDiskClaimClient } from '../../api/claim-client.ts';
import { API_VERSION, FIELD_MANAGER, KIND } from '../../api/constants.ts';
import type { NodeDiskClaim } from '../../api/v1alpha1/claim-types.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { newClaim, newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { claimGone } from '../harness/claims.ts';
import { denied, nodeDisksFor, restFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const MiB = 2 ** 20;
const MAX_DISKS = 'localtest.example.com/max-disks';
let work = '';
let controller: Program;
const admin = () => nodeDisksFor(controlPlane().admin());
const adminClaims = () => new NodeDiskClaimClient(admin().rest);
const kubectl = (...args: string[]) => controlPlane().kubectl(controlPlane().admin(), args);

/** A team: namespace `ns`, a ServiceAccount with the built-in `edit` there and nothing else; its claims client. */
async function team(ns: string): Promise<NodeDiskClaimClient> {
  return new NodeDiskClaimClient(restFor(await controlPlane().namespacedUser(ns, 'dev')));
}

/** A NodeDisk as an agent would report it, made by the admin. */
async function fakeDisk(node: string, disk: string, o: { bytes: number; owner?: string }): Promise<NodeDisk> {
  const nd = newNodeDisk(node, disk);
  if (o.owner) nd.spec.desired = { state: 'Reserved', owner: o.owner };
  const created = await admin().create(nd, { fieldManager: FIELD_MANAGER.agent });
  const lastSeenTime = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  return await admin().applyStatus(
    { apiVersion: API_VERSION, kind: KIND, metadata: { name: created.metadata.name! }, status: { node: { phase: o.owner ? 'Reserved' : 'Available', capacityBytes: o.bytes, lastSeenTime } } },
    { fieldManager: FIELD_MANAGER.agent },
  );
}

async function claimWhere(ns: string, name: string, what: string, ok: (c: NodeDiskClaim) => boolean): Promise<NodeDiskClaim> {
  return await eventually(`claim ${ns}/${name} ${what}`, async () => {
    const c = await adminClaims().get(ns, name);
    return ok(c) ? c : undefined;
  });
}
const pending = (c: NodeDiskClaim) => c.status?.phase === 'Pending';
const bound = (c: NodeDiskClaim) => c.status?.phase === 'Bound';

/**
 * The FailedBinding notes about claim ns/name, as `kubectl describe` shows them to its team (the core v1
 * Events in the claim's namespace; read by the admin here, as the test control plane has no
 * kube-controller-manager to give the built-in `edit` its aggregated read rights on Events).
 */
async function failedBindingNotes(ns: string, name: string): Promise<string[]> {
  const list = await admin().rest.request<{ items: { reason: string; message: string; involvedObject: { kind: string; name: string } }[] }>('GET', `/api/v1/namespaces/${ns}/events`);
  return list.items.filter((e) => e.involvedObject.kind === 'NodeDiskClaim' && e.involvedObject.name === name && e.reason === 'FailedBinding').map((e) => e.message);
}

/** As `kubectl patch --type=merge` changes a claim. */
function mergePatch(client: NodeDiskClaimClient, ns: string, name: string, body: unknown): Promise<NodeDiskClaim> {
  return client.rest.request<NodeDiskClaim>('PATCH', `${claimsPath(ns)}/${name}`, { body, contentType: 'application/merge-patch+json', query: { fieldManager: 'kubectl' } });
}

async function deleteClaim(ns: string, name: string): Promise<void> {
  await adminClaims().delete(ns, name);
  await claimGone(adminClaims(), ns, name);
}

/** Words that would tell a team of other disks: a count of the pool, or why another's disk is not free. */
const CLUSTER_WORDS = /\d+\/\d+ disks|reserved|stale|smaller|not matching|other nodes|does not exist|not found/;

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-tenant-'));
  controller = await startController(controlPlane(), { logDir: join(work, 'logs') });
});

test.afterEach.always((t) => {
  if (!t.passed && controller) console.error(`----- ${controller.name} -----\n${controller.logs(6000)}`);
});

test.after.always(async () => {
  await controller?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

test.serial("a Pending claim tells its team what its own filters ask, not the pool's size nor why each disk is not free; the controller's log counts every disk", async (t) => {
  // Other teams' disks: two reserved, one too small, one on another node.
  const made: NodeDisk[] = [];
  made.push(await fakeDisk('tenant-m02', 'disk1', { bytes: 64 * MiB, owner: 'bob' }));
  made.push(await fakeDisk('tenant-m02', 'disk2', { bytes: 64 * MiB, owner: 'alice' }));
  made.push(await fakeDisk('tenant-m02', 'disk3', { bytes: MiB }));
  made.push(await fakeDisk('tenant-m03', 'disk1', { bytes: 64 * MiB }));
  const teamA = await team('tenant-a');
  try {
    await teamA.create(newClaim('tenant-a', 'db', { nodeName: 'tenant-m02', minCapacity: '32Mi' }), { fieldManager: 'kubectl' });
    const c = await claimWhere('tenant-a', 'db', 'Pending', pending);
    t.is(c.status?.message, 'no free disk of at least 32Mi on node tenant-m02');
    for (const cond of c.status?.conditions ?? []) t.notRegex(cond.message, CLUSTER_WORDS);
    const notes = await eventually('the FailedBinding event', async () => {
      const n = await failedBindingNotes('tenant-a', 'db');
      return n.length ? n : undefined;
    });
    t.deepEqual(notes, ['no free disk of at least 32Mi on node tenant-m02']);
    // The count of every disk is for people who may read NodeDisks: the controller's log.
    await eventually('the cluster-wide line in the log', async () => controller.logs().includes('"disks":"0/4 disks fit: 2 reserved, 1 on other nodes than tenant-m02, 1 smaller than 32Mi"'));

    await teamA.create(newClaim('tenant-a', 'labelled', { selector: { matchLabels: { tier: 'fast' } } }), { fieldManager: 'kubectl' });
    t.is((await claimWhere('tenant-a', 'labelled', 'Pending', pending)).status?.message, 'no free disk matches the selector tier=fast');
  } finally {
    await deleteClaim('tenant-a', 'db');
    await deleteClaim('tenant-a', 'labelled').catch(() => undefined);
    for (const nd of made) await kubectl('delete', 'nodedisk', nd.metadata.name!);
  }
});

test.serial("a claim naming a disk reads the same whether the disk does not exist or is another team's", async (t) => {
  // Another team's disk, bound to its claim.
  const theirs = await fakeDisk('tenant-n1', 'disk1', { bytes: 64 * MiB });
  const other = await team('tenant-other');
  await other.create(newClaim('tenant-other', 'db', { diskName: theirs.metadata.name! }), { fieldManager: 'kubectl' });
  await claimWhere('tenant-other', 'db', 'Bound', bound);
  const teamB = await team('tenant-b');
  try {
    await teamB.create(newClaim('tenant-b', 'ghost', { diskName: 'node-disk-tenant-n1-disk9' }), { fieldManager: 'kubectl' });
    await teamB.create(newClaim('tenant-b', 'taken', { diskName: theirs.metadata.name! }), { fieldManager: 'kubectl' });
    const ghost = await claimWhere('tenant-b', 'ghost', 'Pending', pending);
    const taken = await claimWhere('tenant-b', 'taken', 'Pending', pending);
    t.is(ghost.status?.message, 'disk node-disk-tenant-n1-disk9 is not free for this claim');
    t.is(taken.status?.message, `disk ${theirs.metadata.name} is not free for this claim`);
    const words = (c: NodeDiskClaim) => (c.status?.conditions ?? []).map((x) => `${x.type} ${x.status} ${x.reason} ${x.message.replace(c.spec.diskName!, 'X')}`);
    t.deepEqual(words(ghost), words(taken));
    const ghostNotes = await eventually('FailedBinding on ghost', async () => ((await failedBindingNotes('tenant-b', 'ghost')).length ? failedBindingNotes('tenant-b', 'ghost') : undefined));
    const takenNotes = await eventually('FailedBinding on taken', async () => ((await failedBindingNotes('tenant-b', 'taken')).length ? failedBindingNotes('tenant-b', 'taken') : undefined));
    t.deepEqual(
      ghostNotes.map((n) => n.replace('node-disk-tenant-n1-disk9', 'X')),
      takenNotes.map((n) => n.replace(theirs.metadata.name!, 'X')),
    );
  } finally {
    await deleteClaim('tenant-b', 'ghost');
    await deleteClaim('tenant-b', 'taken');
    await deleteClaim('tenant-other', 'db');
    await kubectl('delete', 'nodedisk', theirs.metadata.name!);
  }
});

test.serial("a claim's reclaimPolicy cannot be changed once set: no loop of claim, Retain, delete", async (t) => {
  const teamC = await team('tenant-c');
  await teamC.create(newClaim('tenant-c', 'db', { nodeName: 'nowhere' }), { fieldManager: 'kubectl' });
  const toRetain = await denied(t, mergePatch(teamC, 'tenant-c', 'db', { spec: { reclaimPolicy: 'Retain' } }));
  t.is(toRetain.statusCode, 422);
  t.regex(toRetain.message, /spec\.reclaimPolicy is immutable/);
  await teamC.create(newClaim('tenant-c', 'kept', { nodeName: 'nowhere', reclaimPolicy: 'Retain' }), { fieldManager: 'kubectl' });
  const toDelete = await denied(t, mergePatch(teamC, 'tenant-c', 'kept', { spec: { reclaimPolicy: 'Delete' } }));
  t.regex(toDelete.message, /spec\.reclaimPolicy is immutable/);
  await deleteClaim('tenant-c', 'db');
  await deleteClaim('tenant-c', 'kept');
});

test.serial('a namespace holds at most its max-disks annotation: a retained disk counts, the next claim stays Pending saying so, and raising the limit binds it', async (t) => {
  const made: NodeDisk[] = [];
  for (let i = 1; i <= 3; i++) made.push(await fakeDisk('tenant-q1', `disk${i}`, { bytes: 64 * MiB }));
  const teamQ = await team('tenant-q');
  await kubectl('annotate', 'namespace', 'tenant-q', `${MAX_DISKS}=1`);
  await teamQ.create(newClaim('tenant-q', 'first', { nodeName: 'tenant-q1', reclaimPolicy: 'Retain' }), { fieldManager: 'kubectl' });
  const first = await claimWhere('tenant-q', 'first', 'Bound', bound);
  await deleteClaim('tenant-q', 'first');
  t.deepEqual((await admin().get(first.status!.diskName!)).spec.desired, { state: 'Reserved', owner: 'claim:tenant-q/first', ownerUID: first.metadata.uid });

  await teamQ.create(newClaim('tenant-q', 'second', { nodeName: 'tenant-q1' }), { fieldManager: 'kubectl' });
  const second = await claimWhere('tenant-q', 'second', 'Pending', pending);
  t.is(
    second.status?.message,
    `namespace tenant-q holds 1 of the 1 disks its annotation ${MAX_DISKS} allows (retained disks count too): delete a claim, or ask a cluster admin to free a retained disk or raise the limit`,
  );
  t.notRegex(second.status?.message ?? '', CLUSTER_WORDS);
  // Another namespace, with no limit, is not held back.
  const teamR = await team('tenant-r');
  await teamR.create(newClaim('tenant-r', 'db', { nodeName: 'tenant-q1' }), { fieldManager: 'kubectl' });
  await claimWhere('tenant-r', 'db', 'Bound', bound);

  // A cluster admin raises it: the Pending claim binds, without any change of the claim or the disks.
  await kubectl('annotate', 'namespace', 'tenant-q', '--overwrite', `${MAX_DISKS}=2`);
  const now = await claimWhere('tenant-q', 'second', 'Bound', bound);
  t.not(now.status?.diskName, first.status?.diskName);
  // At the limit again: a third claim waits.
  await teamQ.create(newClaim('tenant-q', 'third', { nodeName: 'tenant-q1' }), { fieldManager: 'kubectl' });
  t.regex((await claimWhere('tenant-q', 'third', 'Pending', pending)).status?.message ?? '', /^namespace tenant-q holds 2 of the 2 disks/);

  for (const [ns, name] of [
    ['tenant-q', 'second'],
    ['tenant-q', 'third'],
    ['tenant-r', 'db'],
  ] as const)
    await deleteClaim(ns, name);
});

test.serial('claims created together never take a namespace past its limit: 10 claims, max-disks 3, 3 Bound', async (t) => {
  const made: NodeDisk[] = [];
  for (let i = 1; i <= 10; i++) made.push(await fakeDisk('tenant-burst', `disk${i}`, { bytes: 64 * MiB }));
  const teamW = await team('tenant-w');
  await kubectl('annotate', 'namespace', 'tenant-w', `${MAX_DISKS}=3`);
  await Promise.all(Array.from({ length: 10 }, (_, i) => teamW.create(newClaim('tenant-w', `c${i}`, { nodeName: 'tenant-burst' }), { fieldManager: 'kubectl' })));
  const settled = await eventually('3 Bound and 7 Pending', async () => {
    const items = (await adminClaims().list('tenant-w')).items;
    const b = items.filter(bound);
    const p = items.filter(pending);
    return b.length === 3 && p.length === 7 ? { b, p } : undefined;
  });
  for (const c of settled.p) t.regex(c.status?.message ?? '', /^namespace tenant-w holds 3 of the 3 disks/);
  const held = (await admin().list()).items.filter((d) => d.spec.desired?.owner?.startsWith('claim:tenant-w/'));
  t.is(held.length, 3);
  await kubectl('delete', 'ndc', '-n', 'tenant-w', '--all', '--wait=true', '--timeout=60s');
  for (const nd of made) await kubectl('delete', 'nodedisk', nd.metadata.name!);
});

test.serial("a team with edit in its namespace cannot change its Namespace's max-disks", async (t) => {
  await team('tenant-s');
  const user = await controlPlane().namespacedUser('tenant-s', 'dev');
  const err = await denied(
    t,
    restFor(user).request('PATCH', '/api/v1/namespaces/tenant-s', { body: { metadata: { annotations: { [MAX_DISKS]: '1000' } } }, contentType: 'application/merge-patch+json' }),
  );
  t.is(err.statusCode, 403);
});
