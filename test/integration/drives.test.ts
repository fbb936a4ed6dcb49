// Drives as NodeDisks (docs/adr/0044-real-drives.md): the real agent process, with its node-bound identity
// and the admission policies, finds real block devices (loop devices over files outside the disk dir, named
// in a by-id dir as udev names a drive) through sysfs, names them by identity, reports their facts, refuses
// a mounted one with the reason, keeps their reservation markers, and keeps a pulled drive's reservation.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink, truncate, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { DEFAULT_BY_ID_DIR, LABEL_MEDIA } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { startAgent, type Program } from '../../hack/lib/programs.ts';
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
});

test.afterEach.always((t) => {
  if (!t.passed && agent) console.error(`----- ${agent.name} -----\n${agent.logs(6000)}`);
});

test.after.always(async () => {
  await agent?.stop();
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

test.serial('a wipe asked of a drive is refused in words, and the drive stays held: nobody gets its bytes', async (t) => {
  const name = driveName(WWNS[0]!);
  await disk(name, (x) => x.status?.node?.phase === 'Available', 'Available');
  await kubectl('patch', 'nodedisk', name, '--type=merge', '-p', '{"spec":{"desired":{"state":"Available","wipe":"3f1e0c2a-drive-wipe"}}}');
  const nd = await disk(name, (x) => x.status?.node?.phase === 'Error', 'Error');
  t.regex(nd.status?.node?.message ?? '', /cannot wipe drive .* wipes disk images only/);
  t.not(nd.status?.node?.wipedFor, '3f1e0c2a-drive-wipe');
});
