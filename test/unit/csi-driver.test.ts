import { availableParallelism } from 'node:os';
import test from 'ava';
import { checkCapabilities, fsTypeOf } from '../../csi/capabilities.ts';
import { parseCsiConfig, socketPath } from '../../csi/config.ts';
import { pvOwner, pvOwnerUID } from '../../csi/controller-service.ts';
import { CsiError } from '../../csi/errors.ts';
import type { VolumeCapability } from '../../csi/types.ts';
import { parseVolumeId, volumeId } from '../../csi/volume-id.ts';
import { OWNER_PATTERN, WIPE_TOKEN_PATTERN } from '../../api/constants.ts';

test('a volume ID names the NodeDisk and the PV, and only IDs of that shape are ours', (t) => {
  const id = volumeId('node-disk-m02-disk1', 'pvc-0b8e2f4c-5d1a-4c3e-9f6a-2b7d8e9f0a1b');
  t.is(id, 'node-disk-m02-disk1/pvc-0b8e2f4c-5d1a-4c3e-9f6a-2b7d8e9f0a1b');
  t.deepEqual(parseVolumeId(id), { nodeDisk: 'node-disk-m02-disk1', volumeName: 'pvc-0b8e2f4c-5d1a-4c3e-9f6a-2b7d8e9f0a1b' });
  for (const bad of ['', 'no-slash', '/pv', 'nd/', 'nd/a/b', 'Upper_Case/pv', '../x/pv', `${'a'.repeat(254)}/pv`]) t.is(parseVolumeId(bad), undefined, bad);
});

test("a PV's owner carries its name and its PVC's UID, and both fit the API's patterns", (t) => {
  const uid = '0b8e2f4c-5d1a-4c3e-9f6a-2b7d8e9f0a1b';
  t.is(pvOwner(`pvc-${uid}`), `pv:pvc-${uid}`);
  t.regex(pvOwner(`pvc-${uid}`), new RegExp(OWNER_PATTERN));
  t.is(pvOwnerUID(`pvc-${uid}`), uid);
  t.is(pvOwnerUID(`data-${uid}`), uid, 'whatever prefix the provisioner was given');
  // A name with no UID (a test's) gets a digest of itself: stable, different per name, a valid UID and wipe token.
  const a = pvOwnerUID('sanity-volume-1');
  t.is(a, pvOwnerUID('sanity-volume-1'));
  t.not(a, pvOwnerUID('sanity-volume-2'));
  t.regex(a, /^[A-Za-z0-9-]+$/);
  t.regex(`pv-${a}`, new RegExp(WIPE_TOKEN_PATTERN));
});

test('capabilities: single-node access modes, a filesystem the node side can make, or a block device', (t) => {
  const ok = [
    { access_mode: { mode: 'SINGLE_NODE_WRITER' as const }, access_type: 'mount' as const, mount: { fs_type: '', mount_flags: [], volume_mount_group: '' } },
    { access_mode: { mode: 'SINGLE_NODE_MULTI_WRITER' as const }, access_type: 'mount' as const, mount: { fs_type: 'xfs', mount_flags: [], volume_mount_group: '' } },
    { access_mode: { mode: 'SINGLE_NODE_READER_ONLY' as const }, access_type: 'block' as const, block: {} },
  ];
  t.notThrows(() => checkCapabilities(ok));
  t.is(fsTypeOf(ok[0]!), 'ext4');
  const bad: [VolumeCapability, RegExp][] = [
    [{ access_mode: { mode: 'MULTI_NODE_MULTI_WRITER' as const }, access_type: 'block' as const }, /not supported: a NodeDisk is one node's disk/],
    [
      { access_mode: { mode: 'SINGLE_NODE_WRITER' as const }, access_type: 'mount' as const, mount: { fs_type: 'ntfs', mount_flags: [], volume_mount_group: '' } },
      /fsType "ntfs" is not supported: use one of ext4, ext3, xfs/,
    ],
    [{ access_type: 'block' as const }, /no access mode/],
    [{ access_mode: { mode: 'SINGLE_NODE_WRITER' as const } }, /neither block nor mount/],
  ];
  for (const [cap, message] of bad) {
    const err = t.throws(() => checkCapabilities([cap]), { instanceOf: CsiError, message });
    t.is(err?.code, 'INVALID_ARGUMENT');
  }
});

test('node-disks-csi: a side is required, the node side needs its node and socket, and addresses may be unix URLs', (t) => {
  t.throws(() => parseCsiConfig([]), { message: /the first argument must be controller or node, got nothing/ });
  t.throws(() => parseCsiConfig(['agent']), { message: /must be controller or node, got "agent"/ });
  t.throws(() => parseCsiConfig(['node', '--csi-address=/x.sock'], {}), { message: /NODE_NAME is required/ });
  t.throws(() => parseCsiConfig(['node', '--node-name=n1'], {}), { message: /--csi-address is required/ });
  t.throws(() => parseCsiConfig(['node', '--csi-address=/x.sock', '--node-name=N_1'], {}), { message: /invalid NODE_NAME/ });
  t.throws(() => parseCsiConfig(['controller', '--bogus'], {}), { message: /Unknown argument/ });
  const node = parseCsiConfig(['node', '--csi-address=unix:///var/lib/kubelet/plugins/d/csi.sock'], { NODE_NAME: 'n1' });
  t.like(node, { side: 'node', csiAddress: '/var/lib/kubelet/plugins/d/csi.sock', nodeName: 'n1', registrationDir: '/var/lib/kubelet/plugins_registry', httpAddress: ':8083' });
  t.like(parseCsiConfig(['controller'], {}), { side: 'controller', csiAddress: '/csi/csi.sock', httpAddress: ':8082' });
  t.is(socketPath('unix:/a.sock'), '/a.sock');
  t.throws(() => socketPath('relative.sock'), { message: /must be an absolute unix socket path/ });
});

test('node-disks-csi node: the tool runner is off unless given, by flag or $TOOL_RUNNER, and only by an absolute path', (t) => {
  const base = ['node', '--csi-address=/x.sock'];
  t.is((parseCsiConfig(base, { NODE_NAME: 'n1' }) as { toolRunner: string }).toolRunner, '');
  t.is((parseCsiConfig(base, { NODE_NAME: 'n1', TOOL_RUNNER: '/usr/local/bin/nodedisks-toolrunner' }) as { toolRunner: string }).toolRunner, '/usr/local/bin/nodedisks-toolrunner');
  t.is((parseCsiConfig([...base, '--tool-runner=/opt/r'], { NODE_NAME: 'n1' }) as { toolRunner: string }).toolRunner, '/opt/r');
  t.throws(() => parseCsiConfig([...base, '--tool-runner=nodedisks-toolrunner'], { NODE_NAME: 'n1' }), {
    message: /--tool-runner must be an absolute path \(or '' for none\), got "nodedisks-toolrunner"/,
  });
});

test('node-disks-csi node: mkfs runs at once default to the cores; a flag or $FORMATS_AT_ONCE sets them, and anything but a positive integer is refused naming the flag', (t) => {
  const base = ['node', '--csi-address=/x.sock'];
  const formats = (argv: string[], env: NodeJS.ProcessEnv) => (parseCsiConfig(argv, { NODE_NAME: 'n1', ...env }) as { formatsAtOnce: number }).formatsAtOnce;
  t.is(formats(base, {}), availableParallelism());
  t.is(formats(base, { FORMATS_AT_ONCE: '3' }), 3);
  t.is(formats([...base, '--formats-at-once=1'], { FORMATS_AT_ONCE: '3' }), 1);
  for (const [argv, env, shown] of [
    [[...base, '--formats-at-once=0'], {}, '"0"'],
    [[...base, '--formats-at-once=1.5'], {}, '"1.5"'],
    [base, { FORMATS_AT_ONCE: 'many' }, '"many"'],
  ] as const) {
    t.throws(() => parseCsiConfig([...argv], { NODE_NAME: 'n1', ...env }), { message: `--formats-at-once must be a positive integer (mkfs runs at once), got ${shown}` });
  }
});
