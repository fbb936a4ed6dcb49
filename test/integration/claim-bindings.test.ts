// A claim's binding belongs to the claim object (its UID), as a PV's claimRef does, and what follows from it
// (issue 30, items 3 and 6; ADR 34): a claim created again under an old name does not inherit the old
// claim's retained disk; the API server keeps the UID on the reservation; a reservation whose claim is gone
// is Released, says so, is counted, and may be released by a person then (and only then); a claim whose
// disk's machine is gone or replaced is not Ready. A real control plane with the install's policies, the
// real controller (node lifecycle on, as installed) and agents as separate processes.
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { NodeDiskClaimClient } from '../../api/claim-client.ts';
import type { NodeDiskApply } from '../../api/client.ts';
import { NodeDiskClient } from '../../api/client.ts';
import { API_VERSION, FIELD_MANAGER, KIND, LABEL_NODE } from '../../api/constants.ts';
import type { NodeDiskClaim, NodeDiskClaimSpec } from '../../api/v1alpha1/claim-types.ts';
import type { Condition, NodeDisk } from '../../api/v1alpha1/types.ts';
import { newClaim } from '../../hack/lib/nodedisks.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { seedDisks, startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { claimGone } from '../harness/claims.ts';
import { loadKubeConfig } from '../../lib/kube/kubeconfig.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import { reportedNodeDisk } from '../harness/reported-disks.ts';
import { denied, nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const MiB = 2 ** 20;
let work = '';
let controller: Program;
const agents: Program[] = [];
const admin = () => nodeDisksFor(controlPlane().admin());
const adminClaims = () => new NodeDiskClaimClient(admin().rest);
const kubectl = (...args: string[]) => controlPlane().kubectl(controlPlane().admin(), args);

function as(user: string): RestClient {
  return new RestClient(loadKubeConfig({ kubeconfig: controlPlane().admin().kubeconfig, as: user }), { timeoutMs: 30_000 });
}

async function agentWithDisks(node: string, count: number, bytes = 64 * MiB): Promise<void> {
  const dir = join(work, node, 'disks');
  await seedDisks(dir, count, bytes);
  agents.push(await startAgent(controlPlane(), { node, diskDir: dir, logDir: join(work, 'logs'), rescanInterval: '1s' }));
  await eventually(`${count} Available disks on ${node}`, async () => {
    const list = await admin().list({ labelSelector: `${LABEL_NODE}=${node}` });
    return list.items.filter((d) => d.status?.node?.phase === 'Available').length === count;
  });
}

async function claimWhere(ns: string, name: string, what: string, ok: (c: NodeDiskClaim) => boolean): Promise<NodeDiskClaim> {
  return await eventually(`claim ${ns}/${name} ${what}`, async () => {
    const c = await adminClaims().get(ns, name);
    return ok(c) ? c : undefined;
  });
}

async function diskWhere(name: string, what: string, ok: (d: NodeDisk) => boolean): Promise<NodeDisk> {
  return await eventually(`NodeDisk ${name} ${what}`, async () => {
    const d = await admin().get(name);
    return ok(d) ? d : undefined;
  });
}

async function gone(ns: string, name: string): Promise<void> {
  await claimGone(adminClaims(), ns, name);
}

const cond = (conds: Condition[] | undefined, type: string) => conds?.find((x) => x.type === type);
const readyAndBound = (c: NodeDiskClaim) => c.status?.phase === 'Bound' && cond(c.status.conditions, 'Ready')?.status === 'True';
const claim = (ns: string, name: string, spec: NodeDiskClaimSpec = {}) => newClaim(ns, name, spec);

/** A namespace deleted and created again: no kube-controller-manager runs here, so its part (emptying and finalizing) is played by hand. */
async function recreateNamespace(ns: string): Promise<void> {
  await kubectl('delete', 'namespace', ns, '--wait=false');
  await kubectl('delete', 'ndc', '-n', ns, '--all', '--wait=true', '--timeout=60s');
  await controlPlane().kubectl(
    controlPlane().admin(),
    ['replace', '--raw', `/api/v1/namespaces/${ns}/finalize`, '-f', '-'],
    JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns }, spec: { finalizers: [] } }),
  );
  await eventually(`namespace ${ns} gone`, async () =>
    kubectl('get', 'namespace', ns).then(
      () => false,
      () => true,
    ),
  );
  await kubectl('create', 'namespace', ns);
}

/** The plugin itself, `kubectl nodedisks …` as `user` (impersonated by the admin's kubeconfig). */
function plugin(user: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(REPO_ROOT, 'plugin', 'main.ts'), ...args, `--as=${user}`],
      { env: { ...process.env, KUBECONFIG: controlPlane().admin().kubeconfig }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-bindings-'));
  controller = await startController(controlPlane(), { logDir: join(work, 'logs'), nodeLifecycle: true });
  await agentWithDisks('bind-a', 2);
});

test.afterEach.always((t) => {
  if (t.passed) return;
  for (const p of [controller, ...agents]) if (p) console.error(`----- ${p.name} -----\n${p.logs(6000)}`);
});

test.after.always(async () => {
  await Promise.all([controller, ...agents].map((p) => p?.stop()));
  await rm(work, { recursive: true, force: true });
});

test.serial("a claim created again under an old name, in a re-created namespace, does not get the old claim's retained disk: it binds a free disk that fits, or stays Pending", async (t) => {
  await kubectl('create', 'namespace', 'reborn');
  const first = await adminClaims().create(claim('reborn', 'db', { nodeName: 'bind-a', reclaimPolicy: 'Retain' }), { fieldManager: 'test' });
  const bound = await claimWhere('reborn', 'db', 'Bound and Ready', readyAndBound);
  const retained = bound.status!.diskName!;
  // The binding records the claim's UID, as a PV's claimRef does.
  t.deepEqual((await admin().get(retained)).spec.desired, { state: 'Reserved', owner: 'claim:reborn/db', ownerUID: first.metadata.uid });
  await adminClaims().delete('reborn', 'db');
  await gone('reborn', 'db');
  await recreateNamespace('reborn');

  // Another team's claim `db` with the same filters: the other free disk, never the retained one.
  const second = await adminClaims().create(claim('reborn', 'db', { nodeName: 'bind-a', minCapacity: '32Mi' }), { fieldManager: 'test' });
  const again = await claimWhere('reborn', 'db', 'Bound and Ready', readyAndBound);
  t.not(again.status?.diskName, retained);
  t.deepEqual((await admin().get(again.status!.diskName!)).spec.desired, { state: 'Reserved', owner: 'claim:reborn/db', ownerUID: second.metadata.uid });
  t.deepEqual((await admin().get(retained)).spec.desired, { state: 'Reserved', owner: 'claim:reborn/db', ownerUID: first.metadata.uid });

  // Its deletion releases its own disk, not the retained one.
  await adminClaims().delete('reborn', 'db');
  await gone('reborn', 'db');
  await diskWhere(again.status!.diskName!, 'released', (d) => d.spec.desired?.state === 'Available');
  t.is((await admin().get(retained)).spec.desired?.ownerUID, first.metadata.uid);

  // Asking for the retained disk by name: Pending (it is reserved), not bound to it.
  await adminClaims().create(claim('reborn', 'db', { diskName: retained }), { fieldManager: 'test' });
  const pending = await claimWhere('reborn', 'db', 'Pending', (c) => c.status?.phase === 'Pending');
  // The team's line (the other disks' state is not the team's to read).
  t.is(pending.status?.message, `disk ${retained} is not free for this claim`);
  t.deepEqual((await admin().get(retained)).spec.desired, { state: 'Reserved', owner: 'claim:reborn/db', ownerUID: first.metadata.uid });
  await adminClaims().delete('reborn', 'db');
  await gone('reborn', 'db');
});

test.serial(
  "the API server keeps a claim's binding to its UID: the controller reserves for a claim only with one and never changes it, and nobody else may touch it or forge ClaimGone",
  async (t) => {
    const name = await reportedNodeDisk(admin(), 'bind-policy', 'disk1', { seenNow: true });
    const asController = nodeDisksFor(await controlPlane().controller());
    const desired = (d: NodeDisk['spec']['desired']): NodeDiskApply => ({ apiVersion: API_VERSION, kind: KIND, metadata: { name }, spec: { desired: d } });
    const opts = { fieldManager: FIELD_MANAGER.controller, force: true, dryRun: true };
    const noUID = await denied(t, asController.apply(desired({ state: 'Reserved', owner: 'claim:ns/db' }), opts));
    t.regex(noUID.message, /a reservation for a claim carries the claim's UID \(spec\.desired\.ownerUID\)/);
    await asController.apply(desired({ state: 'Reserved', owner: 'claim:ns/db', ownerUID: 'uid-1' }), { ...opts, dryRun: false });
    const changed = await denied(t, asController.apply(desired({ state: 'Reserved', owner: 'claim:ns/db', ownerUID: 'uid-2' }), opts));
    t.regex(changed.message, /the claim's UID \(spec\.desired\.ownerUID\) of a reservation is recorded once and never changed \(from uid-1 to uid-2\)/);
    // An editor of NodeDisks may not change it either (nor an admin: the claims policy holds every identity but the controller).
    await kubectl('create', 'clusterrolebinding', 'edna-nodedisks-editor', '--clusterrole=nodedisks-editor', '--user=edna');
    for (const who of [new NodeDiskClient(as('edna')), admin()]) {
      const err = await denied(t, who.mergePatch(name, { spec: { desired: { ownerUID: 'uid-3' } } }, { fieldManager: FIELD_MANAGER.plugin }));
      // Whether or not the controller has said yet that the claim (which never existed) is gone.
      t.regex(
        err.message,
        /is reserved for NodeDiskClaim ns\/db(: only the controller changes that reservation|, which is gone: it may only be released \(to Available, with no owner and no ownerUID\))/,
      );
    }
    // The claim ns/db (uid-1) does not exist: the controller says so, and nobody else may write or remove that word.
    const released = await diskWhere(name, 'ClaimGone', (d) => cond(d.status?.conditions, 'Accepted')?.reason === 'ClaimGone');
    const forged: Condition = { type: 'Accepted', status: 'True', reason: 'ClaimGone', message: 'forged', lastTransitionTime: '2026-01-01T00:00:00Z', observedGeneration: 1 };
    const other = await reportedNodeDisk(admin(), 'bind-policy', 'disk2', { seenNow: true });
    const forge = await denied(
      t,
      admin().applyStatus({ apiVersion: API_VERSION, kind: KIND, metadata: { name: other }, status: { conditions: [forged] } }, { fieldManager: 'test', force: true }),
    );
    t.regex(forge.message, /only the controller writes a ClaimGone condition/);
    const keepWord = (released.status?.conditions ?? []).map((c) => (c.type === 'Accepted' ? { ...c, message: 'changed' } : c));
    const edit = await denied(t, admin().applyStatus({ apiVersion: API_VERSION, kind: KIND, metadata: { name }, status: { conditions: keepWord } }, { fieldManager: 'test', force: true }));
    t.regex(edit.message, /only the controller writes a ClaimGone condition/);
  },
);

test.serial('a reservation whose claim is gone is Released: the NodeDisk says ClaimGone, naming the claim, and a NodeDisk editor may release it then, and only then', async (t) => {
  await kubectl('create', 'namespace', 'orphans');
  await kubectl('create', 'clusterrolebinding', 'olga-nodedisks-editor', '--clusterrole=nodedisks-editor', '--user=olga');
  const c = await adminClaims().create(claim('orphans', 'db', { nodeName: 'bind-a', reclaimPolicy: 'Retain' }), { fieldManager: 'test' });
  const bound = await claimWhere('orphans', 'db', 'Bound and Ready', readyAndBound);
  const diskName = bound.status!.diskName!;
  // While the claim is there: not for people to release, and the plugin says how.
  const refused = await plugin('olga', 'release', diskName);
  t.is(refused.code, 5, refused.stderr);
  t.regex(refused.stderr, new RegExp(`${diskName} is reserved for NodeDiskClaim orphans/db: release it by deleting the claim \\(kubectl delete ndc db -n orphans\\)`));
  t.is((await admin().get(diskName)).spec.desired?.state, 'Reserved');

  await adminClaims().delete('orphans', 'db');
  await gone('orphans', 'db');
  const released = await diskWhere(diskName, 'ClaimGone', (d) => cond(d.status?.conditions, 'Accepted')?.reason === 'ClaimGone');
  t.like(cond(released.status?.conditions, 'Accepted'), {
    status: 'True',
    message: `reserved for NodeDiskClaim orphans/db (UID ${c.metadata.uid}), which is gone: the reservation is Released and the disk keeps its data; a person with the NodeDisk editor role may release it (kubectl nodedisks release ${diskName})`,
  });
  // Still reserved, still Ready: Retain keeps the disk and its bytes.
  t.like(cond(released.status?.conditions, 'Ready'), { status: 'True' });
  const events = await eventually('a ClaimGone event', async () => {
    const list = await admin().rest.request<{ items: { reason: string; note: string; regarding: { name: string } }[] }>('GET', '/apis/events.k8s.io/v1/namespaces/default/events');
    const mine = list.items.filter((e) => e.reason === 'ClaimGone' && e.regarding.name === diskName);
    return mine.length ? mine : undefined;
  });
  t.regex(events[0]!.note, /which is gone: the reservation is Released/);
  // In kubectl nodedisks status: the disk's owner in words, and the summary's count.
  const described = await plugin('olga', 'status', diskName);
  t.regex(
    described.stdout,
    new RegExp(
      `Desired: +Reserved: reserved for NodeDiskClaim orphans/db \\(UID ${c.metadata.uid}\\), which is gone: Released, the disk keeps its data; kubectl nodedisks release ${diskName} wipes and frees it \\(--keep-data frees it with the data\\)`,
    ),
  );
  const summary = await plugin('olga', 'status');
  t.regex(summary.stdout, new RegExp(`\\n\\d+ reserved for a NodeDiskClaim that is gone \\(Released, data kept\\): [^;]*${diskName}`));
  // Counted, for the alert.
  const port = Number(/"httpPort":(\d+)/.exec(controller.logs())?.[1]);
  await eventually('the orphaned claim reservations gauge', async () =>
    /^nodedisks_controller_orphaned_claim_reservations [1-9]\d*$/m.test(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()),
  );
  // A claim of the same name again does not take it back, and the disk stays Released.
  await adminClaims().create(claim('orphans', 'db', { diskName }), { fieldManager: 'test' });
  await claimWhere('orphans', 'db', 'Pending', (x) => x.status?.phase === 'Pending');
  t.is(cond((await admin().get(diskName)).status?.conditions, 'Accepted')?.reason, 'ClaimGone');

  // Releasing it otherwise than to Available is refused, even now.
  const olga = new NodeDiskClient(as('olga'));
  const handOver = await denied(t, olga.mergePatch(diskName, { spec: { desired: { owner: 'olga', ownerUID: '' } } }, { fieldManager: FIELD_MANAGER.plugin }));
  t.regex(handOver.message, /is reserved for NodeDiskClaim orphans\/db, which is gone: it may only be released \(to Available, with no owner and no ownerUID\)/);
  const done = await plugin('olga', 'release', diskName);
  t.is(done.code, 0, done.stderr);
  t.regex(
    done.stdout,
    new RegExp(`nodedisk.localtest.example.com/${diskName} released \\(it was reserved for NodeDiskClaim orphans/db, which is gone\\); its node agent wipes it before it is free again`),
  );
  // Free again once wiped: the Pending claim that asks for it by name gets it (at once: the disk is read
  // after the bind, as the agent's report of the release's wipe request stays).
  const rebound = await claimWhere('orphans', 'db', 'Bound', (x) => x.status?.phase === 'Bound');
  t.is(rebound.status?.diskName, diskName);
  // The gone claim's data was wiped first (ADR 38): the release's wipe request, reported done by the agent.
  t.regex((await admin().get(diskName)).status?.node?.wipedFor ?? '', /^[0-9a-f-]{36}$/);
  await adminClaims().delete('orphans', 'db');
  await gone('orphans', 'db');
});

test.serial('a Bound claim whose node is gone, or is another machine now, is not Ready and says why: Stalled, a person must act', async (t) => {
  await kubectl('create', 'namespace', 'machines');
  const cp = controlPlane();
  /** The disk as its agent on the machine `nodeUID` reports it (one apply of the whole report: the agent's field manager owns it all). */
  const report = (name: string, phase: 'Available' | 'Reserved', nodeUID: string) =>
    admin().applyStatus(
      { apiVersion: API_VERSION, kind: KIND, metadata: { name }, status: { node: { phase, capacityBytes: 64 * MiB, lastSeenTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'), nodeUID } } },
      { fieldManager: FIELD_MANAGER.agent },
    );
  for (const node of ['bind-gone', 'bind-replaced']) {
    const { uid } = await cp.ensureNode(node);
    const name = await reportedNodeDisk(admin(), node, 'disk1');
    await report(name, 'Available', uid);
    await adminClaims().create(claim('machines', node, { diskName: name }), { fieldManager: 'test' });
    await claimWhere('machines', node, 'Bound', (c) => c.status?.phase === 'Bound');
    // As its agent reports the marker written.
    await report(name, 'Reserved', uid);
    await claimWhere('machines', node, 'Bound and Ready', readyAndBound);
  }
  await kubectl('delete', 'node', 'bind-gone');
  await kubectl('delete', 'node', 'bind-replaced');
  await cp.ensureNode('bind-replaced');

  const goneClaim = await claimWhere('machines', 'bind-gone', 'not Ready', (c) => cond(c.status?.conditions, 'Ready')?.reason === 'NodeGone');
  const why = 'node bind-gone is gone (no Node object): the disk went with its machine; its reservation stays until a person releases it';
  t.like(goneClaim.status, { phase: 'Bound', message: why });
  t.like(cond(goneClaim.status?.conditions, 'Ready'), { status: 'False', message: why });
  t.like(cond(goneClaim.status?.conditions, 'Stalled'), { status: 'True', reason: 'NodeGone' });

  const replaced = await claimWhere('machines', 'bind-replaced', 'not Ready', (c) => cond(c.status?.conditions, 'Ready')?.reason === 'NodeReplaced');
  t.like(cond(replaced.status?.conditions, 'Ready'), {
    status: 'False',
    message: 'node bind-replaced is another machine now (another Node UID): the disk was on the machine before, not on this one; its reservation stays until a person releases it',
  });
  t.like(cond(replaced.status?.conditions, 'Stalled'), { status: 'True', reason: 'NodeReplaced' });
});

test.serial('a reservation from before UIDs were recorded is adopted by the claim whose status names its disk, which records its UID, and by no claim created again under its name', async (t) => {
  const cp = controlPlane();
  await kubectl('create', 'namespace', 'legacy');
  await cp.ensureNode('bind-legacy');
  const [one, two] = [await reportedNodeDisk(admin(), 'bind-legacy', 'disk1', { seenNow: true }), await reportedNodeDisk(admin(), 'bind-legacy', 'disk2', { seenNow: true })];
  // As the controller before this change left them: reserved for a claim by name, no UID. The controller's
  // policy now refuses that write, so its binding is set aside for the moment, the controller stopped.
  await controller.stop();
  const kept = await adminClaims().create(claim('legacy', 'kept', { nodeName: 'bind-legacy' }), { fieldManager: 'test' });
  const policy = 'nodedisks-controller.localtest.example.com';
  await kubectl('delete', 'validatingadmissionpolicybinding', policy);
  const asController = nodeDisksFor(await cp.controller());
  for (const [name, owner] of [
    [one, 'claim:legacy/kept'],
    [two, 'claim:legacy/reborn'],
  ] as const) {
    await eventually(`${name} reserved for ${owner} with no UID`, async () =>
      asController
        .apply({ apiVersion: API_VERSION, kind: KIND, metadata: { name }, spec: { desired: { state: 'Reserved', owner } } }, { fieldManager: FIELD_MANAGER.controller, force: true })
        .then(
          () => true,
          () => false,
        ),
    );
  }
  await new NodeDiskClaimClient(asController.rest).applyStatus(
    { apiVersion: API_VERSION, kind: 'NodeDiskClaim', metadata: { name: 'kept', namespace: 'legacy' }, status: { phase: 'Bound', diskName: one, nodeName: 'bind-legacy' } },
    { fieldManager: FIELD_MANAGER.controller },
  );
  await kubectl('apply', '--server-side', '-f', join(REPO_ROOT, 'kustomize', 'policies', 'controller_policy.yaml'));
  await eventually('the controller policy in force again', async () =>
    asController
      .apply(
        { apiVersion: API_VERSION, kind: KIND, metadata: { name: one }, spec: { desired: { state: 'Reserved', owner: 'mallory' } } },
        {
          fieldManager: FIELD_MANAGER.controller,
          force: true,
          dryRun: true,
        },
      )
      .then(
        () => false,
        (err: Error) => err.message.includes(policy),
      ),
  );
  // `reborn` is created again under the name disk2's reservation carries: its status is empty.
  await adminClaims().create(claim('legacy', 'reborn', { nodeName: 'bind-legacy' }), { fieldManager: 'test' });
  controller = await startController(cp, { logDir: join(work, 'logs'), nodeLifecycle: true, identity: 'controller-1' });

  await diskWhere(one, 'adopted', (d) => d.spec.desired?.ownerUID === kept.metadata.uid);
  t.deepEqual((await admin().get(one)).spec.desired, { state: 'Reserved', owner: 'claim:legacy/kept', ownerUID: kept.metadata.uid });
  t.is((await claimWhere('legacy', 'kept', 'Bound', (c) => c.status?.phase === 'Bound')).status?.diskName, one);
  const pending = await claimWhere('legacy', 'reborn', 'Pending', (c) => c.status?.phase === 'Pending');
  t.is(pending.status?.message, 'no free disk on node bind-legacy');
  const released = await diskWhere(two, 'ClaimGone', (d) => cond(d.status?.conditions, 'Accepted')?.reason === 'ClaimGone');
  t.deepEqual(released.spec.desired, { state: 'Reserved', owner: 'claim:legacy/reborn' });
  t.regex(cond(released.status?.conditions, 'Accepted')?.message ?? '', /^reserved for NodeDiskClaim legacy\/reborn, which is gone: the reservation is Released/);
});
