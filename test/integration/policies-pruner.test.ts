// The nodedisks-pruner ClusterRole (kustomize/rbac/user_roles.yaml, ADR 35) against the real API server
// with its policies and the real controller: a person bound to it runs kubectl nodedisks prune and the
// gone node's unreserved disks go; the editor cannot; what else the pruner cannot do (create, status,
// claims, Nodes, Leases); and what holds a reserved disk against a pruner's plain delete (the agent's
// finalizer: Terminating, still reserved) and what does not (removing that finalizer first, which is what
// prune --reserved-by does, on purpose); and what holds a disk reserved for a claim against everyone but the
// controller (the claims policy refuses its delete, finalizer or not, to a pruner and an admin alike).
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { API_VERSION, FIELD_MANAGER, FINALIZER, KIND } from '../../api/constants.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { startController, type Program } from '../../hack/lib/programs.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { getOrGone as getOrGoneIn, type ReportedDisk, reportedNodeDisk } from '../harness/reported-disks.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const BIN = join(REPO_ROOT, 'dist', 'bin');
const GONE = 'pruner-gone';
let work = '';
let controller: Program | undefined;

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}
function kubectl(...args: string[]): Promise<Result> {
  return new Promise((resolve) => {
    execFile('kubectl', args, { env: { ...process.env, PATH: `${BIN}:${process.env.PATH}`, KUBECONFIG: controlPlane().admin().kubeconfig }, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}
const admin = () => nodeDisksFor(controlPlane().admin());
const getOrGone = (name: string) => getOrGoneIn(admin(), name);
const q = (name: string) => `nodedisk.localtest.example.com/${name}`;

test.serial.before(async () => {
  if (!existsSync(join(BIN, 'kubectl-nodedisks'))) throw new Error('run npm run build first (npm test does)');
  work = await mkdtemp(join(tmpdir(), 'nodedisks-pruner-'));
  const cp = controlPlane();
  for (const [user, role] of [
    ['pat', 'nodedisks-pruner'],
    ['eddie', 'nodedisks-editor'],
  ] as const) {
    await cp.kubectl(cp.admin(), ['create', 'clusterrolebinding', `${user}-${role}`, `--clusterrole=${role}`, `--user=${user}`]);
  }
  // A long grace: what goes, the pruner removes, not the controller.
  controller = await startController(cp, { logDir: join(work, 'logs'), nodeLifecycle: true, extraArgs: ['--node-gone-grace=1h'] });
});
test.afterEach.always((t) => {
  if (!t.passed && controller) console.error(`----- ${controller.name} -----\n${controller.logs(4000)}`);
});
test.after.always(async () => {
  await controller?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

test.serial('a pruner prunes the disks of a gone node; an editor cannot; a reserved disk is held by its finalizer until the pruner names its owner', async (t) => {
  const make = (disk: string, o: ReportedDisk = {}) => reportedNodeDisk(admin(), GONE, disk, o);
  // No Node of that name: the controller judges the node gone.
  const free = await make('disk1');
  const guarded = await make('disk2', { finalizers: [FINALIZER] });
  const held = await make('disk3', { desired: { state: 'Reserved', owner: 'team-db' }, finalizers: [FINALIZER] });
  const all = [free, guarded, held];
  // The controller starts in the before hook; on a loaded machine that can take a while.
  await eventually(
    'NodeGone',
    async () => (await Promise.all(all.map((n) => admin().get(n)))).every((n) => n.status?.conditions?.find((c) => c.type === 'Ready')?.reason === 'NodeGone'),
    90_000,
    200,
  );

  // The editor may patch but not delete: prune fails at the first delete, naming the role to ask for,
  // and before it removed the finalizer of a disk it could then not delete.
  const editor = await kubectl('nodedisks', 'prune', '--dry-run=none', '--field-selector', `metadata.name=${guarded}`, '--as', 'eddie');
  t.is(editor.code, 4, editor.stderr);
  t.regex(editor.stderr, /User "eddie" cannot delete resource "nodedisks"[\s\S]*nodedisks-pruner \(prune\)/);
  t.deepEqual((await admin().get(guarded)).metadata.finalizers, [FINALIZER], 'the finalizer is still there');
  t.is((await Promise.all(all.map(getOrGone))).filter(Boolean).length, 3);

  const pruned = await kubectl('nodedisks', 'prune', '--dry-run=none', '--as', 'pat');
  t.is(pruned.code, 0, pruned.stderr);
  t.is(pruned.stdout, `${q(free)} deleted\n${q(guarded)} deleted\n`);
  t.regex(pruned.stderr, /kept: node pruner-gone is gone, but it is reserved by team-db \(add --reserved-by=team-db to remove it\)/);
  await eventually('the unreserved ones gone', async () => (await getOrGone(free)) === undefined && (await getOrGone(guarded)) === undefined);

  // A plain delete of the reserved one: the agent's finalizer holds it, Terminating and still reserved.
  const del = await kubectl('delete', 'nodedisk', held, '--wait=false', '--as', 'pat');
  t.is(del.code, 0, del.stderr);
  const terminating = await admin().get(held);
  t.truthy(terminating.metadata.deletionTimestamp);
  t.deepEqual(terminating.spec.desired, { state: 'Reserved', owner: 'team-db' });
  t.deepEqual(terminating.metadata.finalizers, [FINALIZER]);
  // Naming its owner, the pruner removes the finalizer and it goes: the role allows it, the flag is the choice.
  const dropped = await kubectl('nodedisks', 'prune', '--dry-run=none', '--reserved-by', 'team-db', '--as', 'pat');
  t.is(dropped.code, 0, dropped.stderr);
  await eventually('the reserved one gone', async () => (await getOrGone(held)) === undefined);
});

test.serial('a pruner cannot create NodeDisks, write their status, touch claims, Nodes or Leases, nor delete a collection', async (t) => {
  const cp = controlPlane();
  const name = (await admin().create(newNodeDisk('pruner-live', 'disk1'), { fieldManager: FIELD_MANAGER.agent })).metadata.name ?? '';
  await cp.ensureNode('pruner-live');
  const cannot: [string[], RegExp][] = [
    [['create', '-f', '-'], /cannot create resource "nodedisks"/],
    [['patch', 'nodedisk', name, '--subresource=status', '--type=merge', '-p', '{"status":{"node":{"phase":"Missing"}}}'], /cannot patch resource "nodedisks\/status"/],
    [['delete', 'nodediskclaims', '--all', '-n', 'default'], /cannot list resource "nodediskclaims"/],
    [['delete', 'node', 'pruner-live'], /cannot delete resource "nodes"/],
    [['get', 'leases', '-n', 'node-disks-system'], /cannot list resource "leases"/],
    [['delete', '--raw', '/apis/localtest.example.com/v1alpha1/nodedisks'], /forbidden|Forbidden/],
  ];
  for (const [args, err] of cannot) {
    const r = await new Promise<Result>((resolve) => {
      const child = execFile('kubectl', [...args, '--as', 'pat'], { env: { ...process.env, KUBECONFIG: cp.admin().kubeconfig }, timeout: 60_000 }, (e, stdout, stderr) =>
        resolve({ code: e ? (typeof e.code === 'number' ? e.code : -1) : 0, stdout, stderr }),
      );
      child.stdin?.end(JSON.stringify(newNodeDisk('pruner-live', 'disk9')));
    });
    t.not(r.code, 0, args.join(' '));
    t.regex(r.stderr, err, args.join(' '));
  }
  t.truthy(await getOrGone(name), 'the live disk is untouched');
});

test.serial(
  "a disk reserved for a claim is deleted by nobody but the controller's release: not by a pruner, even after stripping its finalizer, nor by prune --reserved-by, nor by an admin",
  async (t) => {
    const cp = controlPlane();
    // No Node of that name: the controller judges the node gone, which is when a pruner looks at its disks.
    const name = await reportedNodeDisk(admin(), 'pruner-claimed', 'disk1', { finalizers: [FINALIZER] });
    const forClaim = { state: 'Reserved', owner: 'claim:team-a/db', ownerUID: 'claim-uid' } as const;
    // Only the controller reserves for a claim (the claims policy); its token does so here, as the binder would.
    await nodeDisksFor(await cp.controller()).apply(
      { apiVersion: API_VERSION, kind: KIND, metadata: { name }, spec: { desired: forClaim } },
      { fieldManager: FIELD_MANAGER.controller, force: true },
    );
    await eventually('NodeGone', async () => (await admin().get(name)).status?.conditions?.find((c) => c.type === 'Ready')?.reason === 'NodeGone', 90_000, 200);
    const refused =
      /ValidatingAdmissionPolicy 'nodedisks-claims\.localtest\.example\.com'[\s\S]*NodeDisk node-disk-pruner-claimed-disk1 is reserved for NodeDiskClaim team-a\/db: a disk is not deleted while a claim holds it/;

    // prune asks whether the delete is allowed before it removes the finalizer: refused, nothing changed.
    const pruned = await kubectl('nodedisks', 'prune', '--dry-run=none', '--reserved-by', 'claim:team-a/db', '--as', 'pat');
    t.not(pruned.code, 0, pruned.stdout);
    t.regex(pruned.stderr, refused);
    t.deepEqual((await admin().get(name)).metadata.finalizers, [FINALIZER]);

    // By hand: the finalizer can go (the role allows patch), the NodeDisk cannot.
    const stripped = await kubectl('patch', q(name), '--type=json', '-p', '[{"op":"remove","path":"/metadata/finalizers/0"}]', '--as', 'pat');
    t.is(stripped.code, 0, stripped.stderr);
    const byPruner = await kubectl('delete', q(name), '--wait=false', '--as', 'pat');
    t.not(byPruner.code, 0);
    t.regex(byPruner.stderr, refused);
    const byAdmin = await kubectl('delete', q(name), '--wait=false');
    t.not(byAdmin.code, 0);
    t.regex(byAdmin.stderr, refused);
    const byCollection = await kubectl('delete', '--raw', `/apis/localtest.example.com/v1alpha1/nodedisks?fieldSelector=metadata.name%3D${name}`);
    t.not(byCollection.code, 0);
    t.regex(byCollection.stderr, /nodedisks-claims\.localtest\.example\.com/);

    const kept = await admin().get(name);
    t.is(kept.metadata.deletionTimestamp, undefined, 'not even Terminating: a finalizer-less delete would have removed it at once');
    t.deepEqual(kept.spec.desired, forClaim);
  },
);
