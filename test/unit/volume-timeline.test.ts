// The breakdown bench/csi-pods.ts records reads the kubelet's own log lines; these are lines a kubelet of the
// local cluster wrote (kubelet v1.35, klog text format), shortened after the PV's name.
import test from 'ava';
import { kubeletVolumeTimes, podUnmountStarts, step } from '../../bench/lib/volume-timeline.ts';

const LOG = [
  'I1204 20:10:30.806960    3719 reconciler_common.go:225] "operationExecutor.MountVolume started for volume \\"pvc-a8c0bdf7-b70e-47a7-8d13-fbec4bc4a1ea\\" (UniqueName: \\"kubernetes.io/csi/nodedisks.localtest.example.com^node-disk-node-disks-dev-m02-m02b12/pvc-a8c0',
  'I1204 20:10:30.807016    3719 reconciler_common.go:225] "operationExecutor.MountVolume started for volume \\"kube-api-access-wd5cf\\" (UniqueName: \\"kubernetes.io/projected/56293ec6-4ba5-4824-8f86-34165cf41eb6-kube-api-access-wd5cf\\"',
  'I1204 20:10:32.124705    3719 operation_generator.go:557] "MountVolume.MountDevice succeeded for volume \\"pvc-a8c0bdf7-b70e-47a7-8d13-fbec4bc4a1ea\\" (UniqueName: \\"kubernetes.io/csi/nodedisks.localtest.example.com^node-disk-node-disks-dev-m02-m02b12/pvc-a8c0bd',
  'I1204 20:10:35.234658    3719 operation_generator.go:614] "MountVolume.SetUp succeeded for volume \\"pvc-a8c0bdf7-b70e-47a7-8d13-fbec4bc4a1ea\\" (UniqueName: \\"kubernetes.io/csi/nodedisks.localtest.example.com^node-disk-node-disks-dev-m02-m02b12/pvc-a8c0bdf7-b70',
  'I1204 20:11:11.001093    3719 reconciler_common.go:163] "operationExecutor.UnmountVolume started for volume \\"kubernetes.io/csi/nodedisks.localtest.example.com^node-disk-node-disks-dev-m02-m02b12/pvc-a8c0bdf7-b70e-47a7-8d13-fbec4bc4a1ea\\" (UniqueName: \\"kubernetes.io/csi/',
  'I1204 20:11:12.334869    3719 operation_generator.go:779] UnmountVolume.TearDown succeeded for volume "kubernetes.io/csi/nodedisks.localtest.example.com^node-disk-node-disks-dev-m02-m02b12/pvc-a8c0bdf7-b70e-47a7-8d13-fbec4bc4a1ea" pod "56293ec6-4ba5-4824-8f86-',
  'I1204 20:11:12.386696    3719 reconciler_common.go:292] "operationExecutor.UnmountDevice started for volume \\"pvc-a8c0bdf7-b70e-47a7-8d13-fbec4bc4a1ea\\" (UniqueName: \\"kubernetes.io/csi/nodedisks.localtest.example.com^node-disk-node-disks-dev-m02-m02b12/pvc-a8',
  'I1204 20:11:15.038282    3719 operation_generator.go:892] UnmountDevice succeeded for volume "pvc-a8c0bdf7-b70e-47a7-8d13-fbec4bc4a1ea" (UniqueName: "kubernetes.io/csi/nodedisks.localtest.example.com^node-disk-node-disks-dev-m02-m02b12/pvc-a8c0bdf7-b70e-47a7-8',
  'I1204 20:11:16.038282    3719 operation_generator.go:892] UnmountDevice succeeded for volume "pvc-a8c0bdf7-b70e-47a7-8d13-fbec4bc4a1ea" (a repeat: the first is kept)',
].join('\n');

test("the kubelet's volume operations, by PV, at the times it logged them", (t) => {
  const times = kubeletVolumeTimes(LOG, 2026);
  t.deepEqual([...times.keys()], ['pvc-a8c0bdf7-b70e-47a7-8d13-fbec4bc4a1ea'], 'only CSI volumes: the projected token volume has no PV');
  t.deepEqual(times.get('pvc-a8c0bdf7-b70e-47a7-8d13-fbec4bc4a1ea'), {
    mountStarted: Date.UTC(2026, 11, 4, 20, 10, 30, 806),
    staged: Date.UTC(2026, 11, 4, 20, 10, 32, 124),
    published: Date.UTC(2026, 11, 4, 20, 10, 35, 234),
    unmountStarted: Date.UTC(2026, 11, 4, 20, 11, 11, 1),
    unpublished: Date.UTC(2026, 11, 4, 20, 11, 12, 334),
    unstaged: Date.UTC(2026, 11, 4, 20, 11, 15, 38),
  });
});

test('a step is summarised over the volumes that have both of its ends', (t) => {
  // Three volumes with both ends (1000, 3000, 2000 ms), one with only a start, one with only an end.
  t.deepEqual(step('x', [0, 10, undefined, 30, 40], [1000, 3010, 5000, undefined, 2040]), { step: 'x', n: 3, p50Ms: 2000, p95Ms: 3000 });
});

test("a pod's teardown ends when the kubelet starts to unmount its first volume, emptyDir or CSI alike", (t) => {
  const uid = (n: number) => `a4274abe-23a2-45be-9fbd-3643fbfb58${String(n).padStart(2, '0')}`;
  const log = [
    `I1206 03:41:14.893390   22615 reconciler_common.go:163] "operationExecutor.UnmountVolume started for volume \\"kubernetes.io/empty-dir/${uid(1)}-d\\" (UniqueName: \\"kubernetes.io/empty-dir/${uid(1)}-d\\") pod \\"${uid(1)}\\" (UID: \\"${uid(1)}\\") "`,
    `I1206 03:41:14.993469   22615 reconciler_common.go:163] "operationExecutor.UnmountVolume started for volume \\"kubernetes.io/projected/${uid(1)}-kube-api-access-55stg\\" (UniqueName: \\"kubernetes.io/projected/${uid(1)}-kube-api-access-55stg\\") pod \\"${uid(1)}\\" (UID: \\"${uid(1)}\\") "`,
    `I1206 03:41:57.798406   22615 reconciler_common.go:163] "operationExecutor.UnmountVolume started for volume \\"kubernetes.io/csi/nodedisks.localtest.example.com^node-disk-node-disks-dev-m02-m02b1/pvc-cc17a890-3ba2-4e6b-ace1-8c5ab0126a13\\" (UniqueName: \\"kubernetes.io/csi/nodedisks.localtest.example.com^node-disk-node-disks-dev-m02-m02b1/pvc-cc17a890-3ba2-4e6b-ace1-8c5ab0126a13\\") pod \\"${uid(2)}\\" (UID: \\"${uid(2)}\\") "`,
    `I1206 03:41:58.100000   22615 operation_generator.go:779] UnmountVolume.TearDown succeeded for volume "kubernetes.io/empty-dir/${uid(3)}-d" pod "${uid(3)}"`,
  ].join('\n');
  t.deepEqual(
    [...podUnmountStarts(log, 2026)],
    [
      [uid(1), Date.UTC(2026, 11, 6, 3, 41, 14, 893)],
      [uid(2), Date.UTC(2026, 11, 6, 3, 41, 57, 798)],
    ],
    'the first line per pod; a TearDown line is not a start',
  );
});
