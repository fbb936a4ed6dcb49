// IO through a NodeDisks volume against the same storage outside Kubernetes, measured with fio (Debian's,
// hack/fio/fio.ts): `sudo npm run bench:io`. On the local cluster, node 1 gets a disk image and a
// stand-in drive (a loop device with direct I/O over a file in memory, hack/cluster/stand-in-drives.ts:
// the drive's own speed is the machine's, so what the NodeDisks path costs shows) of SIZE each. fio runs in a
// pod on a PVC of each (Filesystem: a file on the volume's ext4; Block: the device the pod is given), then
// on the host against the image file itself and the drive's device itself, and on ext4 made there (as the
// node side makes it: what a Filesystem volume adds without Kubernetes), with the same jobs: a
// sequential fill (not recorded), then 4k random read, 4k random write and 1 MiB sequential write, each
// ROUND_S seconds at iodepth 16 with --direct=1 and libaio. The ratios (volume / outside) are the figures;
// the records are appended to bench/results/io.jsonl. The whole sequence runs ROUNDS times (each
// storage wiped between runs) and each figure is the median of its rounds. Env: ROUND_S (default 10),
// SIZE_MIB (default 1024), ROUNDS (default 3).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { sh } from '../hack/cluster/host.ts';
import { base, fileEntry, unique } from '../hack/cluster/images.ts';
import { type Entry, ociArchive, writeArchive } from '../hack/cluster/oci.ts';
import { clusterEnv, seedNodeUniqueDisks, startCluster, until, UP, waitForOutput } from '../hack/cluster/run.ts';
import { attachStandInDrives, detachStandInDrives, type StandInDrive } from '../hack/cluster/stand-in-drives.ts';
import { NODE_NAMES, nodeSpec } from '../hack/cluster/topology.ts';
import { ensureBinaries } from '../hack/controlplane/binaries.ts';
import { ensureFio, type Fio, FIO_DEB_VERSION, linkedLibraries } from '../hack/fio/fio.ts';
import { startRecord } from './lib/results.ts';

if (process.getuid?.() !== 0) {
  console.error('error: bench:io runs on the local cluster, which needs root: sudo npm run bench:io');
  process.exit(2);
}

const MiB = 2 ** 20;
const ROUND_S = Number(process.env.ROUND_S ?? 10);
const SIZE_MIB = Number(process.env.SIZE_MIB ?? 1024);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
/** fio's file or region: half the disk, so a Filesystem volume's ext4 holds it with room to spare. */
const FILE_MIB = Math.floor(SIZE_MIB / 2);
const DRIVER = 'nodedisks.localtest.example.com';
const FIO_IMAGE = `localhost/nodedisks-bench/fio:${FIO_DEB_VERSION}`;
const NODE = NODE_NAMES[0]!;
const NS = 'bench-io';

const JOBS = [
  { name: 'randread-4k', args: ['--rw=randread', '--bs=4k'] },
  { name: 'randwrite-4k', args: ['--rw=randwrite', '--bs=4k'] },
  { name: 'seqwrite-1m', args: ['--rw=write', '--bs=1M'] },
] as const;

/** The fio command line, after the program's name, for a file or device at `target`. */
export function fioArgs(target: string): string[] {
  return [
    '--output-format=json',
    `--filename=${target}`,
    `--size=${FILE_MIB}M`,
    '--direct=1',
    '--ioengine=libaio',
    '--iodepth=16',
    // Every block written once first: the random writes then overwrite, on each path alike.
    '--name=fill',
    '--rw=write',
    '--bs=1M',
    ...JOBS.flatMap((j) => [`--name=${j.name}`, '--stonewall', '--time_based', `--runtime=${ROUND_S}`, ...j.args]),
  ];
}

interface FioJob {
  jobname: string;
  read: { iops: number; bw_bytes: number };
  write: { iops: number; bw_bytes: number };
}
type Result = Record<string, { iops: number; MiBps: number }>;

/** The recorded jobs of fio's JSON output (anything fio printed around it is ignored). */
export function parseFio(out: string): Result {
  const json = JSON.parse(out.slice(out.indexOf('{'), out.lastIndexOf('}') + 1)) as { jobs: FioJob[] };
  const r: Result = {};
  for (const j of JOBS) {
    const job = json.jobs.find((x) => x.jobname === j.name);
    if (!job) throw new Error(`fio reported no job ${j.name}`);
    const side = j.name.startsWith('randread') ? job.read : job.write;
    r[j.name] = { iops: Math.round(side.iops), MiBps: Number((side.bw_bytes / MiB).toFixed(1)) };
  }
  return r;
}

async function fioImage(fio: Fio): Promise<Entry[]> {
  const libs: Entry[] = [];
  for (const lib of (await linkedLibraries(fio.bin, fio.libDir)).found) {
    // The libraries the host lacks go where the dynamic loader looks by default; the host's keep their paths.
    libs.push(await fileEntry(lib, lib.startsWith(fio.libDir) ? `usr/lib/x86_64-linux-gnu/${basename(lib)}` : lib.slice(1), 0o755));
  }
  return unique([...base(), await fileEntry(fio.bin, 'usr/bin/fio', 0o755), ...libs]);
}

const fio = await ensureFio();
const kubectl = (await ensureBinaries()).kubectl;
const { dataDir, env } = clusterEnv();
const kubeconfig = join(dataDir, 'kubeconfig');
const k = (args: string[], timeoutMs = 300_000) => sh(kubectl, [`--kubeconfig=${kubeconfig}`, ...args], { timeoutMs });
const apply = (name: string, manifest: unknown) => {
  const f = join(dataDir, `bench-io-${name}.json`);
  writeFileSync(f, JSON.stringify(manifest));
  return k(['apply', '-f', f]);
};
const record = startRecord('io', { rounds: ROUNDS, roundSeconds: ROUND_S, diskMiB: SIZE_MIB, fileMiB: FILE_MIB, iodepth: 16, fio: FIO_DEB_VERSION });
const short = NODE.slice(NODE.lastIndexOf('-') + 1);
const image = join(nodeSpec(dataDir, NODE, 0).dir, 'node-disks-manager', 'disks', `${short}b1.img`);
const drives: StandInDrive[] = [];
const memDir = mkdtempSync('/dev/shm/nodedisks-bench-io-');

/** Runs fio in a pod on a PVC of the class of `what`, checks the volume is on `nodeDisk`, deletes both and waits for the disk to be free. */
async function onVolume(what: 'image' | 'drive', mode: 'Filesystem' | 'Block', nodeDisk: string): Promise<Result> {
  const key = `${what}-pvc-${mode.toLowerCase()}`;
  const target = mode === 'Block' ? '/dev/xvda' : '/data/fio.dat';
  await apply('pvc', {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'data', namespace: NS },
    spec: { storageClassName: `bench-io-${what}`, volumeMode: mode, accessModes: ['ReadWriteOnce'], resources: { requests: { storage: `${FILE_MIB + 64}Mi` } } },
  });
  await apply('pod', {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'fio', namespace: NS },
    spec: {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 0,
      nodeSelector: { 'kubernetes.io/hostname': NODE },
      containers: [
        {
          name: 'fio',
          image: FIO_IMAGE,
          imagePullPolicy: 'Never',
          args: fioArgs(target),
          ...(mode === 'Block' ? { volumeDevices: [{ name: 'd', devicePath: target }] } : { volumeMounts: [{ name: 'd', mountPath: '/data' }] }),
        },
      ],
      volumes: [{ name: 'd', persistentVolumeClaim: { claimName: 'data' } }],
    },
  });
  const phase = await until(
    `fio's pod on ${key} done`,
    (JOBS.length * ROUND_S + 300) * 1000,
    () => k(['-n', NS, 'get', 'pod', 'fio', '-o', 'jsonpath={.status.phase}']),
    (p) => p === 'Succeeded' || p === 'Failed',
  );
  const logs = await k(['-n', NS, 'logs', 'fio']);
  if (phase !== 'Succeeded') throw new Error(`fio failed on ${key}: ${logs.slice(-2000)}`);
  const pv = await k(['-n', NS, 'get', 'pvc', 'data', '-o', 'jsonpath={.spec.volumeName}']);
  const disk = (await k(['get', 'pv', pv, '-o', 'jsonpath={.spec.csi.volumeHandle}'])).split('/')[0]!;
  if (disk !== nodeDisk) throw new Error(`${key}: the volume is on ${disk}, not on ${nodeDisk}, the ${what} the bench measures`);
  await k(['-n', NS, 'delete', 'pod', 'fio', '--wait=true']);
  await k(['-n', NS, 'delete', 'pvc', 'data', '--wait=true']);
  await free(nodeDisk);
  return parseFio(logs);
}

const free = (name: string) =>
  until(
    `${name} free and blank`,
    300_000,
    () => k(['get', 'nodedisk', name, '-o', 'jsonpath={.spec.desired.state}/{.status.node.phase}/{.status.node.holdsData}']),
    (l) => /^Available\/Available\/(false)?$/.test(l),
  );

function fioOnHost(target: string): Promise<Result> {
  return sh(fio.bin, fioArgs(target), { env: { ...process.env, LD_LIBRARY_PATH: fio.libDir }, timeoutMs: (JOBS.length * ROUND_S + 300) * 1000 }).then(parseFio);
}

/** fio on a file of ext4 made on `device` (or on the image, through a loop device of its own), then all undone. */
async function fioOnHostExt4(device: string | undefined): Promise<Result> {
  const dev = device ?? (await sh('losetup', ['--find', '--show', '--direct-io=on', image])).trim();
  const mnt = mkdtempSync(join(dataDir, 'bench-io-ext4-'));
  try {
    await sh('mkfs.ext4', ['-F', '-q', dev]);
    await sh('mount', ['-t', 'ext4', dev, mnt]);
    try {
      return await fioOnHost(join(mnt, 'fio.dat'));
    } finally {
      await sh('umount', [mnt]);
    }
  } finally {
    if (!device) await sh('losetup', ['--detach', dev]);
    rmSync(mnt, { recursive: true, force: true });
  }
}

/** Each job's median over the rounds. */
function medianOf(rs: Result[]): Result {
  const med = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    const m = Math.floor(s.length / 2);
    return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
  };
  return Object.fromEntries(JOBS.map((j) => [j.name, { iops: Math.round(med(rs.map((r) => r[j.name]!.iops))), MiBps: Number(med(rs.map((r) => r[j.name]!.MiBps)).toFixed(1)) }]));
}

const run = startCluster(env);
try {
  await waitForOutput(run, UP, 40 * 60_000);
  const archive = join(dataDir, 'fio-image.tar');
  await writeArchive(ociArchive(FIO_IMAGE, await fioImage(fio), { entrypoint: ['/usr/bin/fio'], cmd: ['--version'], user: '0:0', env: ['PATH=/usr/bin:/bin'] }), archive);
  await sh('ctr', ['--address', join(nodeSpec(dataDir, NODE, 0).dir, 'run-containerd', 'containerd.sock'), '-n', 'k8s.io', 'images', 'import', '--no-unpack', archive], { timeoutMs: 300_000 });

  seedNodeUniqueDisks(dataDir, [SIZE_MIB * MiB]);
  // The drives' files in memory, with direct I/O: no host page cache under them, and no first-write
  // allocation on the host's disk that would favour whichever run comes second.
  drives.push(...attachStandInDrives(dataDir, [SIZE_MIB * MiB], 2, { directIo: true, backingDir: memDir }));
  const drive = drives.find((d) => d.node === NODE)!;
  const imageDisk = `node-disk-${NODE}-${short}b1`;
  await until(
    `${drive.nodeDisk} found`,
    300_000,
    () => k(['get', 'nodedisks', '-o', 'name']),
    (l) => l.includes(`/${drive.nodeDisk}`),
  );
  await k(['patch', 'nodedisk', drive.nodeDisk, '--type=merge', '-p', '{"spec":{"desired":{"wipe":"bench-io"}}}']);
  await free(drive.nodeDisk);
  await free(imageDisk);
  await k(['create', 'namespace', NS]);
  const classes = { image: '!localtest.example.com/media', drive: 'localtest.example.com/media' };
  for (const [what, diskSelector] of Object.entries(classes)) {
    await apply(`class-${what}`, {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'StorageClass',
      metadata: { name: `bench-io-${what}` },
      provisioner: DRIVER,
      volumeBindingMode: 'WaitForFirstConsumer',
      reclaimPolicy: 'Delete',
      parameters: { 'csi.storage.k8s.io/fstype': 'ext4', diskSelector },
    });
  }

  const runs: Record<string, Result[]> = {};
  const add = (key: string, r: Result) => {
    (runs[key] ??= []).push(r);
    console.log(key, JSON.stringify(r));
  };
  let wipes = 0;
  const wipe = async (name: string) => {
    await k(['patch', 'nodedisk', name, '--type=merge', '-p', JSON.stringify({ spec: { desired: { wipe: `bench-io-${++wipes}` } } })]);
    await free(name);
  };
  for (let round = 1; round <= ROUNDS; round++) {
    for (const what of ['image', 'drive'] as const) {
      const nodeDisk = what === 'drive' ? drive.nodeDisk : imageDisk;
      for (const mode of ['Filesystem', 'Block'] as const) add(`${what}-pvc-${mode.toLowerCase()}`, await onVolume(what, mode, nodeDisk));
      // Outside Kubernetes, the same jobs on the same storage: the image file, and the drive's device; then on
      // ext4 made there as the node side makes it (the image through a loop device with direct I/O, ADR 45),
      // which is what a Filesystem volume adds to the storage without Kubernetes. Then wiped, so that it is
      // blank for the next round's volume.
      const raw = what === 'image' ? image : drive.device;
      add(what === 'image' ? 'image-file' : 'drive-device', await fioOnHost(raw));
      add(what === 'image' ? 'image-file-ext4' : 'drive-device-ext4', await fioOnHostExt4(what === 'image' ? undefined : drive.device));
      await wipe(nodeDisk);
    }
  }
  const figures = Object.fromEntries(Object.entries(runs).map(([key, rs]) => [key, medianOf(rs)]));
  const ratio = (a: Result, b: Result) => Object.fromEntries(JOBS.map((j) => [j.name, Number((a[j.name]!.iops / b[j.name]!.iops).toFixed(2))]));
  // Each volume against the storage itself; a Filesystem volume also against ext4 made there outside Kubernetes.
  const ratios: Record<string, Record<string, number>> = {};
  for (const what of ['image', 'drive'] as const) {
    const raw = figures[what === 'image' ? 'image-file' : 'drive-device']!;
    const ext4 = figures[what === 'image' ? 'image-file-ext4' : 'drive-device-ext4']!;
    ratios[`${what}-pvc-filesystem`] = ratio(figures[`${what}-pvc-filesystem`]!, raw);
    ratios[`${what}-pvc-filesystem vs ext4 outside`] = ratio(figures[`${what}-pvc-filesystem`]!, ext4);
    ratios[`${what}-pvc-block`] = ratio(figures[`${what}-pvc-block`]!, raw);
  }
  console.table(ratios);
  record.save({ results: figures, ratios, runs });
} finally {
  run.child.kill('SIGINT');
  console.log(`teardown: exit ${await run.exited}`);
  detachStandInDrives(drives);
  rmSync(memDir, { recursive: true, force: true });
}
