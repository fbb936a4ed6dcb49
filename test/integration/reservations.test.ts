// A reservation is never lost by deleting its NodeDisk (ADR 12): the real agent and
// controller against a real API server, with the admission policies installed. A reserved NodeDisk's
// deletion is held by the agent's finalizer until the reservation is released; a marker found on the node
// with no NodeDisk (finalizer removed by hand, CRD deleted and reinstalled) comes back as a reservation.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { FINALIZER, RECOVERED_OWNER } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { seedDisks, startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const NODE = 'node-keep';
const MiB = 1024 * 1024;
let work = '';
let agent: Program;
let controller: Program;
const diskDir = () => join(work, NODE, 'disks');
const client = () => nodeDisksFor(controlPlane().admin());
const nameOf = (disk: string) => nodeDiskName(NODE, disk);
const get = (disk: string) => client().get(nameOf(disk));
const kubectl = (...args: string[]) => controlPlane().kubectl(controlPlane().admin(), args);
const marker = (disk: string) => join(diskDir(), `${disk}.img.reserved`);

async function until(disk: string, what: string, check: (nd: NodeDisk) => boolean, timeoutMs = 30_000): Promise<NodeDisk> {
  return await eventually(
    `${disk}: ${what}`,
    async () => {
      const nd = await get(disk);
      return check(nd) ? nd : undefined;
    },
    timeoutMs,
  );
}

function plugin(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...process.env, PATH: `${join(REPO_ROOT, 'dist', 'bin')}:${process.env.PATH}`, KUBECONFIG: controlPlane().admin().kubeconfig };
  return new Promise((resolve) => {
    execFile('kubectl', ['nodedisks', ...args], { env }, (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }));
  });
}

/** Proves a full rescan ran after this point: a new disk file is discovered (the scan also revisits every other disk). */
let extra = 10;
async function nextRescan(): Promise<void> {
  extra += 1;
  await seedDisks(diskDir(), extra, MiB);
  await until(`disk${extra}`, 'discovered', (nd) => nd.status?.node?.phase === 'Available');
}

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-keep-'));
  await seedDisks(diskDir(), 6, MiB);
  controller = await startController(controlPlane(), { logDir: join(work, 'logs') });
  agent = await startAgent(controlPlane(), { node: NODE, diskDir: diskDir(), logDir: join(work, 'logs'), rescanInterval: '1s' });
  for (const d of [1, 2, 3, 4, 5, 6]) await until(`disk${d}`, 'Available', (nd) => nd.status?.node?.phase === 'Available');
});

test.afterEach.always((t) => {
  if (!t.passed) for (const p of [controller, agent]) console.error(`----- ${p.name} -----\n${p.logs(8000)}`);
});

test.after.always(async () => {
  await Promise.all([controller, agent].map((p) => p?.stop()));
  await rm(work, { recursive: true, force: true });
});

const reservedAndHeld = (owner: string) => (nd: NodeDisk) =>
  nd.metadata.deletionTimestamp !== undefined &&
  nd.spec.desired?.state === 'Reserved' &&
  nd.spec.desired.owner === owner &&
  nd.status?.node?.phase === 'Reserved' &&
  /deletion is held/.test(nd.status.node.message ?? '');

test.serial('an Available NodeDisk carries no finalizer; a reserved one carries the agent finalizer', async (t) => {
  t.deepEqual((await get('disk6')).metadata.finalizers, undefined, 'deleting an unreserved NodeDisk is not held');
  await kubectl('patch', 'nodedisk', nameOf('disk6'), '--type=merge', '-p', '{"spec":{"desired":{"state":"Reserved","owner":"team-x"}}}');
  const nd = await until('disk6', 'Reserved', (x) => x.status?.node?.phase === 'Reserved');
  t.deepEqual(nd.metadata.finalizers, [FINALIZER]);
  t.true(existsSync(marker('disk6')));
  // Released: the marker goes first, then the finalizer.
  await kubectl('patch', 'nodedisk', nameOf('disk6'), '--type=merge', '-p', '{"spec":{"desired":{"state":"Available","owner":null}}}');
  const free = await until('disk6', 'Available without finalizer', (x) => x.status?.node?.phase === 'Available' && x.metadata.finalizers === undefined);
  t.false(existsSync(marker('disk6')));
  t.is(free.metadata.deletionTimestamp, undefined);
});

for (const [what, disk, reserve, release, owner] of [
  [
    'a manual reservation (owner team-db)',
    'disk1',
    () => kubectl('patch', 'nodedisk', nameOf('disk1'), '--type=merge', '-p', '{"spec":{"desired":{"state":"Reserved","owner":"team-db"}}}'),
    () => kubectl('patch', 'nodedisk', nameOf('disk1'), '--type=merge', '-p', '{"spec":{"desired":{"state":"Available","owner":null}}}'),
    'team-db',
  ],
  [
    'an auto reservation (label)',
    'disk2',
    () => kubectl('label', 'nodedisk', nameOf('disk2'), 'localtest.example.com/auto-reserve=true'),
    () => kubectl('label', 'nodedisk', nameOf('disk2'), 'localtest.example.com/auto-reserve-'),
    'auto',
  ],
] as const) {
  test.serial(`deleting ${what} is held: after rescans the marker is there and the cluster shows it reserved; the release lets it go`, async (t) => {
    await reserve();
    const before = await until(disk, 'Reserved', (nd) => nd.status?.node?.phase === 'Reserved' && nd.spec.desired?.owner === owner);
    await kubectl('delete', 'nodedisk', nameOf(disk), '--wait=false');
    const held = await until(disk, 'deletion held while reserved', reservedAndHeld(owner));
    t.is(held.metadata.uid, before.metadata.uid, 'the same object, not a re-creation');
    await nextRescan();
    await nextRescan();
    t.is(readFileSync(marker(disk), 'utf8'), 'reserved\n', 'the marker is still on the node');
    const after = await get(disk);
    t.true(reservedAndHeld(owner)(after), JSON.stringify({ desired: after.spec.desired, node: after.status?.node }));
    t.deepEqual(after.metadata.finalizers, [FINALIZER]);
    t.regex(await kubectl('get', 'nodedisk', nameOf(disk), '-o', 'jsonpath={.spec.desired.state} {.spec.desired.owner} {.status.node.phase}'), new RegExp(`^Reserved ${owner} Reserved$`));

    // The release finishes the deletion: marker removed, finalizer removed, object gone, rediscovered Available.
    await release();
    const fresh = await until(disk, 'rediscovered as a new Available NodeDisk', (nd) => nd.metadata.uid !== before.metadata.uid && nd.status?.node?.phase === 'Available');
    t.false(existsSync(marker(disk)));
    t.deepEqual(fresh.spec.desired, { state: 'Available' });
    t.is(fresh.metadata.finalizers, undefined);
  });
}

test.serial('a marker with no NodeDisk (finalizer removed by hand) comes back as a reservation, never silently removed', async (t) => {
  await kubectl('patch', 'nodedisk', nameOf('disk3'), '--type=merge', '-p', '{"spec":{"desired":{"state":"Reserved","owner":"team-db"}}}');
  const before = await until('disk3', 'Reserved', (nd) => nd.status?.node?.phase === 'Reserved');
  await kubectl('delete', 'nodedisk', nameOf('disk3'), '--wait=false');
  await until('disk3', 'deletion held', (nd) => nd.metadata.deletionTimestamp !== undefined);
  await kubectl('patch', 'nodedisk', nameOf('disk3'), '--type=json', '-p', '[{"op":"remove","path":"/metadata/finalizers"}]');
  const recovered = await until('disk3', 'recovered as reserved', (nd) => nd.metadata.uid !== before.metadata.uid && nd.status?.node?.phase === 'Reserved');
  t.deepEqual(recovered.spec.desired, { state: 'Reserved', owner: RECOVERED_OWNER });
  t.deepEqual(recovered.metadata.finalizers, [FINALIZER]);
  t.regex(recovered.status?.node?.message ?? '', /found on the node with no NodeDisk/);
  t.regex(recovered.status?.node?.message ?? '', /kubectl nodedisks release node-disk-node-keep-disk3 --force/);
  await nextRescan();
  t.true(existsSync(marker('disk3')), 'the marker was kept');
  // The label policy does not take it: a recovered reservation is not the label's.
  await kubectl('label', 'nodedisk', nameOf('disk3'), 'localtest.example.com/auto-reserve=true');
  await until('disk3', 'label refused', (nd) => nd.status?.conditions?.some((c) => c.type === 'Accepted' && c.reason === 'ReservedByOther') === true);
  t.is((await get('disk3')).spec.desired?.owner, RECOVERED_OWNER);
  await kubectl('label', 'nodedisk', nameOf('disk3'), 'localtest.example.com/auto-reserve-');
  // The release its message suggests works as any other.
  const released = await plugin(['release', nameOf('disk3'), '--force']);
  t.is(released.code, 0, released.stderr);
  await until('disk3', 'Available, no finalizer', (nd) => nd.status?.node?.phase === 'Available' && nd.metadata.finalizers === undefined);
  t.false(existsSync(marker('disk3')));
});

test.serial('deleting the CRD is held by reserved NodeDisks; forced through and reinstalled, the reservations come back from the markers', async (t) => {
  await kubectl('patch', 'nodedisk', nameOf('disk4'), '--type=merge', '-p', '{"spec":{"desired":{"state":"Reserved","owner":"team-db"}}}');
  await kubectl('label', 'nodedisk', nameOf('disk5'), 'localtest.example.com/auto-reserve=true');
  for (const d of ['disk4', 'disk5']) await until(d, 'Reserved', (nd) => nd.status?.node?.phase === 'Reserved');

  await kubectl('delete', 'crd', 'nodedisks.localtest.example.com', '--wait=false');
  // Unreserved NodeDisks go; the reserved ones stay Terminating, and so does the CRD.
  const left = await eventually(
    'only the reserved NodeDisks left',
    async () => {
      const names = (await client().list()).items.map((i) => i.metadata.name).sort();
      return names.length === 2 ? names : undefined;
    },
    60_000,
  );
  t.deepEqual(left, [nameOf('disk4'), nameOf('disk5')]);
  const crd = JSON.parse(await kubectl('get', 'crd', 'nodedisks.localtest.example.com', '-o', 'json')) as { metadata: { deletionTimestamp?: string } };
  t.truthy(crd.metadata.deletionTimestamp, 'the CRD waits for the reservations');
  for (const d of ['disk4', 'disk5']) t.true(existsSync(marker(d)));

  // An administrator forces the uninstall: the markers stay on the node, the CRD goes.
  for (const d of ['disk4', 'disk5']) await kubectl('patch', 'nodedisk', nameOf(d), '--type=json', '-p', '[{"op":"remove","path":"/metadata/finalizers"}]');
  await eventually(
    'CRD gone',
    async () => {
      try {
        await kubectl('get', 'crd', 'nodedisks.localtest.example.com');
        return false;
      } catch {
        return true;
      }
    },
    60_000,
  );
  for (const d of ['disk4', 'disk5']) t.true(existsSync(marker(d)), `${d} marker kept while no CRD exists`);

  // Reinstalled: the agent finds the markers and restores both reservations; free disks come back Available.
  await kubectl('apply', '--server-side', '-k', join(REPO_ROOT, 'kustomize', 'crd'));
  for (const d of ['disk4', 'disk5']) {
    const nd = await until(d, 'recovered', (x) => x.status?.node?.phase === 'Reserved', 120_000);
    t.deepEqual(nd.spec.desired, { state: 'Reserved', owner: RECOVERED_OWNER });
    t.true(existsSync(marker(d)));
  }
  await until('disk1', 'rediscovered Available', (x) => x.status?.node?.phase === 'Available', 120_000);
});
