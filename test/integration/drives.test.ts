// Drives as NodeDisks (docs/adr/0044-real-drives.md): the real agent process, with its node-bound identity
// and the admission policies, finds real block devices (loop devices over files outside the disk dir, named
// in a by-id dir as udev names a drive) through sysfs, names them by identity, reports their facts, refuses
// a mounted one with the reason, keeps their reservation markers, and keeps a pulled drive's reservation.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, open, readdir, readFile, rm, stat, symlink, truncate, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { DEFAULT_BY_ID_DIR, LABEL_MEDIA } from '../../api/constants.ts';
import { type DriveWipeProgress, formatWipeRequest, parseWipeAnswer, parseWipeProgress } from '../../api/drive-wipe.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { DriveWiper } from '../../csi/drive-wiper.ts';
import type { DriveInfo } from '../../agent/discover.ts';
import { wipeDriveStep } from '../../agent/wipe-drive.ts';
import { openDrive, publish, stageDrive, unpublish, unstage } from '../../csi/node-volumes.ts';
import { parseMountInfo } from '../../lib/runtime/mountinfo.ts';
import { startAgent, startController, startCsiNode, type Program } from '../../hack/lib/programs.ts';
import { createLogger } from '../../lib/runtime/log.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const run = promisify(execFile);
const controlPlane = useControlPlane(test);
const client = () => nodeDisksFor(controlPlane().admin());
const kubectl = (...args: string[]) => controlPlane().kubectl(controlPlane().admin(), args);
const MiB = 2 ** 20;
const NODE = 'node-drives';

let work = '';
let agent: Program | undefined;
let csiNode: Program | undefined;
const loops: string[] = [];
let mounted: string | undefined;

/** Three stand-in drives: WWNs as a SAS or SATA drive reports them, the by-id names udev makes of them. */
const WWNS = ['5000c50000d71a01', '5000c50000d71a02', '5000c50000d71a03'];
const driveName = (wwn: string) => nodeDiskName(NODE, `drive-wwn-${wwn}`);
let byIdDir = '';
let diskDir = '';

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-drives-'));
  byIdDir = join(work, 'by-id');
  diskDir = join(work, 'disks');
  await mkdir(byIdDir, { recursive: true });
  await mkdir(diskDir, { recursive: true });
  await mkdir(join(work, 'backing'));
  for (const [i, wwn] of WWNS.entries()) {
    const file = join(work, 'backing', `drive${i}`);
    await writeFile(file, '');
    await truncate(file, (64 + i * 16) * MiB);
    const dev = (await run('losetup', ['--find', '--show', file])).stdout.trim();
    loops.push(dev);
    await symlink(`../../${dev.replace('/dev/', '')}`, join(byIdDir, `wwn-0x${wwn}`));
  }
  // The third is in use: a filesystem mounted from it, as an admin's forgotten mount would be.
  await run('mkfs.ext4', ['-q', loops[2]!]);
  mounted = join(work, 'mnt');
  await mkdir(mounted);
  await run('mount', [loops[2]!, mounted]);
  agent = await startAgent(controlPlane(), {
    node: NODE,
    diskDir,
    logDir: join(work, 'logs'),
    rescanInterval: '500ms',
    extraArgs: ['--drive=by-id=wwn-0x5000c50000d71a*', `--by-id-dir=${byIdDir}`, `--host-by-id-dir=${DEFAULT_BY_ID_DIR}`],
  });
  // The node side, which wipes the drives the agent asks it to (the agent cannot open a device).
  csiNode = startCsiNode({ logDir: join(work, 'logs'), csiAddress: join(work, 'csi.sock'), node: NODE, diskDir, extraArgs: [`--by-id-dir=${byIdDir}`] });
});

test.afterEach.always((t) => {
  if (!t.passed) for (const p of [agent, csiNode]) if (p) console.error(`----- ${p.name} -----\n${p.logs(6000)}`);
});

test.after.always(async () => {
  await agent?.stop();
  await csiNode?.stop();
  if (mounted) await run('umount', [mounted]).catch(() => undefined);
  for (const dev of loops) await run('losetup', ['-d', dev]).catch(() => undefined);
  await rm(work, { recursive: true, force: true });
});

async function disk(name: string, check: (nd: NodeDisk) => boolean, what: string): Promise<NodeDisk> {
  return await eventually(
    `${name} ${what}`,
    async () => {
      const nd = await client()
        .get(name)
        .catch(() => undefined);
      return nd && check(nd) ? nd : undefined;
    },
    30_000,
  );
}

test.serial('a chosen drive is a NodeDisk named by its WWN, with its facts, its media label and its by-id path', async (t) => {
  const nd = await disk(driveName(WWNS[0]!), (x) => x.status?.node?.phase === 'Available', 'Available');
  t.is(nd.spec.diskID, `drive-wwn-${WWNS[0]}`);
  t.is(nd.spec.path, `${DEFAULT_BY_ID_DIR}/wwn-0x${WWNS[0]}`);
  t.is(nd.status?.node?.capacityBytes, 64 * MiB);
  t.like(nd.status?.node?.drive, { device: loops[0]!.replace('/dev/', ''), transport: 'other', logicalBlockSize: 512 });
  t.true(['ssd', 'hdd'].includes(nd.status?.node?.drive?.media ?? ''));
  t.is(nd.metadata.labels?.[LABEL_MEDIA], nd.status?.node?.drive?.media);
  // Nothing is known of its bytes: never handed to a PV as blank until the node side has wiped it.
  t.true(nd.status?.node?.holdsData);
  // Reported once: rescans (every 500 ms here) of an unchanged drive write nothing.
  const settled = await client().get(nd.metadata.name!);
  await new Promise((resolve) => setTimeout(resolve, 2500));
  t.is((await client().get(nd.metadata.name!)).metadata.resourceVersion, settled.metadata.resourceVersion, 'no write while nothing changes');
  const wide = await kubectl('get', 'nodedisk', driveName(WWNS[0]!), '-o', 'wide');
  t.regex(wide, /MEDIA/);
  t.regex(wide.split('\n')[1] ?? '', new RegExp(`\\s${nd.status?.node?.drive?.media}\\s`));
});

test.serial('a mounted drive is refused, with where it is mounted', async (t) => {
  const nd = await disk(driveName(WWNS[2]!), (x) => x.status?.node?.phase === 'Error', 'Error');
  t.regex(nd.status?.node?.message ?? '', new RegExp(`is not taken: is mounted at ${mounted}`));
});

test.serial('a reserved drive has a marker a person can ls in the disk dir; pulled, it is Missing with its reservation kept', async (t) => {
  const name = driveName(WWNS[1]!);
  const marker = join(diskDir, `drive-wwn-${WWNS[1]}.reserved`);
  await disk(name, (x) => x.status?.node?.phase === 'Available', 'Available');
  await kubectl('patch', 'nodedisk', name, '--type=merge', '-p', '{"spec":{"desired":{"state":"Reserved","owner":"team-db"}}}');
  await disk(name, (x) => x.status?.node?.phase === 'Reserved', 'Reserved');
  t.true(existsSync(marker));

  // udev removes a pulled drive's names.
  await unlink(join(byIdDir, `wwn-0x${WWNS[1]}`));
  const missing = await disk(name, (x) => x.status?.node?.phase === 'Missing', 'Missing');
  t.regex(missing.status?.node?.message ?? '', /drive .* is not on the node/);
  t.is(missing.spec.desired?.state, 'Reserved');
  t.is(missing.status?.node?.drive?.device, loops[1]!.replace('/dev/', ''), 'its facts are kept while it is gone');
  t.true(existsSync(marker));

  // Plugged back (a reboot may give it another kernel name: the NodeDisk is the same).
  await symlink(`../../${loops[1]!.replace('/dev/', '')}`, join(byIdDir, `wwn-0x${WWNS[1]}`));
  await disk(name, (x) => x.status?.node?.phase === 'Reserved', 'Reserved again');

  await kubectl('patch', 'nodedisk', name, '--type=merge', '-p', '{"spec":{"desired":{"state":"Available","owner":""}}}');
  await disk(name, (x) => x.status?.node?.phase === 'Available', 'Available after release');
  t.false(existsSync(marker));
});

test.serial('a disk image whose name begins with drive- is not taken for a drive', async (t) => {
  await writeFile(join(diskDir, `drive-wwn-${WWNS[0]}.img`), Buffer.alloc(4096));
  await eventually('the agent says why', async () => /begins with drive-/.test(agent!.logs()) || undefined, 20_000);
  const nd = await client().get(driveName(WWNS[0]!));
  t.is(nd.spec.path, `${DEFAULT_BY_ID_DIR}/wwn-0x${WWNS[0]}`);
  t.is(nd.status?.node?.phase, 'Available');
});

test.serial('a reserved drive released with a wipe is wiped by the node side with BLKZEROOUT: its bytes are zeroes after, and it is blank and free', async (t) => {
  const name = driveName(WWNS[0]!);
  await disk(name, (x) => x.status?.node?.phase === 'Available', 'Available');
  // Reserved first: its marker stays until the wipe is done, as an image's does.
  await kubectl('patch', 'nodedisk', name, '--type=merge', '-p', '{"spec":{"desired":{"state":"Reserved","owner":"team-db"}}}');
  await disk(name, (x) => x.status?.node?.phase === 'Reserved', 'Reserved');
  const fh = await open(loops[0]!, 'r+');
  await fh.write(Buffer.alloc(MiB, 0xab), 0, MiB, 5 * MiB);
  await fh.sync();
  await kubectl('patch', 'nodedisk', name, '--type=merge', '-p', '{"spec":{"desired":{"state":"Available","owner":"","wipe":"3f1e0c2a-drive-wipe"}}}');
  const nd = await disk(name, (x) => x.status?.node?.wipedFor === '3f1e0c2a-drive-wipe' && x.status.node.phase === 'Available', 'wiped');
  t.falsy(nd.status?.node?.holdsData, 'a drive wiped by us is blank');
  const back = Buffer.alloc(MiB);
  await fh.read(back, 0, MiB, 5 * MiB);
  await fh.close();
  t.true(
    back.every((b) => b === 0),
    'the bytes written before the wipe are zeroes',
  );
  t.deepEqual(
    (await readdir(diskDir)).filter((f) => /\.wiped?$/.test(f)),
    [],
    'the request and its answer are gone',
  );
});

test.serial('a mounted drive is not wiped: the agent waits for it to be unmounted, then the node side wipes it', async (t) => {
  const name = driveName(WWNS[2]!);
  await disk(name, (x) => x.status?.node?.phase === 'Error', 'refused while mounted');
  await kubectl('patch', 'nodedisk', name, '--type=merge', '-p', '{"spec":{"desired":{"state":"Available","wipe":"7c2d-mounted-wipe"}}}');
  const waiting = await disk(name, (x) => x.status?.node?.phase === 'Wiping', 'Wiping');
  t.regex(waiting.status?.node?.message ?? '', new RegExp(`waiting to wipe drive .* it is mounted at ${mounted}`));
  t.false(existsSync(join(diskDir, `drive-wwn-${WWNS[2]}.wipe`)), 'nothing is asked of the node side meanwhile');
  await run('umount', [mounted!]);
  mounted = undefined;
  await disk(name, (x) => x.status?.node?.wipedFor === '7c2d-mounted-wipe' && x.status.node.phase === 'Available', 'wiped once unmounted');
  const probe = await run('blkid', ['-p', loops[2]!]).then(
    () => 0,
    (e: { code: number }) => e.code,
  );
  t.is(probe, 2, 'no filesystem signature is left (blkid finds nothing)');
});

test.serial("the node side's own checks: a device mounted from, or a by-id name that now leads elsewhere, is never wiped", async (t) => {
  const dir = await mkdtemp(join(work, 'wiper-'));
  const wiper = new DriveWiper({ diskDir: dir, byIdDir, log: createLogger('wiper-test', { level: 'error' }), sweepMs: 3_600_000 });
  const ask = async (diskID: string, byIdName: string, device: string) => {
    await writeFile(join(dir, `${diskID}.wipe`), formatWipeRequest({ token: `t-${diskID.slice(-4)}`, byIdName, device }));
    await wiper.look(diskID, true);
    return parseWipeAnswer(await readFile(join(dir, `${diskID}.wiped`), 'utf8'));
  };
  const devOf = async (dev: string) => (await readFile(`/sys/class/block/${dev.replace('/dev/', '')}/dev`, 'utf8')).trim();
  // Held: mounted from it, as a staged volume would be.
  const mnt = join(dir, 'mnt');
  await mkdir(mnt);
  await run('mkfs.ext4', ['-q', loops[1]!]);
  await run('mount', [loops[1]!, mnt]);
  try {
    const busy = await ask('drive-wwn-busy', `wwn-0x${WWNS[1]}`, await devOf(loops[1]!));
    t.like(busy, { ok: false });
    t.regex(busy && !busy.ok ? busy.message : '', /Device or resource busy/);
  } finally {
    await run('umount', [mnt]);
  }
  // The name now leads to another device than the agent saw.
  const moved = await ask('drive-wwn-moved', `wwn-0x${WWNS[1]}`, await devOf(loops[0]!));
  t.regex(moved && !moved.ok ? moved.message : '', /now leads to device \d+:\d+, not \d+:\d+ as when the agent asked/);
  // None of those wiped it: its filesystem is still there.
  t.is((await run('blkid', ['-p', '-s', 'TYPE', '-o', 'value', loops[1]!])).stdout.trim(), 'ext4');
});

test.serial('a wipe goes a step at a time: it says how far it got, resumes there after a restart, and stops at once when its request is withdrawn', async (t) => {
  const dir = await mkdtemp(join(work, 'wiper-steps-'));
  const diskID = 'drive-wwn-steps';
  const device = (await readFile(`/sys/class/block/${loops[1]!.replace('/dev/', '')}/dev`, 'utf8')).trim();
  const request = formatWipeRequest({ token: 'steps-1', byIdName: `wwn-0x${WWNS[1]}`, device });
  await writeFile(join(dir, `${diskID}.wipe`), request);
  const mark = async (offset: number) => {
    const fh = await open(loops[1]!, 'r+');
    await fh.write(Buffer.alloc(4096, 0xab), 0, 4096, offset);
    await fh.sync();
    await fh.close();
  };
  const at = async (offset: number) => {
    const fh = await open(loops[1]!, 'r');
    const b = Buffer.alloc(4096);
    await fh.read(b, 0, 4096, offset);
    await fh.close();
    return b.every((x) => x === 0) ? 'zeroes' : 'data';
  };
  const wiper = (afterStep?: (done: number) => Promise<void>) =>
    new DriveWiper({ diskDir: dir, byIdDir, log: createLogger('wiper-test', { level: 'error' }), sweepMs: 3_600_000, stepBytes: 8 * MiB, progressMs: 0, ...(afterStep ? { afterStep } : {}) });
  const progress = async () => parseWipeProgress((await readFile(join(dir, `${diskID}.wiping`), 'utf8').catch(() => '')) ?? '');

  // Stopped in the middle, as a killed csi-node would be: the progress says the two steps it finished.
  await mark(40 * MiB);
  let seen: DriveWipeProgress | undefined;
  const crashed = await wiper(async (done) => {
    if (done === 24 * MiB) {
      seen = await progress();
      throw new Error('killed');
    }
  })
    .look(diskID, true)
    .then(
      () => 'finished',
      (e: Error) => e.message,
    );
  t.is(crashed, 'killed');
  t.like(seen, { token: 'steps-1', device, doneBytes: 16 * MiB, totalBytes: 80 * MiB });
  // The agent shows it.
  const drive = { facts: {}, refusals: [], mountedAt: [], byIdName: `wwn-0x${WWNS[1]}`, device } as unknown as DriveInfo;
  const state = await wipeDriveStep(dir, diskID, 'steps-1', drive, '/dev/disk/by-id/x');
  t.deepEqual(state, { kind: 'waiting', message: 'wiping drive /dev/disk/by-id/x (wipe request steps-1): 20% zeroed (16 MiB of 80 MiB) by the node side' });

  // Restarted: it goes on from 16 MiB, so bytes written below that since are not touched again.
  await mark(4 * MiB);
  await wiper().look(diskID, true);
  t.like(parseWipeAnswer(await readFile(join(dir, `${diskID}.wiped`), 'utf8')), { token: 'steps-1', ok: true, bytes: 80 * MiB });
  t.is(await at(4 * MiB), 'data', 'resumed at 16 MiB: the first steps were not done again');
  t.is(await at(40 * MiB), 'zeroes');
  t.is(await progress(), undefined, 'no progress is left once it is done');

  // Withdrawn after its first step (the drive reserved again): nothing past that step is zeroed, no answer.
  await rm(join(dir, `${diskID}.wiped`));
  await writeFile(join(dir, `${diskID}.wipe`), formatWipeRequest({ token: 'steps-2', byIdName: `wwn-0x${WWNS[1]}`, device }));
  await mark(40 * MiB);
  await wiper(async (done) => {
    if (done === 8 * MiB) await rm(join(dir, `${diskID}.wipe`));
  }).look(diskID, true);
  t.is(await at(40 * MiB), 'data', 'the new holder keeps what it wrote');
  t.false(existsSync(join(dir, `${diskID}.wiped`)), 'no answer for a withdrawn request');
  t.is(await progress(), undefined);
});

test.serial('a drive moved to another node appears there under its identity, and the NodeDisk it left says where it went', async (t) => {
  const nodeB = 'node-drives-b';
  const byIdB = join(work, 'by-id-b');
  const disksB = join(work, 'disks-b');
  await mkdir(byIdB);
  await mkdir(disksB);
  const controller = await startController(controlPlane(), { logDir: join(work, 'logs') });
  const agentB = await startAgent(controlPlane(), {
    node: nodeB,
    diskDir: disksB,
    logDir: join(work, 'logs'),
    rescanInterval: '500ms',
    extraArgs: ['--drive=by-id=wwn-0x5000c50000d71a*', `--by-id-dir=${byIdB}`, `--host-by-id-dir=${DEFAULT_BY_ID_DIR}`],
  });
  try {
    const wwn = WWNS[1]!;
    await disk(driveName(wwn), (x) => x.status?.node?.phase === 'Available', 'Available on the first node');
    // Pulled from the first node, plugged into the second.
    await unlink(join(byIdDir, `wwn-0x${wwn}`));
    await symlink(`../../${loops[1]!.replace('/dev/', '')}`, join(byIdB, `wwn-0x${wwn}`));
    const there = await disk(nodeDiskName(nodeB, `drive-wwn-${wwn}`), (x) => x.status?.node?.phase === 'Available', 'Available on the second node');
    t.is(there.spec.diskID, `drive-wwn-${wwn}`, 'the same identity, so the same diskID');
    const left = await disk(
      driveName(wwn),
      (x) => x.status?.node?.phase === 'Missing' && /moved there/.test(x.status.conditions?.find((c) => c.type === 'Ready')?.message ?? ''),
      'Missing, saying where it went',
    );
    t.regex(left.status?.conditions?.find((c) => c.type === 'Ready')?.message ?? '', new RegExp(`drive drive-wwn-${wwn} is on node ${nodeB} now \\(moved there\\): delete this NodeDisk`));
  } catch (err) {
    console.error(`----- controller -----\n${controller.logs(4000)}\n----- ${agentB.name} -----\n${agentB.logs(4000)}`);
    throw err;
  } finally {
    await agentB.stop();
    await controller.stop();
  }
});

test.serial('the node side stages a drive itself (no loop device), records it, and the agent waits for the unstage before a wipe', async (t) => {
  const wwn = WWNS[0]!;
  const name = driveName(wwn);
  const diskID = `drive-wwn-${wwn}`;
  await disk(name, (x) => x.status?.node?.phase === 'Available' && !x.status.node.holdsData, 'Available and blank');
  const device = await openDrive(byIdDir, `wwn-0x${wwn}`);
  t.is(device, loops[0]!);
  await t.throwsAsync(openDrive(byIdDir, 'wwn-0xnothing'), { message: /is not on this node/ });
  await t.throwsAsync(openDrive(byIdDir, '../../sda'), { message: /is not a by-id name/ });

  const stagingPath = join(work, 'csi', 'staging', diskID);
  const targetPath = join(work, 'csi', 'pod', 'volume');
  const request = { device, diskID, diskDir, stagingPath, mode: 'filesystem' as const, fsType: 'ext4', mountOptions: [], readOnly: false };
  await stageDrive(request);
  await stageDrive(request); // repeated: nothing twice
  const staged = parseMountInfo(await readFile('/proc/self/mountinfo', 'utf8')).filter((m) => m.mountPoint === stagingPath);
  t.is(staged.length, 1);
  t.is(staged[0]!.fsType, 'ext4');
  t.true(existsSync(join(diskDir, `${diskID}.staged`)), 'recorded for the agent');
  await publish({ device, stagingPath, targetPath, mode: 'filesystem' });
  // Undone whatever happens below: the mounts must not outlive the test.
  t.teardown(async () => {
    await unpublish(targetPath).catch(() => undefined);
    await unstage({ stagingPath, diskDir }).catch(() => undefined);
  });
  await writeFile(join(targetPath, 'data'), 'team bytes');

  // Held by a volume, then released with a wipe while still staged: the agent waits.
  await kubectl('patch', 'nodedisk', name, '--type=merge', '-p', '{"spec":{"desired":{"state":"Reserved","owner":"team-db"}}}');
  await disk(name, (x) => x.status?.node?.phase === 'Reserved', 'Reserved');
  await kubectl('patch', 'nodedisk', name, '--type=merge', '-p', '{"spec":{"desired":{"state":"Available","owner":"","wipe":"w-staged-drive"}}}');
  const waiting = await disk(name, (x) => x.status?.node?.phase === 'Wiping', 'Wiping');
  t.regex(waiting.status?.node?.message ?? '', new RegExp(`it is staged at ${stagingPath} on this node`));
  t.false(existsSync(join(diskDir, `${diskID}.wipe`)), 'nothing is asked of the node side while it is staged');

  await unpublish(targetPath);
  await unstage({ stagingPath, diskDir });
  t.false(existsSync(join(diskDir, `${diskID}.staged`)));
  await disk(name, (x) => x.status?.node?.wipedFor === 'w-staged-drive' && x.status.node.phase === 'Available', 'wiped once unstaged');
  const probe = await run('blkid', ['-p', device]).then(
    () => 0,
    (e: { code: number }) => e.code,
  );
  t.is(probe, 2, 'the filesystem the volume had is gone');

  // Block mode: the device node itself, bound onto the target file; recorded, then forgotten.
  const blockStaging = join(work, 'csi', 'staging-block', diskID);
  const blockTarget = join(work, 'csi', 'pod-block', 'dev');
  await stageDrive({ ...request, stagingPath: blockStaging, mode: 'block' });
  await publish({ device, stagingPath: blockStaging, targetPath: blockTarget, mode: 'block' });
  const st = await stat(blockTarget);
  t.true(st.isBlockDevice());
  t.true(existsSync(join(diskDir, `${diskID}.staged`)));
  await unpublish(blockTarget);
  await unstage({ stagingPath: blockStaging, diskDir });
  t.false(existsSync(join(diskDir, `${diskID}.staged`)));
});

test.serial('a drive mounted or held elsewhere on the node is never staged, in Filesystem or Block mode, and nothing is recorded for it', async (t) => {
  const device = loops[1]!;
  const diskID = 'drive-wwn-held';
  await run('mkfs.ext4', ['-q', '-F', device]);
  const held = join(work, 'held');
  await mkdir(held, { recursive: true });
  await run('mount', [device, held]);
  try {
    const request = { device, diskID, diskDir, fsType: 'ext4', mountOptions: [], readOnly: false };
    for (const mode of ['filesystem', 'block'] as const) {
      const stagingPath = join(work, 'csi', `staging-held-${mode}`);
      await t.throwsAsync(stageDrive({ ...request, stagingPath, mode }), { message: /is in use on this node .*it is not staged/ }, mode);
      t.false(existsSync(join(diskDir, `${diskID}.staged`)), `${mode}: no record`);
      t.is(parseMountInfo(await readFile('/proc/self/mountinfo', 'utf8')).filter((m) => m.mountPoint === stagingPath).length, 0, `${mode}: not mounted a second time`);
    }
  } finally {
    // A stage that wrongly went through must not outlive the test either.
    for (const mode of ['filesystem', 'block']) await run('umount', [join(work, 'csi', `staging-held-${mode}`)]).catch(() => undefined);
    await run('umount', [held]);
  }
});

/** A partition-scanning loop device named by `wwn` in the by-id dir, blank. */
async function partitionableDrive(backing: string, wwn: string): Promise<string> {
  const file = join(work, 'backing', backing);
  await writeFile(file, '');
  await truncate(file, 64 * MiB);
  const dev = (await run('losetup', ['--find', '--show', '--partscan', file])).stdout.trim();
  loops.push(dev);
  await symlink(`../../${dev.replace('/dev/', '')}`, join(byIdDir, `wwn-0x${wwn}`));
  return dev;
}

/**
 * Writes an MBR with one Linux partition and tells the kernel about it, as a Block tenant would (partx -a:
 * BLKPG, which needs no partition parser in the kernel). Returns the partition's kernel name.
 */
async function partition(dev: string): Promise<string> {
  const mbr = Buffer.alloc(512);
  mbr.writeUInt8(0x83, 446 + 4);
  mbr.writeUInt32LE(2048, 446 + 8);
  mbr.writeUInt32LE((64 * MiB) / 512 - 2048, 446 + 12);
  mbr.writeUInt16LE(0xaa55, 510);
  const fh = await open(dev, 'r+');
  await fh.write(mbr, 0, 512, 0);
  await fh.sync();
  await fh.close();
  await run('partx', ['-a', dev]);
  return `${dev.replace('/dev/', '')}p1`;
}

const kernelHas = (dev: string, part: string) => existsSync(`/sys/block/${dev.replace('/dev/', '')}/${part}`);

test.serial('a drive its holder partitioned, released with a wipe, is free again: the kernel has dropped the partitions too, so they are no refusal', async (t) => {
  const wwn = '5000c50000d71a04';
  const dev = await partitionableDrive('drive-parts', wwn);
  const name = driveName(wwn);
  await disk(name, (x) => x.status?.node?.phase === 'Available', 'Available');
  await kubectl('patch', 'nodedisk', name, '--type=merge', '-p', '{"spec":{"desired":{"state":"Reserved","owner":"team-parts"}}}');
  await disk(name, (x) => x.status?.node?.phase === 'Reserved', 'Reserved');
  const part = await partition(dev);
  t.true(kernelHas(dev, part), 'the kernel shows the partition');

  await kubectl('patch', 'nodedisk', name, '--type=merge', '-p', '{"spec":{"desired":{"state":"Available","owner":"","wipe":"w-partitioned"}}}');
  const nd = await disk(name, (x) => x.status?.node?.wipedFor === 'w-partitioned' && x.status.node.phase !== 'Wiping', 'wiped');
  t.is(nd.status?.node?.phase, 'Available', nd.status?.node?.message);
  t.false(kernelHas(dev, part), 'the kernel no longer has the partition');
});

test.serial('a partition still open when its wipe ends is dropped from the kernel once it is let go', async (t) => {
  const wwn = '5000c50000d71a05';
  const dev = await partitionableDrive('drive-parts-held', wwn);
  const part = await partition(dev);
  const dir = await mkdtemp(join(work, 'wiper-parts-'));
  const diskID = 'drive-wwn-held';
  const device = (await readFile(`/sys/class/block/${dev.replace('/dev/', '')}/dev`, 'utf8')).trim();
  await writeFile(join(dir, `${diskID}.wipe`), formatWipeRequest({ token: 'held-1', byIdName: `wwn-0x${wwn}`, device }));
  // Something has the partition open when the zeroing is done (a scan, a late reader): the kernel refuses
  // to re-read the table, or to delete the partition, until it is closed.
  let holder: Awaited<ReturnType<typeof open>> | undefined;
  const attempts: number[] = [];
  const wiper = new DriveWiper({
    diskDir: dir,
    byIdDir,
    log: createLogger('wiper-test', { level: 'error' }),
    sweepMs: 3_600_000,
    afterStep: async () => {
      holder = await open(`/dev/${part}`, 'r');
    },
    partitionsKept: async (attempt) => {
      attempts.push(attempt);
      await holder?.close();
      holder = undefined;
    },
  });
  try {
    await wiper.look(diskID, true);
  } finally {
    await holder?.close();
  }
  t.like(parseWipeAnswer(await readFile(join(dir, `${diskID}.wiped`), 'utf8')), { token: 'held-1', ok: true });
  t.deepEqual(attempts, [1], 'the first attempt met the open partition');
  t.false(kernelHas(dev, part), 'the kernel no longer has the partition');
});

test.serial("after its wipe, a drive is reported as it is now, not as the agent's last scan saw it: the partitions the wipe dropped are no refusal", async (t) => {
  // An agent that scans its drives only when told (a rescan an hour apart), so its view before the wipe
  // stays its last full scan: the report after the wipe must come from a look taken after it.
  const node = 'node-drives-stale';
  const dir = await mkdtemp(join(work, 'stale-'));
  const ids = join(dir, 'by-id');
  const disks = join(dir, 'disks');
  await mkdir(ids);
  await mkdir(disks);
  const logs = join(dir, 'logs');
  const own = await startAgent(controlPlane(), {
    node,
    diskDir: disks,
    logDir: logs,
    rescanInterval: '1h',
    extraArgs: ['--drive=by-id=wwn-0x5000c50000d71b*', `--by-id-dir=${ids}`, `--host-by-id-dir=${DEFAULT_BY_ID_DIR}`],
  });
  const side = startCsiNode({ logDir: logs, csiAddress: join(dir, 'csi.sock'), node, diskDir: disks, extraArgs: [`--by-id-dir=${ids}`] });
  const nameOf = (wwn: string) => nodeDiskName(node, `drive-wwn-${wwn}`);
  const plug = async (file: string, wwn: string, partscan: boolean) => {
    await writeFile(join(dir, file), '');
    await truncate(join(dir, file), 64 * MiB);
    const dev = (await run('losetup', ['--find', '--show', ...(partscan ? ['--partscan'] : []), join(dir, file)])).stdout.trim();
    loops.push(dev);
    await symlink(`../../${dev.replace('/dev/', '')}`, join(ids, `wwn-0x${wwn}`));
    return dev;
  };
  try {
    const dev = await plug('held', '5000c50000d71b01', true);
    const name = nameOf('5000c50000d71b01');
    await disk(name, (x) => x.status?.node?.phase === 'Available', 'Available');
    await kubectl('patch', 'nodedisk', name, '--type=merge', '-p', '{"spec":{"desired":{"state":"Reserved","owner":"team-stale"}}}');
    await disk(name, (x) => x.status?.node?.phase === 'Reserved', 'Reserved');
    const part = await partition(dev);
    // A drive plugged now makes the agent scan: that scan sees the partition, and is its last before the wipe.
    await plug('probe', '5000c50000d71b02', false);
    await disk(nameOf('5000c50000d71b02'), (x) => x.status?.node?.phase === 'Available', 'the probe drive Available');

    await kubectl('patch', 'nodedisk', name, '--type=merge', '-p', '{"spec":{"desired":{"state":"Available","owner":"","wipe":"w-stale"}}}');
    const nd = await disk(name, (x) => x.status?.node?.wipedFor === 'w-stale' && x.status.node.phase !== 'Wiping', 'wiped');
    t.false(kernelHas(dev, part), 'the wipe dropped the partition');
    t.is(nd.status?.node?.phase, 'Available', nd.status?.node?.message);
  } finally {
    if (!t.passed) for (const p of [own, side]) console.error(`----- ${p.name} -----\n${p.logs(6000)}`);
    await own.stop();
    await side.stop();
  }
});
