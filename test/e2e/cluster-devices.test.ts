// The local cluster's node devices, with real mounts and loop devices (root, as the rest of test:e2e; no
// cluster is started): teardown's releaseDevicesIn (hack/cluster/loops.ts) unmounts what is mounted in
// the node dirs and detaches every loop device backed there, including one attached through a bind
// mount in a mount namespace that is gone (as the CSI node plugin's container attaches), and leaves a
// loop device of another file attached; and a node's holder (hack/cluster/holder.ts) makes its kubelet
// dir shared inside its own namespace, so a mount made in a child namespace (a Bidirectional container)
// appears in the node's, never on the host, while the node's /dev is the host's.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { holderCommand } from '../../hack/cluster/holder.ts';
import { fileKey, listLoops, loopsIn, majorMinor, mountsIn, releaseDevicesIn } from '../../hack/cluster/loops.ts';

const run = (cmd: string, args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function image(path: string): string {
  mkdirSync(join(path, '..'), { recursive: true });
  run('truncate', ['-s', '16M', path]);
  return path;
}

const keyOf = (path: string) => {
  const st = statSync(path, { bigint: true });
  return fileKey(majorMinor(st.dev), Number(st.ino));
};

/** Is `device` still attached to `file` (by its device and inode: the name may be reused by another)? */
const attachedTo = async (device: string, file: string) => (await listLoops()).some((d) => d.name === device && fileKey(d.backDev, d.backIno) === keyOf(file));

test.serial('teardown unmounts what is mounted in the node dirs and detaches their loop devices, however attached; another file’s loop device stays', async (t) => {
  t.true(process.getuid?.() === 0, 'needs root (as npm run test:e2e)');
  const data = mkdtempSync(join(tmpdir(), 'nodedisks-devices-'));
  const nodes = join(data, 'nodes');
  const attached: string[] = [];
  const mounted: string[] = [];
  try {
    // a.img: attached as the CSI node plugin does, through a bind mount in a namespace that then ends.
    const a = image(join(nodes, 'm02', 'node-disks-manager', 'disks', 'a.img'));
    const target = join(data, 'node-view');
    mkdirSync(target);
    const devA = run('unshare', [
      '--mount',
      '--propagation',
      'private',
      '--',
      'sh',
      '-c',
      `mount --bind '${join(nodes, 'm02', 'node-disks-manager')}' '${target}' && losetup -f --show '${target}/disks/a.img'`,
    ]);
    attached.push(devA);
    // b.img: attached from the host, formatted and mounted in a node dir (busy until unmounted).
    const b = image(join(nodes, 'm03', 'node-disks-manager', 'disks', 'b.img'));
    const devB = run('losetup', ['-f', '--show', b]);
    attached.push(devB);
    run('mkfs.ext4', ['-q', '-F', devB]);
    const mountB = join(nodes, 'm03', 'kubelet', 'plugins', 'vol', 'mount');
    mkdirSync(mountB, { recursive: true });
    run('mount', [devB, mountB]);
    mounted.push(mountB);
    // c.img: not the cluster's.
    const c = image(join(data, 'other', 'c.img'));
    const devC = run('losetup', ['-f', '--show', c]);
    attached.push(devC);

    const backA = (await listLoops()).find((d) => d.name === devA)?.backFile;
    t.is(backA, '/disks/a.img', 'the kernel reports the path below the bind mount, not the node dir');
    t.deepEqual((await loopsIn([nodes])).map((d) => d.name).sort(), [devA, devB].sort());
    t.deepEqual(await mountsIn([nodes]), [mountB]);

    const lines: string[] = [];
    await releaseDevicesIn([nodes], (l) => lines.push(l));
    t.log(lines.join('\n'));
    t.false(await attachedTo(devA, a), `${devA} still attached`);
    t.false(await attachedTo(devB, b), `${devB} still attached`);
    t.true(await attachedTo(devC, c), `${devC} (not the cluster's) was detached`);
    t.deepEqual(await mountsIn([nodes]), []);
    t.deepEqual(await loopsIn([nodes]), []);
    t.true(lines.includes(`unmounted ${mountB}`));
  } finally {
    for (const m of mounted) if ((await mountsIn([data])).includes(m)) run('umount', ['-l', m]);
    for (const d of attached) {
      if ((await listLoops()).some((l) => l.name === d && l.backFile.includes('.img'))) {
        try {
          run('losetup', ['-d', d]);
        } catch {
          // already detached
        }
      }
    }
    rmSync(data, { recursive: true, force: true });
  }
});

test.serial("teardown finds the kubelet's reference device of a Block volume (a loop device over the volume's device node, bound in a namespace that is gone) and leaves nothing", async (t) => {
  t.true(process.getuid?.() === 0, 'needs root (as npm run test:e2e)');
  const data = mkdtempSync(join(tmpdir(), 'nodedisks-devices-'));
  const nodes = join(data, 'nodes');
  const attached: string[] = [];
  try {
    const d = image(join(nodes, 'm04', 'node-disks-manager', 'disks', 'd.img'));
    const devD = run('losetup', ['-f', '--show', d]);
    attached.push(devD);
    // The kubelet maps a Block volume by binding its device node onto a file of its own and attaching a
    // loop device over that file, which keeps the volume's device open; its namespace then ends with the node.
    const view = join(data, 'kubelet-view');
    mkdirSync(view);
    const ref = run('unshare', [
      '--mount',
      '--propagation',
      'private',
      '--',
      'sh',
      '-ec',
      `touch '${view}/pod-uid' && mount --bind '${devD}' '${view}/pod-uid' && losetup -f --show '${view}/pod-uid'`,
    ]);
    attached.push(ref);
    const refBack = (await listLoops()).find((l) => l.name === ref)?.backFile;
    t.false(refBack === undefined || refBack.startsWith(nodes), `the kernel names the reference's backing file ${refBack} by a path outside the node dirs (what this test stands for)`);

    t.deepEqual((await loopsIn([nodes])).map((l) => l.name).sort(), [devD, ref].sort(), "the reference device is not counted as the cluster's");
    const lines: string[] = [];
    await releaseDevicesIn([nodes], (l) => lines.push(l), 5000);
    t.log(lines.join('\n'));
    t.deepEqual(await loopsIn([nodes]), []);
    t.false(
      (await listLoops()).some((l) => l.name === ref && l.backFile === refBack),
      `${ref} still attached`,
    );
  } finally {
    for (const dev of attached.reverse()) {
      try {
        run('losetup', ['-d', dev]);
      } catch {
        // already detached
      }
    }
    rmSync(data, { recursive: true, force: true });
  }
});

/** Starts a holder for one node dir bound over `hostPath`; returns its pid and a stop function. */
async function holder(dir: string, hostPath: string, nodeDir: string, shared: string[]): Promise<{ pid: number; stop: () => void }> {
  const pidFile = join(dir, `holder-${shared.length}.pid`);
  const [cmd, ...args] = holderCommand([[hostPath, nodeDir]], shared, pidFile);
  const child = spawn(cmd!, args, { stdio: 'ignore' });
  for (let i = 0; !existsSync(pidFile) && i < 100; i++) await sleep(100);
  const pid = Number(readFileSync(pidFile, 'utf8').trim());
  return { pid, stop: () => child.kill('SIGKILL') };
}

/** In the holder `pid`'s mount namespace, a child namespace (as runc makes for a container) mounts a tmpfs under `at`. */
function mountFromChild(pid: number, at: string): void {
  run('nsenter', ['-t', String(pid), '--mount', '--', 'unshare', '--mount', '--propagation', 'unchanged', '--', 'sh', '-c', `mount -t tmpfs vol '${at}' && echo data > '${at}/f'`]);
}

const inHolder = (pid: number, args: string[]) => run('nsenter', ['-t', String(pid), '--mount', '--', ...args]);

test.serial("a node's holder shares its kubelet dir inside its namespace: a child namespace's mount reaches the node, not the host; /dev is the host's", async (t) => {
  t.true(process.getuid?.() === 0, 'needs root (as npm run test:e2e)');
  const dir = mkdtempSync(join(tmpdir(), 'nodedisks-holder-'));
  const hostPath = join(dir, 'var-lib-kubelet');
  const nodeDir = join(dir, 'node', 'kubelet');
  mkdirSync(hostPath);
  mkdirSync(join(nodeDir, 'plugins', 'vol'), { recursive: true });
  const stops: (() => void)[] = [];
  try {
    const shared = await holder(dir, hostPath, nodeDir, [hostPath]);
    stops.push(shared.stop);
    t.is(inHolder(shared.pid, ['findmnt', '-n', '-o', 'PROPAGATION', hostPath]), 'shared');
    mountFromChild(shared.pid, join(hostPath, 'plugins', 'vol'));
    t.is(inHolder(shared.pid, ['cat', join(hostPath, 'plugins', 'vol', 'f')]), 'data', "the child's mount is in the node's namespace");
    t.deepEqual(await mountsIn([dir]), [], 'nothing of it on the host');
    t.false(existsSync(join(nodeDir, 'plugins', 'vol', 'f')), "the host sees the node dir's own (empty) folder");
    t.is(inHolder(shared.pid, ['stat', '-c', '%d:%i', '/dev/loop-control']), run('stat', ['-c', '%d:%i', '/dev/loop-control']), "the node's /dev is the host's");

    // The same holder without the shared kubelet dir: the child's mount stays in the child.
    const private_ = await holder(dir, hostPath, nodeDir, []);
    stops.push(private_.stop);
    t.is(inHolder(private_.pid, ['findmnt', '-n', '-o', 'PROPAGATION', hostPath]), 'private');
    mountFromChild(private_.pid, join(hostPath, 'plugins', 'vol'));
    t.throws(() => inHolder(private_.pid, ['cat', join(hostPath, 'plugins', 'vol', 'f')]));
  } finally {
    for (const stop of stops) stop();
    await sleep(200);
    rmSync(dir, { recursive: true, force: true });
  }
});
