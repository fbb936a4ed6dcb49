// Drives on the local 3-node cluster (root only; `npm run test:e2e`), with the install as deployed there:
// each node gets a stand-in drive (a loop device over a file outside its disk dir, named in that node's own
// by-id dir as udev names a drive, since the nodes share one kernel and /dev). The agents, in their
// containers, find them through sysfs and their by-id names, beside the disk images; a reservation leaves
// the drive's marker on its node; a wipe is done by the csi-node container of that node's agent pod; a
// pulled drive is Missing with its reservation kept. One cluster for the file; the tests run in order.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { open, symlink, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { imageRef } from '../../hack/cluster/images.ts';
import { onNode, until } from '../../hack/cluster/run.ts';
import { attachStandInDrives, detachStandInDrives, type StandInDrive, standInWwn } from '../../hack/cluster/stand-in-drives.ts';
import { DISK_DIR, NODE_NAMES } from '../../hack/cluster/topology.ts';
import { clusterForFile, MINUTES, nodeDisksE2E } from './_nodedisks.ts';

const MiB = 2 ** 20;
const cluster = clusterForFile(test);
const { dataDir, env } = cluster;
const { k } = nodeDisksE2E(dataDir, env, cluster.kubectl);

/** The WWN of node i's stand-in drive: what the local cluster's agents select (`by-id=wwn-0x5000d15c*`). */
const wwn = (i: number) => standInWwn(0, i, 1);
const drives: StandInDrive[] = [];

test.after.always(() => detachStandInDrives(drives));

const jsonpath = (name: string, path: string) => k(['get', 'nodedisk', name, '-o', `jsonpath=${path}`]);

test.serial("each node's chosen drive is a NodeDisk of that node named by its WWN, beside the disk images, with its facts", async (t) => {
  t.timeout(10 * MINUTES);
  drives.push(...attachStandInDrives(dataDir, [128 * MiB]));
  for (const d of drives) {
    const line = await until(
      `${d.nodeDisk} is Available`,
      3 * MINUTES,
      () => jsonpath(d.nodeDisk, '{.spec.nodeName} {.status.node.phase} {.status.node.capacityBytes} {.status.node.drive.device} {.metadata.labels.localtest\\.example\\.com/media}'),
      (l) => l.split(' ')[1] === 'Available',
    );
    const [node, , capacity, device, media] = line.split(' ');
    t.is(node, d.node, 'a NodeDisk of the node whose by-id dir names it, though every node sees every loop device');
    t.is(Number(capacity), 128 * MiB);
    t.is(device, d.device.replace('/dev/', ''));
    t.true(['ssd', 'hdd'].includes(media ?? ''), media);
    t.is(await jsonpath(d.nodeDisk, '{.spec.path}'), `/var/lib/node-disks-manager/by-id/wwn-0x${wwn(NODE_NAMES.indexOf(d.node))}`);
  }
  // The images are there as before.
  t.is(await jsonpath(`node-disk-${NODE_NAMES[0]}-disk1`, '{.status.node.phase}'), 'Available');
});

test.serial("a reserved drive's marker is on its node; released with a wipe, csi-node zeroes it and it is blank and free", async (t) => {
  t.timeout(8 * MINUTES);
  const d = drives[1]!;
  await k(['patch', 'nodedisk', d.nodeDisk, '--type=merge', '-p', '{"spec":{"desired":{"state":"Reserved","owner":"team-e2e"}}}']);
  await until(
    `the marker of ${d.nodeDisk} is on ${d.node}`,
    2 * MINUTES,
    () => onNode(env, d.node, ['ls', '-1', DISK_DIR]),
    (ls) => ls.split('\n').includes(`drive-wwn-${wwn(1)}.reserved`),
  );
  // The team's bytes, written to the drive while it holds it.
  const fh = await open(d.device, 'r+');
  await fh.write(Buffer.alloc(MiB, 0x5a), 0, MiB, 7 * MiB);
  await fh.sync();
  await k(['patch', 'nodedisk', d.nodeDisk, '--type=merge', '-p', '{"spec":{"desired":{"state":"Available","owner":"","wipe":"e2e-drive-wipe-1"}}}']);
  await until(
    `${d.nodeDisk} wiped and free`,
    3 * MINUTES,
    () => jsonpath(d.nodeDisk, '{.status.node.phase} {.status.node.wipedFor} {.status.node.holdsData} {.status.node.message}'),
    (l) => l.startsWith('Available e2e-drive-wipe-1  '),
  );
  const back = Buffer.alloc(MiB);
  await fh.read(back, 0, MiB, 7 * MiB);
  await fh.close();
  t.true(
    back.every((b) => b === 0),
    "the team's bytes are zeroes",
  );
  const ls = await onNode(env, d.node, ['ls', '-1', DISK_DIR]);
  t.false(ls.includes(`drive-wwn-${wwn(1)}`), `no marker, request or answer is left: ${ls}`);
});

test.serial('a pulled drive is Missing with its reservation kept, and back under its identity when plugged again', async (t) => {
  t.timeout(6 * MINUTES);
  const d = drives[2]!;
  await k(['patch', 'nodedisk', d.nodeDisk, '--type=merge', '-p', '{"spec":{"desired":{"state":"Reserved","owner":"team-e2e"}}}']);
  await until(
    `${d.nodeDisk} Reserved`,
    2 * MINUTES,
    () => jsonpath(d.nodeDisk, '{.status.node.phase}'),
    (p) => p === 'Reserved',
  );
  await unlink(d.link);
  await until(
    `${d.nodeDisk} Missing`,
    3 * MINUTES,
    () => jsonpath(d.nodeDisk, '{.status.node.phase} {.spec.desired.state}'),
    (l) => l === 'Missing Reserved',
  );
  await symlink(`../../${d.device.replace('/dev/', '')}`, d.link);
  await until(
    `${d.nodeDisk} Reserved again`,
    3 * MINUTES,
    () => jsonpath(d.nodeDisk, '{.status.node.phase}'),
    (p) => p === 'Reserved',
  );
  t.pass();
});

test.serial("a PVC of a drive class gets a wiped drive straight (no loop device): the pod's bytes are on the drive, and deleting the PVC wipes it for the next team", async (t) => {
  t.timeout(10 * MINUTES);
  const d = drives[1]!; // the one wiped above: the only blank drive
  const write = (file: string, manifest: unknown) => {
    const path = join(dataDir, `${file}.json`);
    return writeFile(path, JSON.stringify(manifest)).then(() => k(['apply', '-f', path]));
  };
  await write('drive-class', {
    apiVersion: 'storage.k8s.io/v1',
    kind: 'StorageClass',
    metadata: { name: 'nodedisks-drives' },
    provisioner: 'nodedisks.localtest.example.com',
    volumeBindingMode: 'WaitForFirstConsumer',
    reclaimPolicy: 'Delete',
    parameters: { 'csi.storage.k8s.io/fstype': 'ext4', diskSelector: 'localtest.example.com/media in (ssd,hdd)' },
  });
  await k(['create', 'namespace', 'team-drives']);
  await write('drive-pvc', {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'data', namespace: 'team-drives' },
    spec: { storageClassName: 'nodedisks-drives', accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '64Mi' } } },
  });
  const script = "require('fs').writeFileSync('/data/proof', 'team-drives bytes'); require('fs').fsyncSync(require('fs').openSync('/data/proof', 'r')); setInterval(() => {}, 1 << 30);";
  await write('drive-pod', {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'app', namespace: 'team-drives' },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [{ name: 'app', image: imageRef('node-disks-agent'), imagePullPolicy: 'Never', command: ['/nodejs/bin/node', '-e', script], volumeMounts: [{ name: 'd', mountPath: '/data' }] }],
      volumes: [{ name: 'd', persistentVolumeClaim: { claimName: 'data' } }],
    },
  });
  const line = await until(
    'the pod Running',
    4 * MINUTES,
    () => k(['-n', 'team-drives', 'get', 'pod', 'app', '-o', 'jsonpath={.status.phase} {.spec.nodeName}']),
    (l) => l.startsWith('Running '),
  );
  t.is(line.split(' ')[1], d.node, "scheduled where the class's only blank drive is");
  const pv = await k(['-n', 'team-drives', 'get', 'pvc', 'data', '-o', 'jsonpath={.spec.volumeName}']);
  t.is((await k(['get', 'pv', pv, '-o', 'jsonpath={.spec.csi.volumeHandle}'])).split('/')[0], d.nodeDisk);
  // Straight to the drive: its filesystem is what the node mounted, and no loop device serves a drive.
  const fsOnDrive = execFileSync('blkid', ['-p', '-s', 'TYPE', '-o', 'value', d.device], { encoding: 'utf8' }).trim();
  t.is(fsOnDrive, 'ext4');
  t.false(execFileSync('losetup', ['-a'], { encoding: 'utf8' }).includes(`(${d.device})`), 'no loop device over the drive');

  await k(['-n', 'team-drives', 'delete', 'pod', 'app', '--wait=true']);
  await k(['-n', 'team-drives', 'delete', 'pvc', 'data', '--wait=true']);
  await until(
    `${d.nodeDisk} wiped and free again`,
    4 * MINUTES,
    () => jsonpath(d.nodeDisk, '{.spec.desired.state} {.status.node.phase} {.status.node.holdsData} {.status.node.wipedFor}'),
    (l) => /^Available Available {2}\S+$/.test(l) && !l.endsWith('e2e-drive-wipe-1'),
  );
  const probe = (() => {
    try {
      execFileSync('blkid', ['-p', d.device], { stdio: 'ignore' });
      return 0;
    } catch (err) {
      return (err as { status: number }).status;
    }
  })();
  t.is(probe, 2, "the team's filesystem is gone: the next team gets a blank drive");
});
