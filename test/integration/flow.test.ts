// The reservation flow end to end: a real control plane, the real controller and three real agents as
// separate processes with their own identities, files on disk, and the real kubectl.
import { existsSync, mkdirSync, readFileSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm, truncate } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { DEFAULT_DISK_DIR } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { seedDisks, startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const NODES = ['node-disks-dev-m02', 'node-disks-dev-m03', 'node-disks-dev-m04'];
const MiB64 = 64 * 1024 * 1024;
let work = '';
const agents = new Map<string, Program>();
let controller: Program;
const diskDir = (node: string) => join(work, node, 'disks');
const logDir = () => join(work, 'logs');
const client = () => nodeDisksFor(controlPlane().admin());
const get = (node: string, disk: string) => client().get(nodeDiskName(node, disk));
const kubectl = (...args: string[]) => controlPlane().kubectl(controlPlane().admin(), args);

async function launchAgent(node: string): Promise<Program> {
  const p = await startAgent(controlPlane(), { node, diskDir: diskDir(node), logDir: logDir(), rescanInterval: '1s' });
  agents.set(node, p);
  return p;
}

async function phaseOf(node: string, disk: string, phase: string, extra: (nd: NodeDisk) => boolean = () => true): Promise<NodeDisk> {
  return await eventually(`${node}/${disk} phase ${phase}`, async () => {
    const nd = await get(node, disk);
    return nd.status?.node?.phase === phase && extra(nd) ? nd : undefined;
  });
}

const marker = (node: string, disk: string) => join(diskDir(node), `${disk}.img.reserved`);

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-flow-'));
  for (const node of NODES) await seedDisks(diskDir(node), 3, MiB64);
  controller = await startController(controlPlane(), { logDir: logDir() });
  for (const node of NODES) await launchAgent(node);
});

test.afterEach.always((t) => {
  if (t.passed) return;
  for (const p of [controller, ...agents.values()]) console.error(`----- ${p.name} -----\n${p.logs(6000)}`);
});

test.after.always(async () => {
  await Promise.all([controller, ...agents.values()].map((p) => p?.stop()));
  await rm(work, { recursive: true, force: true });
});

test.serial('discovers 3 nodes × 3 disks with the seed names, labels and capacity', async (t) => {
  const all = await eventually('9 Available NodeDisks', async () => {
    const list = await client().list();
    return list.items.filter((i) => i.status?.node?.phase === 'Available').length === 9 ? list.items : undefined;
  });
  t.deepEqual(all.map((i) => i.metadata.name).sort(), NODES.flatMap((n) => [1, 2, 3].map((d) => `node-disk-${n}-disk${d}`)).sort());
  for (const nd of all) {
    t.is(nd.status?.node?.capacityBytes, MiB64);
    t.is(nd.spec.desired?.state, 'Available');
    t.is(nd.metadata.labels?.['localtest.example.com/node'], nd.spec.nodeName);
    t.is(nd.metadata.labels?.['localtest.example.com/disk'], nd.spec.diskID);
    // The node's disk dir as the install configures it (the agent scans this machine's stand-in for it).
    t.is(nd.spec.path, `${DEFAULT_DISK_DIR}/${nd.spec.diskID}.img`);
  }
  const ready = await eventually('Ready=True everywhere', async () => {
    const list = await client().list();
    return list.items.every((i) => i.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) ? list : undefined;
  });
  t.is(ready.items.length, 9);
});

test.serial('the seed flow: label → marker and Reserved; label removed → marker gone, Available, owner cleared', async (t) => {
  const [node, disk] = [NODES[0]!, 'disk1'];
  const name = nodeDiskName(node, disk);
  await kubectl('label', 'nodedisk', name, 'localtest.example.com/auto-reserve=true', '--overwrite');
  const reserved = await phaseOf(node, disk, 'Reserved');
  t.deepEqual(reserved.spec.desired, { state: 'Reserved', owner: 'auto' });
  t.is(readFileSync(marker(node, disk), 'utf8'), 'reserved\n');
  const line = await kubectl('get', 'nodedisk', name, '-o', 'jsonpath={.spec.desired.state} {.spec.desired.owner} {.status.node.phase} {.status.node.capacityBytes}');
  t.is(line, 'Reserved auto Reserved 67108864');

  await kubectl('label', 'nodedisk', name, 'localtest.example.com/auto-reserve-');
  const released = await phaseOf(node, disk, 'Available');
  t.deepEqual(released.spec.desired, { state: 'Available' });
  t.false(existsSync(marker(node, disk)));
  t.is(await kubectl('get', 'nodedisk', name, '-o', 'jsonpath={.spec.desired.state} {.spec.desired.owner} {.status.node.phase} {.status.node.capacityBytes}'), 'Available  Available 67108864');
  const events = await kubectl('get', 'events.events.k8s.io', '-n', 'default', '--field-selector', `regarding.name=${name}`, '-o', 'jsonpath={.items[*].reason}');
  t.true(events.includes('AutoReserved') && events.includes('AutoReleased'), events);
});

test.serial('a manual reservation survives label changes, and the controller says why the label had no effect', async (t) => {
  const [node, disk] = [NODES[1]!, 'disk2'];
  const name = nodeDiskName(node, disk);
  await kubectl('patch', 'nodedisk', name, '--type=merge', '-p', '{"spec":{"desired":{"state":"Reserved","owner":"alice"}}}');
  await phaseOf(node, disk, 'Reserved');
  await kubectl('label', 'nodedisk', name, 'localtest.example.com/auto-reserve=true');
  const conflicted = await eventually('Accepted=False ReservedByOther', async () => {
    const nd = await get(node, disk);
    const c = nd.status?.conditions?.find((x) => x.type === 'Accepted');
    return c?.status === 'False' && c.reason === 'ReservedByOther' ? nd : undefined;
  });
  t.deepEqual(conflicted.spec.desired, { state: 'Reserved', owner: 'alice' });
  t.false(conflicted.status?.controller?.accepted);
  t.regex(conflicted.status?.conditions?.find((x) => x.type === 'Accepted')?.message ?? '', /reserved by owner "alice"/);
  const warning = await eventually('a Warning event', async () => {
    const out = await kubectl('get', 'events.events.k8s.io', '-n', 'default', '--field-selector', `regarding.name=${name},type=Warning`, '-o', 'jsonpath={.items[*].reason}');
    return out.includes('ReservedByOther') ? out : undefined;
  });
  t.truthy(warning);
  await kubectl('label', 'nodedisk', name, 'localtest.example.com/auto-reserve-');
  await eventually('Accepted=True again', async () => (await get(node, disk)).status?.controller?.accepted === true);
  const after = await get(node, disk);
  t.deepEqual(after.spec.desired, { state: 'Reserved', owner: 'alice' });
  t.true(existsSync(marker(node, disk)));
});

test.serial('a new disk file is discovered, a grown one re-reported, a deleted one becomes Missing and keeps its reservation', async (t) => {
  const node = NODES[2]!;
  await seedDisks(diskDir(node), 4, MiB64); // adds disk4
  await phaseOf(node, 'disk4', 'Available');
  await truncate(join(diskDir(node), 'disk4.img'), 2 * MiB64);
  await phaseOf(node, 'disk4', 'Available', (nd) => nd.status?.node?.capacityBytes === 2 * MiB64);
  await kubectl('label', 'nodedisk', nodeDiskName(node, 'disk4'), 'localtest.example.com/auto-reserve=true');
  await phaseOf(node, 'disk4', 'Reserved');
  unlinkSync(join(diskDir(node), 'disk4.img'));
  const missing = await phaseOf(node, 'disk4', 'Missing');
  t.deepEqual(missing.spec.desired, { state: 'Reserved', owner: 'auto' }, 'the reservation survives');
  t.is(missing.status?.node?.capacityBytes, 2 * MiB64, 'the last capacity is kept');
  const ready = await eventually('Ready DiskMissing', async () => {
    const c = (await get(node, 'disk4')).status?.conditions?.find((x) => x.type === 'Ready');
    return c?.reason === 'DiskMissing' ? c : undefined;
  });
  t.is(ready.status, 'False');
});

test.serial('bad files in the disk dir are reported and never followed', async (t) => {
  const node = NODES[2]!;
  const dir = diskDir(node);
  const outside = join(work, 'outside.img');
  writeFileSync(outside, 'x');
  symlinkSync(outside, join(dir, 'linked.img'));
  mkdirSync(join(dir, 'folder.img'));
  writeFileSync(join(dir, 'bad name.img'), 'x');
  writeFileSync(join(dir, 'good.img'), 'x');
  await phaseOf(node, 'good', 'Available');
  const names = (await client().list({ fieldSelector: `spec.nodeName=${node}` })).items.map((i) => i.spec.diskID);
  t.false(names.includes('linked'));
  t.false(names.includes('folder'));
  t.false(names.some((n) => n.includes(' ')));
  // A name that cannot be a disk is judged by a full scan, which waits for a pause in file events (at most 1 s).
  const log = await eventually('the bad files logged', async () => {
    const text = agents.get(node)!.logs();
    return /"file":"bad name\.img"/.test(text) ? text : undefined;
  });
  t.regex(log, /"file":"linked\.img","reason":"is a symbolic link/);
  t.regex(log, /"file":"folder\.img","reason":"is a directory/);
  t.regex(log, /"file":"bad name\.img","reason":"cannot become a diskID/);

  // A marker that is a symlink: the disk is Error with a message, the link and its target are untouched.
  const target = join(work, 'victim');
  writeFileSync(target, 'precious');
  symlinkSync(target, marker(node, 'disk3'));
  await kubectl('label', 'nodedisk', nodeDiskName(node, 'disk3'), 'localtest.example.com/auto-reserve=true');
  const err = await phaseOf(node, 'disk3', 'Error');
  t.regex(err.status?.node?.message ?? '', /marker disk3\.img\.reserved is a symbolic link/);
  t.is(readFileSync(target, 'utf8'), 'precious');
  const ready = await eventually('Ready AgentError', async () => {
    const c = (await get(node, 'disk3')).status?.conditions?.find((x) => x.type === 'Ready');
    return c?.reason === 'AgentError' ? c : undefined;
  });
  t.is(ready.status, 'False');
  // Fixing it by hand lets the agent converge, and then the controller: Ready follows the agent's report.
  unlinkSync(marker(node, 'disk3'));
  await phaseOf(node, 'disk3', 'Reserved');
  await eventually('Ready True again', async () => (await get(node, 'disk3')).status?.conditions?.find((x) => x.type === 'Ready')?.status === 'True');
});

test.serial('steady state writes nothing', async (t) => {
  const versions = async () => new Map((await client().list()).items.map((i) => [i.metadata.name, i.metadata.resourceVersion]));
  const same = (a: Map<string | undefined, string | undefined>, b: Map<string | undefined, string | undefined>) => a.size === b.size && [...a].every(([k, v]) => b.get(k) === v);
  // The tests before may end on an agent's report, with the controller's conditions for it still on the
  // way: steady means after one quiet second (a writer with a shorter period than the window still shows).
  let before = await versions();
  await eventually(
    'a second in which no NodeDisk changes',
    async () => {
      await new Promise((r) => setTimeout(r, 1000));
      const now = await versions();
      const quiet = same(before, now);
      before = now;
      return quiet;
    },
    30_000,
    0,
  );
  await new Promise((r) => setTimeout(r, 4000)); // four rescans of every agent
  const after = (await client().list()).items;
  const changed = after.filter((i) => before.get(i.metadata.name) !== i.metadata.resourceVersion).map((i) => i.metadata.name);
  t.deepEqual(changed, []);
});

test.serial('an agent restarted mid-flow converges with no duplicates and no lost reservation', async (t) => {
  const node = NODES[0]!;
  const count = async () => (await client().list({ fieldSelector: `spec.nodeName=${node}` })).items.length;
  const n = await count();
  await agents.get(node)!.crash();
  await kubectl('label', 'nodedisk', nodeDiskName(node, 'disk2'), 'localtest.example.com/auto-reserve=true');
  await eventually('desired Reserved while the agent is down', async () => (await get(node, 'disk2')).spec.desired?.state === 'Reserved');
  t.is((await get(node, 'disk2')).status?.node?.phase, 'Available', 'nothing acted on the node yet');
  t.false(existsSync(marker(node, 'disk2')));
  await launchAgent(node);
  await phaseOf(node, 'disk2', 'Reserved');
  t.true(existsSync(marker(node, 'disk2')));
  t.is(await count(), n);
});

test.serial('a controller restarted mid-flow converges', async (t) => {
  const [node, disk] = [NODES[1]!, 'disk3'];
  await controller.crash();
  await kubectl('label', 'nodedisk', nodeDiskName(node, disk), 'localtest.example.com/auto-reserve=true');
  controller = await startController(controlPlane(), { logDir: logDir(), identity: 'controller-1' });
  // The crashed leader never released its Lease: the new one waits out the lease duration (15 s).
  const nd = await eventually(
    'Reserved and Ready for the current generation after controller restart',
    async () => {
      const x = await get(node, disk);
      const ready = x.status?.conditions?.find((c) => c.type === 'Ready');
      return x.status?.node?.phase === 'Reserved' && x.status?.controller?.observedGeneration === x.metadata.generation && ready?.status === 'True' ? x : undefined;
    },
    45_000,
  );
  t.is(nd.spec.desired?.owner, 'auto');
});

test.serial('agents and controller survive an API server restart and keep working', async (t) => {
  const [node, disk] = [NODES[2]!, 'disk1'];
  await controlPlane().restartApiserver(2000);
  await kubectl('label', 'nodedisk', nodeDiskName(node, disk), 'localtest.example.com/auto-reserve=true');
  await eventually('Reserved after API server restart', async () => (await get(node, disk)).status?.node?.phase === 'Reserved', 60_000);
  t.true(existsSync(marker(node, disk)));
  t.true(
    [controller, ...agents.values()].every((p) => p.running),
    'no process died',
  );
});
