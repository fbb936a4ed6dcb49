// The agent's per-disk reconcile (agent/reconcile-disk.ts) driven with a fake client and a temp disk dir:
// the reservation-protection ordering of ADR 12. The finalizer is added before a marker is written (a
// failed finalizer write means no marker), the marker is removed before the finalizer, and a marker that
// cannot be removed keeps the finalizer.
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, statSync, symlinkSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { type DiskFile, discover } from '../../agent/discover.ts';
import { loopDevicesHolding } from '../../agent/loop-attached.ts';
import { markerName } from '../../agent/markers.ts';
import { agentMetrics } from '../../agent/metrics.ts';
import { reconcileDisk, type DiskCache, type ReconcileContext } from '../../agent/reconcile-disk.ts';
import { FINALIZER } from '../../api/constants.ts';
import { formatWipeAnswer, wipeAnswerName } from '../../api/drive-wipe.ts';
import { deviceNumberText, formatStagedRecord, type StagedRecord, stagedRecordName } from '../../api/staged-record.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { ApiError } from '../../lib/kube/errors.ts';
import { createLogger } from '../../lib/runtime/log.ts';

const NODE = 'node-a';
const made: string[] = [];
test.after.always(async () => {
  for (const d of made) await rm(d, { recursive: true, force: true });
});

async function diskDir(diskID: string): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'nodedisks-reconcile-'));
  made.push(d);
  writeFileSync(join(d, `${diskID}.img`), Buffer.alloc(4096));
  return d;
}

function nodeDisk(diskID: string, dir: string, o: { state?: 'Reserved' | 'Available'; protected?: boolean }): NodeDisk {
  return {
    apiVersion: 'localtest.example.com/v1alpha1',
    kind: 'NodeDisk',
    metadata: { name: nodeDiskName(NODE, diskID), resourceVersion: '10', ...(o.protected ? { finalizers: [FINALIZER] } : {}) },
    spec: { nodeName: NODE, diskID, path: join(dir, `${diskID}.img`), ...(o.state ? { desired: { state: o.state, owner: 'team-a' } } : {}) },
  };
}

/** What the fake API server saw, in order, with whether the marker file existed at that moment. */
type Call = { op: 'get' | 'create' | 'applyStatus' | 'addFinalizer' | 'removeFinalizer'; markerExists: boolean };

function harness(dir: string, diskID: string, stored: NodeDisk, o: { failFinalizer?: boolean; sysBlock?: string; lookAtDrive?: ReconcileContext['lookAtDrive'] } = {}) {
  const calls: Call[] = [];
  const logs: string[] = [];
  const marker = join(dir, markerName(diskID));
  const cache = new Map<string, NodeDisk>([[stored.metadata.name!, stored]]);
  const seen = (op: Call['op']) => calls.push({ op, markerExists: existsSync(marker) });
  let rv = 10;
  const client: ReconcileContext['client'] = {
    get: async () => (seen('get'), structuredClone(cache.get(stored.metadata.name!)!)),
    create: async (nd) => (seen('create'), nd),
    applyStatus: async (body) => {
      seen('applyStatus');
      const nd = cache.get(stored.metadata.name!)!;
      return { ...nd, metadata: { ...nd.metadata, resourceVersion: String(++rv) }, status: body.status };
    },
    mergePatch: async (_name, patch) => {
      const finalizers = (patch as { metadata: { finalizers: string[] | null } }).metadata.finalizers;
      seen(finalizers?.includes(FINALIZER) ? 'addFinalizer' : 'removeFinalizer');
      if (o.failFinalizer) throw new ApiError('PATCH', '/nodedisks', 500, { message: 'etcdserver: request timed out' });
      const nd = cache.get(stored.metadata.name!)!;
      return { ...nd, metadata: { ...nd.metadata, resourceVersion: String(++rv), ...(finalizers ? { finalizers } : { finalizers: undefined }) } };
    },
  };
  const diskCache: DiskCache = {
    get: (name) => cache.get(name),
    storeOwnWrite: (nd) => (cache.set(nd.metadata.name!, nd), nd),
    forget: (name) => cache.delete(name),
    values: () => cache.values(),
  };
  const metrics = agentMetrics();
  const ctx: ReconcileContext = {
    client,
    nodeName: NODE,
    diskDir: dir,
    hostDiskDir: dir,
    cache: diskCache,
    log: createLogger('test', { write: (line) => logs.push(line) }),
    metrics,
    actionErrors: new Map(),
    reportAliases: async () => {},
    // This machine's own loop devices are no business of these tests: sysfs is a tree of the test's own
    // (none at all unless a test makes one).
    sysBlockDir: o.sysBlock ?? join(dir, 'no-sys-block'),
    bootIdFile: join(dir, 'boot-id'),
    ...(o.lookAtDrive ? { lookAtDrive: o.lookAtDrive } : {}),
  };
  const run = async () => reconcileDisk(ctx, diskID, await discover(dir, NODE));
  /** With a discovery made earlier: the disk dir changed since the scan. */
  const runWith = async (discovery: Awaited<ReturnType<typeof discover>>) => reconcileDisk(ctx, diskID, discovery);
  return { calls, logs, marker, cache, run, runWith, metrics, name: stored.metadata.name! };
}

test('a reservation adds the finalizer before it writes the marker', async (t) => {
  const dir = await diskDir('disk1');
  const h = harness(dir, 'disk1', nodeDisk('disk1', dir, { state: 'Reserved' }));
  await h.run();
  t.deepEqual(h.calls[0], { op: 'addFinalizer', markerExists: false }, 'the finalizer is the first write, with no marker yet');
  t.true(existsSync(h.marker));
  t.true(h.cache.get(h.name)!.metadata.finalizers!.includes(FINALIZER));
  t.is(h.cache.get(h.name)!.status?.node?.phase, 'Reserved');
});

test('a failed finalizer write means no marker', async (t) => {
  const dir = await diskDir('disk2');
  const h = harness(dir, 'disk2', nodeDisk('disk2', dir, { state: 'Reserved' }), { failFinalizer: true });
  await t.throwsAsync(h.run(), { message: /request timed out/ });
  t.false(existsSync(h.marker), 'a marker was written although the finalizer is not on the NodeDisk');
  t.deepEqual(
    h.calls.map((c) => c.op),
    ['addFinalizer'],
  );
});

test('a release removes the marker before it removes the finalizer, deciding on a fresh read', async (t) => {
  const dir = await diskDir('disk3');
  writeFileSync(join(dir, markerName('disk3')), 'reserved\n');
  const h = harness(dir, 'disk3', nodeDisk('disk3', dir, { state: 'Available', protected: true }));
  await h.run();
  t.deepEqual(h.calls[0], { op: 'get', markerExists: true }, 'the release is decided on a fresh read');
  t.deepEqual(
    h.calls.find((c) => c.op === 'removeFinalizer'),
    { op: 'removeFinalizer', markerExists: false },
    'the finalizer was removed while the marker still existed',
  );
  t.false(existsSync(h.marker));
  t.is(h.cache.get(h.name)!.metadata.finalizers, undefined);
  t.is(h.cache.get(h.name)!.status?.node?.phase, 'Available');
});

test('a marker that cannot be removed keeps the finalizer', async (t) => {
  const dir = await diskDir('disk4');
  mkdirSync(join(dir, markerName('disk4'))); // a directory: never touched, so its removal fails
  const h = harness(dir, 'disk4', nodeDisk('disk4', dir, { state: 'Available', protected: true }));
  await h.run();
  t.false(
    h.calls.some((c) => c.op === 'removeFinalizer'),
    'the finalizer was removed although the marker is still there',
  );
  t.deepEqual(h.cache.get(h.name)!.metadata.finalizers, [FINALIZER]);
  t.is(h.cache.get(h.name)!.status?.node?.phase, 'Error');
  t.true(h.logs.some((l) => l.includes('cannot remove the reservation marker')));
  // Counted at each attempt: what the marker alert reads.
  t.regex(await h.metrics.registry.metrics(), /^nodedisks_agent_marker_operation_errors_total\{op="remove"\} 1$/m);
  await h.run();
  t.regex(await h.metrics.registry.metrics(), /^nodedisks_agent_marker_operation_errors_total\{op="remove"\} 2$/m);
});

test('a wipe that fails is reported once, not written again at every rescan while it keeps failing', async (t) => {
  const dir = await diskDir('disk9');
  writeFileSync(join(dir, markerName('disk9')), 'reserved\n');
  const stored = nodeDisk('disk9', dir, { state: 'Available', protected: true });
  stored.spec.desired = { state: 'Available', wipe: 'w-1' };
  const h = harness(dir, 'disk9', stored);
  // Scanned as a regular image, then swapped for a link: the wipe refuses it (never followed).
  const scanned = await discover(dir, NODE);
  rmSync(join(dir, 'disk9.img'));
  symlinkSync('/etc/hostname', join(dir, 'disk9.img'));
  await h.runWith(scanned);
  t.is(h.cache.get(h.name)!.status?.node?.phase, 'Error');
  t.regex(h.cache.get(h.name)!.status?.node?.message ?? '', /cannot wipe the disk image \(wipe request w-1\): disk9\.img is a symbolic link/);
  t.true(existsSync(h.marker), 'the disk stays held on the node until the wipe succeeds');
  const writes = () => h.calls.filter((c) => c.op === 'applyStatus').length;
  const first = writes();
  await h.runWith(scanned);
  await h.runWith(scanned);
  t.is(writes(), first, 'the same failure was written again');
  t.true(existsSync(h.marker));
});

/** A sysfs block tree of the test's own: loop devices attached to the given files, and some not attached. */
const BOOT = 'c0ffee00-0000-4000-8000-000000000001';

/** A sysfs block tree of the test's own: each loop device with its number, its sequence number, and whether it is attached. */
function fakeSysBlock(dir: string, devices: Record<string, { seq: number; attached: boolean }>): string {
  const sys = join(dir, 'sys-block');
  writeFileSync(join(dir, 'boot-id'), `${BOOT}\n`);
  mkdirSync(join(sys, 'vda'), { recursive: true });
  for (const [loop, d] of Object.entries(devices)) setLoop(sys, loop, d);
  return sys;
}

function setLoop(sys: string, loop: string, d: { seq: number; attached: boolean }): void {
  mkdirSync(join(sys, loop), { recursive: true });
  writeFileSync(join(sys, loop, 'dev'), `7:${loop.slice(4)}\n`);
  writeFileSync(join(sys, loop, 'diskseq'), `${d.seq}\n`);
  rmSync(join(sys, loop, 'loop'), { recursive: true, force: true });
  if (d.attached) {
    mkdirSync(join(sys, loop, 'loop'));
    // The path is whatever the attaching program's mount namespace called it: nothing is decided by it.
    writeFileSync(join(sys, loop, 'loop', 'backing_file'), '/var/lib/node-disks-manager/disks/disk1.img\n');
  }
}

/** The CSI node side's record of `image` staged on `loop` at sequence `seq` (api/staged-record.ts), under `name`. */
function writeRecord(dir: string, name: string, image: string, loop: string, seq: number, o: { boot?: string } = {}): void {
  const st = statSync(image, { bigint: true });
  const record: StagedRecord = {
    stagingPath: `/var/lib/kubelet/plugins/staging/${loop}`,
    device: `/dev/${loop}`,
    rdev: `7:${Number(loop.slice(4))}`,
    diskseq: String(seq),
    bootId: o.boot ?? BOOT,
    image: { ino: st.ino.toString(), dev: deviceNumberText(st.dev) },
  };
  writeFileSync(join(dir, name), formatStagedRecord(record));
}

test('an image still attached to a loop device is not wiped: Wiping, naming the device, written once; wiped at the first rescan after it is detached', async (t) => {
  const dir = await diskDir('disk5');
  writeFileSync(join(dir, 'disk5.img'), Buffer.from('team-x data'));
  writeFileSync(join(dir, 'disk50.img'), Buffer.from('other'));
  writeFileSync(join(dir, markerName('disk5')), 'reserved\n');
  const stored = nodeDisk('disk5', dir, { state: 'Available', protected: true });
  stored.spec.desired = { state: 'Available', wipe: 'w-5' };
  const sys = fakeSysBlock(dir, { loop3: { seq: 40, attached: true }, loop4: { seq: 41, attached: true } });
  writeRecord(dir, stagedRecordName('disk5'), join(dir, 'disk5.img'), 'loop3', 40);
  writeRecord(dir, stagedRecordName('disk50'), join(dir, 'disk50.img'), 'loop4', 41);
  const h = harness(dir, 'disk5', stored, { sysBlock: sys });
  await h.run();
  const node = () => h.cache.get(h.name)!.status?.node;
  t.is(node()?.phase, 'Wiping');
  t.regex(
    node()?.message ?? '',
    /^waiting to wipe the disk image \(wipe request w-5\): it is attached to loop device \/dev\/loop3 \(staged at \/var\/lib\/kubelet\/plugins\/staging\/loop3\), a volume still staged on this node/,
  );
  t.false((node()?.message ?? '').includes('loop4'), 'another image of a similar name counted');
  t.is(readFileSync(join(dir, 'disk5.img'), 'utf8'), 'team-x data', 'the image was wiped while attached');
  t.true(existsSync(h.marker), 'the disk stays held until it is wiped');
  t.deepEqual(h.cache.get(h.name)!.metadata.finalizers, [FINALIZER]);
  t.is(node()?.wipedFor, undefined);
  const writes = () => h.calls.filter((c) => c.op === 'applyStatus').length;
  t.is(writes(), 1, 'one report for the wait');
  await h.run();
  await h.run();
  t.is(writes(), 1, 'the same wait was written again at a rescan');
  t.is(h.logs.filter((l) => l.includes('waiting to wipe the disk image')).length, 1, 'the wait is logged once');

  setLoop(sys, 'loop3', { seq: 42, attached: false }); // detached; the record stays until the node side removes it
  await h.run();
  t.is(node()?.phase, 'Available');
  t.is(node()?.wipedFor, 'w-5');
  t.true(readFileSync(join(dir, 'disk5.img')).every((b) => b === 0));
  t.false(existsSync(h.marker));
  t.true(h.logs.some((l) => l.includes('no longer attached to a loop device')));
});

test('an image counts as attached by a live record of its inode, under any name; not by a stale record, a record of another file, or a look-alike entry', async (t) => {
  const dir = await diskDir('disk6');
  const image = join(dir, 'disk6.img');
  const sys = fakeSysBlock(dir, {
    loop0: { seq: 10, attached: true },
    loop1: { seq: 12, attached: true }, // re-attached since its record (seq 11): another node's, say
    loop2: { seq: 21, attached: false }, // detached since (seq 20 recorded)
    loop3: { seq: 30, attached: true },
    loop4: { seq: 40, attached: true },
    loop5: { seq: 50, attached: true },
  });
  writeRecord(dir, stagedRecordName('disk6'), image, 'loop0', 10);
  writeRecord(dir, stagedRecordName('renamed-from'), image, 'loop5', 50); // the image was disk5 when it was staged
  writeRecord(dir, stagedRecordName('a'), image, 'loop1', 11);
  writeRecord(dir, stagedRecordName('b'), image, 'loop2', 20);
  writeRecord(dir, stagedRecordName('c'), image, 'loop3', 30, { boot: 'an-earlier-boot' });
  writeFileSync(join(dir, 'other.img'), 'x');
  writeRecord(dir, stagedRecordName('other'), join(dir, 'other.img'), 'loop4', 40);
  symlinkSync(join(dir, stagedRecordName('disk6')), join(dir, stagedRecordName('link')));
  writeFileSync(join(dir, stagedRecordName('junk')), 'not json');
  t.deepEqual(
    (await loopDevicesHolding(dir, 'disk6', { sysBlock: sys, bootIdFile: join(dir, 'boot-id') })).map((l) => l.device),
    ['/dev/loop0', '/dev/loop5'],
  );
  t.deepEqual(await loopDevicesHolding(dir, 'absent', { sysBlock: sys, bootIdFile: join(dir, 'boot-id') }), [], 'no image: no loop device');
});

test('a sysfs that cannot be read makes the wipe fail (Error), not go ahead', async (t) => {
  const dir = await diskDir('disk8');
  writeFileSync(join(dir, 'disk8.img'), Buffer.from('team-x data'));
  writeFileSync(join(dir, markerName('disk8')), 'reserved\n');
  const stored = nodeDisk('disk8', dir, { state: 'Available', protected: true });
  stored.spec.desired = { state: 'Available', wipe: 'w-8' };
  writeFileSync(join(dir, 'not-a-dir'), '');
  writeFileSync(join(dir, 'boot-id'), `${BOOT}\n`);
  writeRecord(dir, stagedRecordName('disk8'), join(dir, 'disk8.img'), 'loop3', 30);
  const h = harness(dir, 'disk8', stored, { sysBlock: join(dir, 'not-a-dir') });
  await h.run();
  t.is(h.cache.get(h.name)!.status?.node?.phase, 'Error');
  t.regex(h.cache.get(h.name)!.status?.node?.message ?? '', /cannot wipe the disk image \(wipe request w-8\): cannot read loop device loop3 in .*not-a-dir/);
  t.is(readFileSync(join(dir, 'disk8.img'), 'utf8'), 'team-x data');
  t.true(existsSync(h.marker));
});

test('an image with bytes the agent never saw reserved (reserved and released while it was down, or renamed from a disk that held a volume) is reported holding data; a sparse one is not', async (t) => {
  const dir = await diskDir('disk9');
  // Sparse: nothing was ever written to it.
  rmSync(join(dir, 'disk9.img'));
  writeFileSync(join(dir, 'disk9.img'), '');
  truncateSync(join(dir, 'disk9.img'), 1024 * 1024);
  const clean = harness(dir, 'disk9', nodeDisk('disk9', dir, {}));
  await clean.run();
  t.is(clean.cache.get(clean.name)!.status?.node?.phase, 'Available');
  t.is(clean.cache.get(clean.name)!.status?.node?.holdsData, undefined, 'a sparse image nothing was written to holds no data');

  // The same image after someone wrote to it while no reservation was seen (no marker, desired Available).
  const fh = openSync(join(dir, 'disk9.img'), 'r+');
  writeSync(fh, Buffer.from('an earlier owner filesystem'), 0, 27, 4096);
  closeSync(fh);
  const written = harness(dir, 'disk9', clean.cache.get(clean.name)!);
  await written.run();
  t.is(written.cache.get(written.name)!.status?.node?.phase, 'Available');
  t.true(written.cache.get(written.name)!.status?.node?.holdsData, 'written bytes the agent never saw reserved were reported as no data');
});

test("a drive's report after its wipe comes from a look taken after the wipe, not from the scan made before it (the partitions its holder made are gone)", async (t) => {
  const dir = await diskDir('unused');
  const diskID = 'drive-wwn-5000c50000d71a04';
  const facts = { device: 'loop3', media: 'hdd' as const, transport: 'loop', logicalBlockSize: 512, physicalBlockSize: 512 };
  const drive = (refusals: string[]): DiskFile => ({
    diskID,
    file: join(dir, 'by-id', 'wwn-0x5000c50000d71a04'),
    hostPath: '/dev/disk/by-id/wwn-0x5000c50000d71a04',
    sizeBytes: 64 * 1024 * 1024,
    drive: { facts, refusals, mountedAt: [], byIdName: 'wwn-0x5000c50000d71a04', device: '7:3' },
  });
  const stored = nodeDisk(diskID, dir, { state: 'Available', protected: true });
  stored.spec.desired = { state: 'Available', wipe: 'w-parts' };
  // The scan ran while the node side was still wiping: the kernel still showed the holder's partition.
  // The answer was written after that scan, and before this reconcile read it.
  writeFileSync(join(dir, wipeAnswerName(diskID)), formatWipeAnswer({ token: 'w-parts', ok: true, bytes: 64 * 1024 * 1024, ms: 12, method: 'test' }));
  const looks: string[] = [];
  const h = harness(dir, diskID, stored, {
    lookAtDrive: async (id) => {
      looks.push(id);
      return drive([]);
    },
  });
  await h.runWith({ disks: new Map([[diskID, drive(['has partitions (loop3p1)'])]]), ignored: [] });
  const node = h.cache.get(h.name)!.status?.node;
  t.is(node?.wipedFor, 'w-parts');
  t.is(node?.phase, 'Available', node?.message);
  t.deepEqual(looks, [diskID], 'the drive was looked at again once, after the wipe');
});
