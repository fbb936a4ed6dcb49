// `kubectl nodedisks gitops claim|unclaim|cordon|uncordon` end to end: the overlay the bundled plugin
// writes is built by the real kubectl kustomize and applied server-side to the real API server as Argo CD
// and Flux apply it (their field managers, with force as both take fields over), and the real controller
// and agent act on it: the claim binds and, pruned, releases its disk; cordon from git takes disks out of
// what claims get and round-trips with kubectl nodedisks cordon/uncordon.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { loadAll } from 'js-yaml';
import { NodeDiskClaimClient } from '../../api/claim-client.ts';
import { LABEL_CORDONED } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { seedDisks, startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { execResult, type ExecResult } from '../harness/exec.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const BIN = join(REPO_ROOT, 'dist', 'bin');
const NODE = 'gclaim-n1';
const NS = 'gclaim-a';
const MiB = 2 ** 20;
const [disk1, disk2] = ['disk1', 'disk2'].map((d) => nodeDiskName(NODE, d)) as [string, string];
let work = '';
const programs: Program[] = [];

const kubectl = (args: string[]): Promise<ExecResult> => execResult('kubectl', args, { env: { PATH: `${BIN}:${process.env.PATH}`, KUBECONFIG: controlPlane().admin().kubeconfig } });
const nd = (...args: string[]) => kubectl(['nodedisks', ...args]);
const disks = () => nodeDisksFor(controlPlane().admin());
const claims = () => new NodeDiskClaimClient(disks().rest);
/** What Argo CD (ServerSideApply=true) and Flux do with the overlay: a server-side apply that takes the fields over. */
const sync = (dir: string, manager = 'argocd-controller') => kubectl(['apply', '--server-side', '--force-conflicts', `--field-manager=${manager}`, '-k', dir]);

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-gclaim-'));
  programs.push(await startController(controlPlane(), { logDir: join(work, 'logs') }));
  await seedDisks(join(work, NODE), 2, 64 * MiB);
  programs.push(await startAgent(controlPlane(), { node: NODE, diskDir: join(work, NODE), logDir: join(work, 'logs'), rescanInterval: '1s' }));
  await eventually('2 Available disks', async () => (await disks().list({ fieldSelector: `spec.nodeName=${NODE}` })).items.filter((d) => d.status?.node?.phase === 'Available').length === 2);
  await controlPlane().kubectl(controlPlane().admin(), ['create', 'namespace', NS]);
});
test.afterEach.always((t) => {
  if (!t.passed) for (const p of programs) console.error(`----- ${p.name} -----\n${p.logs(4000)}`);
});
test.after.always(async () => {
  await Promise.all(programs.map((p) => p.stop()));
  if (work) await rm(work, { recursive: true, force: true });
});

test.serial('a claim written by gitops builds, syncs and binds; unclaimed and pruned, its disk is released', async (t) => {
  const dir = join(work, 'team-a');
  const w = await nd('gitops', 'claim', 'db', '-n', NS, '--node', NODE, '--min-capacity', '32Mi', '-l', `localtest.example.com/node=${NODE}`, '--dir', dir);
  t.is(w.code, 0, w.stderr);
  t.is(w.stdout, `${join(dir, `nodediskclaim.${NS}.db.yaml`)}\n`);

  const built = await kubectl(['kustomize', dir]);
  t.is(built.code, 0, built.stderr);
  const objects = loadAll(built.stdout) as { kind: string; metadata: { name: string; namespace: string } }[];
  t.deepEqual(
    objects.map((o) => `${o.kind} ${o.metadata.namespace}/${o.metadata.name}`),
    [`NodeDiskClaim ${NS}/db`],
  );
  const applied = await sync(dir);
  t.is(applied.code, 0, applied.stderr);
  t.is(applied.stdout, 'nodediskclaim.localtest.example.com/db serverside-applied\n');

  const bound = await eventually(
    'the claim Bound',
    async () => {
      const c = await claims().get(NS, 'db');
      return c.status?.phase === 'Bound' ? c : undefined;
    },
    30_000,
  );
  t.is(bound.status?.nodeName, NODE);
  const disk = await disks().get(bound.status?.diskName ?? '');
  t.deepEqual(disk.spec.desired, { state: 'Reserved', owner: `claim:${NS}/db`, ownerUID: bound.metadata.uid });
  // Synced again, nothing changes: the file is the whole claim and the controller writes only status.
  t.is((await sync(dir)).stdout, 'nodediskclaim.localtest.example.com/db serverside-applied\n');
  t.is((await claims().get(NS, 'db')).metadata.generation, bound.metadata.generation);

  const u = await nd('gitops', 'unclaim', 'db', '-n', NS, '--dir', dir);
  t.is(u.code, 0, u.stderr);
  t.is(readFileSync(join(dir, 'kustomization.yaml'), 'utf8'), 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n');
  t.is((await kubectl(['kustomize', dir])).stdout, '', 'the overlay no longer holds the claim');
  // What a pruning sync does with an object that left the overlay.
  t.is((await kubectl(['delete', 'nodediskclaim', 'db', '-n', NS, '--wait=true'])).code, 0);
  await eventually('the disk released', async () => (await disks().get(disk.metadata.name ?? '')).spec.desired?.state === 'Available', 30_000);
  t.pass();
});

test.serial('cordon from git takes a node\'s disks out of what claims get; "false" from git uncordons over a person\'s cordon, an absent label would not', async (t) => {
  const dir = join(work, 'cordon');
  const c = await nd('gitops', 'cordon', '--node', NODE, '--dir', dir);
  t.is(c.code, 0, c.stderr);
  t.is(c.stdout, `${join(dir, `${disk1}.yaml`)}\n${join(dir, `${disk2}.yaml`)}\n`);
  const built = await kubectl(['kustomize', dir]);
  t.is(built.code, 0, built.stderr);
  t.regex(built.stdout, /localtest\.example\.com\/cordoned: "true"/);
  const applied = await sync(dir, 'kustomize-controller');
  t.is(applied.code, 0, applied.stderr);
  for (const d of [disk1, disk2]) t.is((await disks().get(d)).metadata.labels?.[LABEL_CORDONED], 'true', d);
  // kubectl nodedisks reads it as its own cordon.
  t.is((await nd('cordon', disk1)).stdout, `nodedisk.localtest.example.com/${disk1} already cordoned\n`);

  // A claim for the node finds nothing to bind while its disks are cordoned.
  t.is((await nd('claim', 'waits', '-n', NS, '--node', NODE)).code, 0);
  const pending = await eventually(
    'the claim says why it is Pending',
    async () => {
      const cl = await claims().get(NS, 'waits');
      return cl.status?.phase === 'Pending' && cl.status.message ? cl : undefined;
    },
    30_000,
  );
  t.is(pending.status?.message, `no free disk on node ${NODE}`);
  // Why, disk by disk, for someone who may read NodeDisks.
  t.regex((await nd('status', 'claim/waits', '-n', NS)).stdout, /^ {2}Disks: +0\/\d+ disks fit: .*\b2 cordoned\b/m);

  // A person uncordons one disk by hand and cordons it again: the label is now theirs as much as git's.
  t.is((await nd('uncordon', disk1)).code, 0);
  t.is((await nd('cordon', disk1)).code, 0);
  // An overlay that merely drops the label changes nothing in the cluster: server-side apply removes a
  // field only when no other manager holds it.
  const dropped = join(work, 'dropped');
  mkdirSync(dropped);
  writeFileSync(join(dropped, 'kustomization.yaml'), `resources:\n  - ${disk1}.yaml\n`);
  writeFileSync(join(dropped, `${disk1}.yaml`), readFileSync(join(dir, `${disk1}.yaml`), 'utf8').replace(`  labels:\n    ${LABEL_CORDONED}: "true"\n`, ''));
  t.notRegex(readFileSync(join(dropped, `${disk1}.yaml`), 'utf8'), /cordoned/);
  const droppedSync = await sync(dropped, 'kustomize-controller');
  t.is(droppedSync.code, 0, droppedSync.stderr);
  t.is((await disks().get(disk1)).metadata.labels?.[LABEL_CORDONED], 'true', 'still cordoned');
  // gitops uncordon writes "false", which the apply sets whoever held the label.
  const u = await nd('gitops', 'uncordon', '--node', NODE, '--dir', dir);
  t.is(u.code, 0, u.stderr);
  t.is((await sync(dir)).code, 0);
  for (const d of [disk1, disk2]) t.is((await disks().get(d)).metadata.labels?.[LABEL_CORDONED], 'false', d);
  // "false" is not cordoned for anything that reads the mark: the claim binds, kubectl nodedisks cordon acts.
  await eventually('the waiting claim Bound once uncordoned', async () => (await claims().get(NS, 'waits')).status?.phase === 'Bound', 30_000);
  t.is((await nd('cordon', disk2, '--dry-run=server')).stdout, `nodedisk.localtest.example.com/${disk2} cordoned (server dry run)\n`);
  t.is((await kubectl(['delete', 'nodediskclaim', 'waits', '-n', NS, '--wait=true'])).code, 0);
});
