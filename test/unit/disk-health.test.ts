import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { deviceProblems, judgeHealth, kernelProblems, type KernelProblem } from '../../agent/disk-health.ts';
import { ANNOTATION_HEALTH_REVIEWED } from '../../api/constants.ts';
import { failing } from '../../api/free-disk.ts';
import type { DiskHealth } from '../../api/v1alpha1/types.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';

/** A sysfs tree with one drive `sdb` (8:16) and whatever counters the test writes. */
async function sysfs(t: { teardown(f: () => Promise<void>): void }): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'nodedisks-health-'));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  await mkdir(join(root, 'block/sdb/device'), { recursive: true });
  await mkdir(join(root, 'dev/block'), { recursive: true });
  await symlink('../../devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sdb', join(root, 'dev/block/8:16'));
  return root;
}

const FS_ERRORS: KernelProblem = { reason: 'FilesystemErrors', text: 'ext4 on the drive (sdb) has recorded 2 errors since it was last checked' };
const judge = (problems: KernelProblem[], previous: DiskHealth | undefined, reviewedAt?: string, now = '2026-12-05T10:00:00Z') =>
  judgeHealth({ problems, previous, reviewedAt: reviewedAt === undefined ? undefined : Date.parse(reviewedAt), name: 'node-disk-a-drive-x', now: () => now });

test('a drive is failing when ext4 on it recorded errors or the kernel counted failed IO commands, found by its device number', async (t) => {
  const root = await sysfs(t);
  t.deepEqual(await kernelProblems({ diskDir: root, diskID: 'drive-x', driveDevice: '8:16', sysRoot: root }), []);
  await mkdir(join(root, 'fs/ext4/sdb'), { recursive: true });
  await writeFile(join(root, 'fs/ext4/sdb/errors_count'), '2\n');
  await writeFile(join(root, 'block/sdb/device/ioerr_cnt'), '0x1f\n');
  const problems = await kernelProblems({ diskDir: root, diskID: 'drive-x', driveDevice: '8:16', sysRoot: root });
  t.deepEqual(
    problems.map((p) => p.reason),
    ['FilesystemErrors', 'IOErrors'],
  );
  t.regex(problems[1]!.text, /31 IO commands that failed on the drive \(sdb\)/);
  // Another device number leads nowhere: no problem is made up for a device sysfs does not have.
  t.deepEqual(await kernelProblems({ diskDir: root, diskID: 'drive-x', driveDevice: '8:32', sysRoot: root }), []);
});

test('counters that are zero, unreadable or not numbers are no failure, and a name that is not a kernel name is not looked up', async (t) => {
  const root = await sysfs(t);
  await mkdir(join(root, 'fs/ext4/sdb'), { recursive: true });
  await writeFile(join(root, 'fs/ext4/sdb/errors_count'), '0\n');
  await writeFile(join(root, 'block/sdb/device/ioerr_cnt'), 'garbage\n');
  t.deepEqual(await deviceProblems('sdb', 'the drive', root), []);
  await mkdir(join(root, 'fs/ext4/x'), { recursive: true });
  t.deepEqual(await deviceProblems('../fs/ext4/sdb', 'the drive', root), []);
});

test('an image with no live staged record shows nothing: its loop devices are found by the records, not by a path', async (t) => {
  const root = await sysfs(t);
  await writeFile(join(root, 'disk1.img'), '');
  t.deepEqual(await kernelProblems({ diskDir: root, diskID: 'disk1', sysRoot: root }), []);
});

test('a failure seen now is False from now; the same failure keeps its start, a grown one starts again', (t) => {
  t.is(judge([], undefined), undefined);
  const first = judge([FS_ERRORS], undefined);
  t.like(first, { status: 'False', reason: 'FilesystemErrors', since: '2026-12-05T10:00:00Z' });
  t.regex(first!.message, /not handed out until a person checks it and runs kubectl nodedisks uncordon node-disk-a-drive-x/);
  t.is(judge([FS_ERRORS], first, undefined, '2026-12-05T11:00:00Z')?.since, '2026-12-05T10:00:00Z');
  const grown = judge([{ ...FS_ERRORS, text: FS_ERRORS.text.replace('2 errors', '5 errors') }], first, undefined, '2026-12-05T11:00:00Z');
  t.is(grown?.since, '2026-12-05T11:00:00Z');
});

test('a failure stays after its evidence goes, until a person marks it checked at or after its start', (t) => {
  const failed = judge([FS_ERRORS], undefined)!;
  t.deepEqual(judge([], failed), failed);
  t.deepEqual(judge([], failed, '2026-12-05T09:59:59Z'), failed);
  t.is(judge([], failed, '2026-12-05T10:00:00Z'), undefined);
  // Checked while the evidence is still there: still reported, but no longer keeping the disk from anyone.
  const checked = judge([FS_ERRORS], failed, '2026-12-05T10:30:00Z')!;
  t.like(checked, { status: 'False', since: '2026-12-05T10:00:00Z' });
  t.regex(checked.message, /a person marked it checked since/);
  const nd = newNodeDisk('a', 'drive-x');
  nd.status = { node: { phase: 'Available', capacityBytes: 1, health: checked } };
  t.true(failing({ ...nd, metadata: { ...nd.metadata, annotations: { [ANNOTATION_HEALTH_REVIEWED]: '2026-12-05T09:00:00Z' } } }));
  t.false(failing({ ...nd, metadata: { ...nd.metadata, annotations: { [ANNOTATION_HEALTH_REVIEWED]: '2026-12-05T10:30:00Z' } } }));
  t.true(failing({ ...nd, metadata: { ...nd.metadata, annotations: { [ANNOTATION_HEALTH_REVIEWED]: 'yesterday' } } }));
});
