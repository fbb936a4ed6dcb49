// A disk changes hands without the previous owner's bytes (ADR 38): the real control plane with the
// install's CRDs and admission policies, the real controller and an agent as processes, disk images on disk
// with a secret written into them, and the plugin as kubectl runs it. The tests run one after the other,
// each on disks of its own.
import { mkdtemp, open, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { NodeDiskClaimClient } from '../../api/claim-client.ts';
import { API_VERSION, FIELD_MANAGER, KIND } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDiskClaim, NodeDiskClaimSpec } from '../../api/v1alpha1/claim-types.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { newClaim } from '../../hack/lib/nodedisks.ts';
import { seedDisks, startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { claimGone } from '../harness/claims.ts';
import { execResult, type ExecResult } from '../harness/exec.ts';
import { denied, nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const NODE = 'wipe-n1';
const MiB = 2 ** 20;
const SECRET = 'the previous team wrote this';
const BIN = join(REPO_ROOT, 'dist', 'bin');
let work = '';
let controller: Program;
let agent: Program;
const diskDir = () => join(work, NODE);
const admin = () => nodeDisksFor(controlPlane().admin());
const claims = () => new NodeDiskClaimClient(admin().rest);
const disk = (id: string) => nodeDiskName(NODE, id);
const image = (id: string) => join(diskDir(), `${id}.img`);
const plugin = (...args: string[]): Promise<ExecResult> =>
  execResult('kubectl', ['nodedisks', ...args], { env: { PATH: `${BIN}:${process.env.PATH}`, KUBECONFIG: controlPlane().admin().kubeconfig } });

const startTheAgent = async () => await startAgent(controlPlane(), { node: NODE, diskDir: diskDir(), logDir: join(work, 'logs'), rescanInterval: '1s' });

/** What a pod of the owner would do: write into the disk image, durably. */
async function writeSecret(id: string): Promise<void> {
  const fh = await open(image(id), 'r+');
  await fh.write(Buffer.from(SECRET), 0, SECRET.length, 5 * MiB + 3);
  await fh.sync();
  await fh.close();
}

async function holdsSecret(id: string): Promise<boolean> {
  return (await readFile(image(id))).includes(SECRET);
}

async function allZero(id: string): Promise<boolean> {
  return (await readFile(image(id))).every((b) => b === 0);
}

async function claimWhere(ns: string, name: string, what: string, ok: (c: NodeDiskClaim) => boolean): Promise<NodeDiskClaim> {
  return await eventually(`claim ${ns}/${name} ${what}`, async () => {
    const c = await claims().get(ns, name);
    return ok(c) ? c : undefined;
  });
}

async function diskWhere(id: string, what: string, ok: (nd: NodeDisk) => boolean, timeoutMs?: number): Promise<NodeDisk> {
  return await eventually(
    `NodeDisk ${disk(id)} ${what}`,
    async () => {
      const nd = await admin().get(disk(id));
      return ok(nd) ? nd : undefined;
    },
    timeoutMs,
  );
}

async function namespace(name: string): Promise<void> {
  await controlPlane().kubectl(controlPlane().admin(), ['create', 'namespace', name]);
}

async function claim(ns: string, name: string, spec: NodeDiskClaimSpec): Promise<NodeDiskClaim> {
  return await claims().create(newClaim(ns, name, spec), { fieldManager: 'test' });
}

const bound = (c: NodeDiskClaim) => c.status?.phase === 'Bound';
const readyCondition = (nd: NodeDisk) => nd.status?.conditions?.find((c) => c.type === 'Ready');

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-wipe-'));
  controller = await startController(controlPlane(), { logDir: join(work, 'logs') });
  await seedDisks(diskDir(), 6, 64 * MiB);
  agent = await startTheAgent();
  await eventually('6 Available disks', async () => (await admin().list()).items.filter((d) => d.status?.node?.phase === 'Available').length === 6);
  for (const ns of ['team-x', 'team-y']) await namespace(ns);
});

test.afterEach.always((t) => {
  if (!t.passed) for (const p of [controller, agent]) console.error(`----- ${p.name} -----\n${p.logs(6000)}`);
});

test.after.always(async () => {
  await Promise.all([controller, agent].map((p) => p?.stop()));
  if (work) await rm(work, { recursive: true, force: true });
});

test.serial("a claim deleted with reclaimPolicy Delete: its disk is wiped before another team's claim gets it", async (t) => {
  const x = await claim('team-x', 'db', { diskName: disk('disk1') });
  await claimWhere('team-x', 'db', 'Bound', bound);
  await writeSecret('disk1');
  // team-y waits for exactly that disk: it binds the moment the disk is free, so the wipe must come first.
  await claim('team-y', 'db', { diskName: disk('disk1') });
  await claimWhere('team-y', 'db', 'Pending', (c) => c.status?.phase === 'Pending');

  await claims().delete('team-x', 'db');
  await claimWhere('team-y', 'db', 'Bound to the disk', (c) => bound(c) && c.status?.diskName === disk('disk1'));
  t.false(await holdsSecret('disk1'), "team-y's disk still holds team-x's bytes");
  t.true(await allZero('disk1'));
  const nd = await admin().get(disk('disk1'));
  // The agent reported the wipe of that claim's release before the disk was handed out again.
  t.is(nd.status?.node?.wipedFor, `claim-${x.metadata.uid}`);
  t.is(nd.status?.node?.capacityBytes, 64 * MiB);
  await diskWhere('disk1', 'holding team-y data', (d) => d.status?.node?.holdsData === true && d.status.node.phase === 'Reserved');
});

test.serial('a wipe the agent could not do while it was down is done when it comes back, and nobody gets the disk meanwhile', async (t) => {
  await claim('team-x', 'cache', { diskName: disk('disk2') });
  await claimWhere('team-x', 'cache', 'Bound', bound);
  await writeSecret('disk2');
  await agent.stop();
  try {
    await claims().delete('team-x', 'cache');
    const released = await diskWhere('disk2', 'released with a wipe request', (d) => d.spec.desired?.state === 'Available' && d.spec.desired.wipe !== undefined);
    const token = released.spec.desired?.wipe ?? '';
    const waiting = await diskWhere('disk2', 'Ready False Wiping', (d) => readyCondition(d)?.reason === 'Wiping');
    t.regex(readyCondition(waiting)?.message ?? '', /released with a wipe request .*: waiting for the node agent on wipe-n1 to wipe it/);
    await claim('team-y', 'cache', { diskName: disk('disk2') });
    await claimWhere('team-y', 'cache', 'Pending', (c) => c.status?.phase === 'Pending');

    // The API server holds everyone to it, cluster admins included: no reservation, no withdrawing the request.
    const reserve = await denied(
      t,
      admin().apply(
        { apiVersion: API_VERSION, kind: KIND, metadata: { name: disk('disk2') }, spec: { desired: { state: 'Reserved', owner: 'alice' } } },
        { fieldManager: FIELD_MANAGER.plugin, force: true },
      ),
    );
    t.regex(reserve.message, new RegExp(`is being wiped \\(wipe request ${token}\\): it cannot be reserved until its node agent reports the wipe done`));
    const withdraw = await denied(t, admin().jsonPatch(disk('disk2'), [{ op: 'replace', path: '/spec/desired', value: { state: 'Available' } }], { fieldManager: 'test' }));
    t.regex(withdraw.message, /the request cannot be withdrawn before its node agent reports it done/);
    const label = await plugin('reserve', disk('disk2'));
    t.is(label.code, 0, label.stderr);
    const refused = await diskWhere(
      'disk2',
      'not reserved by the label while it is being wiped',
      (d) => d.status?.conditions?.some((c) => c.type === 'Accepted' && c.reason === 'Wiping') === true,
    );
    t.is(refused.spec.desired?.state, 'Available');
    t.true(await holdsSecret('disk2'));
    const unlabel = await plugin('release', disk('disk2'));
    t.is(unlabel.code, 0, unlabel.stderr);
  } finally {
    agent = await startTheAgent();
  }
  await claimWhere('team-y', 'cache', 'Bound after the wipe', (c) => bound(c) && c.status?.diskName === disk('disk2'));
  t.false(await holdsSecret('disk2'));
  t.true(await allZero('disk2'));
});

test.serial('Retain keeps the bytes and the reservation', async (t) => {
  await claim('team-x', 'keep', { diskName: disk('disk3'), reclaimPolicy: 'Retain' });
  await claimWhere('team-x', 'keep', 'Bound', bound);
  await writeSecret('disk3');
  await claims().delete('team-x', 'keep');
  await claimGone(claims(), 'team-x', 'keep');
  const nd = await admin().get(disk('disk3'));
  t.is(nd.spec.desired?.state, 'Reserved');
  t.is(nd.spec.desired?.wipe, undefined);
  t.true(await holdsSecret('disk3'));
});

test.serial('release keeps the bytes and status says so; release --wipe wipes, for a manual and a label reservation', async (t) => {
  // A manual reservation released as the seed does: the bytes stay, and the disk says it holds them.
  t.is((await plugin('reserve', disk('disk4'), '--owner', 'alice')).code, 0);
  await diskWhere('disk4', 'Reserved on the node', (d) => d.status?.node?.phase === 'Reserved');
  await writeSecret('disk4');
  t.is((await plugin('release', disk('disk4'), '--owner', 'alice')).code, 0);
  await diskWhere('disk4', 'Available, holding data', (d) => d.status?.node?.phase === 'Available' && d.status.node.holdsData === true);
  t.true(await holdsSecret('disk4'));
  const status = await plugin('status', disk('disk4'));
  t.regex(
    status.stdout,
    new RegExp(`Data: +holds the data of an earlier reservation \\(not wiped since\\): the next owner gets it as it is; kubectl nodedisks release ${disk('disk4')} --wipe wipes it first`),
  );

  // The free disk wiped on request: not free until it is, then clean.
  const wipe = await plugin('release', disk('disk4'), '--wipe');
  t.is(wipe.code, 0, wipe.stderr);
  t.regex(wipe.stdout, /to be wiped: its node agent wipes it before it is free again/);
  await diskWhere('disk4', 'wiped', (d) => d.status?.node?.wipedFor === d.spec.desired?.wipe && d.status?.node?.holdsData === undefined && d.status?.node?.phase === 'Available');
  t.true(await allZero('disk4'));
  t.notRegex((await plugin('status', disk('disk4'))).stdout, /Data:/);

  // A manual reservation released with --wipe.
  t.is((await plugin('reserve', disk('disk5'), '--owner', 'bob')).code, 0);
  await diskWhere('disk5', 'Reserved on the node', (d) => d.status?.node?.phase === 'Reserved');
  await writeSecret('disk5');
  const manual = await plugin('release', disk('disk5'), '--owner', 'bob', '--wipe');
  t.is(manual.code, 0, manual.stderr);
  t.regex(manual.stdout, /released; its node agent wipes it before it is free again/);
  await diskWhere('disk5', 'wiped and Available', (d) => d.status?.node?.phase === 'Available' && d.status.node.wipedFor === d.spec.desired?.wipe);
  t.true(await allZero('disk5'));

  // A label reservation: the controller releases it, asked by the annotation to wipe.
  t.is((await plugin('reserve', disk('disk6'))).code, 0);
  await diskWhere('disk6', 'Reserved on the node', (d) => d.status?.node?.phase === 'Reserved');
  await writeSecret('disk6');
  const label = await plugin('release', disk('disk6'), '--wipe');
  t.is(label.code, 0, label.stderr);
  const wiped = await diskWhere(
    'disk6',
    'wiped and Available',
    (d) => d.status?.node?.phase === 'Available' && d.spec.desired?.wipe !== undefined && d.status.node.wipedFor === d.spec.desired.wipe,
  );
  t.regex(wiped.spec.desired?.wipe ?? '', /^auto-\d+$/);
  t.true(await allZero('disk6'));
});
