// The CSI Node service's handling of calls (csi/node-service.ts) with the node work replaced by a
// recording stand-in: calls for one volume run one after the other, never side by side, and a second
// call waits for the first instead of failing (two pods of one ReadWriteOnce PVC on one node).
import test from 'ava';
import protobuf, { type INamespace } from 'protobufjs';
import type { CsiError } from '../../csi/errors.ts';
import csiDescriptor from '../../csi/proto/generated/csi.json' with { type: 'json' };
import { NodeService, type NodeVolumes } from '../../csi/node-service.ts';
import type { NodePublishVolumeRequest } from '../../csi/types.ts';

const NODE = 'node-a';
const VOLUME = 'node-disk-node-a-disk1/pvc-1';

function recordingVolumes(): { volumes: NodeVolumes; log: string[]; release: () => void } {
  const log: string[] = [];
  let inside = 0;
  let open!: () => void;
  const gate = new Promise<void>((r) => {
    open = r;
  });
  const volumes: NodeVolumes = {
    openImage: async (dir, id) => `${dir}/${id}.img`,
    imagesNamed: async () => [],
    stage: async () => {},
    openDrive: async (dir, name) => `/dev/${dir.length}-${name}`,
    stageDrive: async () => {},
    unstage: async () => {},
    publish: async (o) => {
      inside++;
      log.push(`start ${o.targetPath}${inside > 1 ? ' (beside another)' : ''}`);
      await gate;
      inside--;
      log.push(`end ${o.targetPath}`);
    },
    unpublish: async () => {},
    volumeStats: async () => ({ kind: 'block', bytes: { total: 1 }, condition: { abnormal: false, message: '' } }),
  };
  return { volumes, log, release: open };
}

function publishRequest(target: string): NodePublishVolumeRequest {
  return {
    volume_id: VOLUME,
    publish_context: {},
    staging_target_path: '/var/lib/kubelet/plugins/staging/pvc-1',
    target_path: target,
    volume_capability: { access_type: 'mount', mount: { fs_type: 'ext4', mount_flags: [], volume_mount_group: '' }, access_mode: { mode: 'SINGLE_NODE_WRITER' } },
    readonly: false,
    volume_context: { node: NODE, diskID: 'disk1' },
  };
}

test('a second publish of one volume while the first runs waits for it, then runs: not ABORTED, never side by side', async (t) => {
  const r = recordingVolumes();
  const service = new NodeService({ nodeName: NODE, diskDir: '/disks', volumes: r.volumes });
  const first = service.handlers.NodePublishVolume(publishRequest('/pods/a/mount'));
  const second = service.handlers.NodePublishVolume(publishRequest('/pods/b/mount'));
  await new Promise((res) => setTimeout(res, 20));
  r.release();
  const results = await Promise.allSettled([first, second]);
  t.deepEqual(
    results.map((x) => (x.status === 'rejected' ? `${(x.reason as CsiError).code}: ${(x.reason as Error).message}` : 'ok')),
    ['ok', 'ok'],
  );
  t.deepEqual(r.log, ['start /pods/a/mount', 'end /pods/a/mount', 'start /pods/b/mount', 'end /pods/b/mount']);
});

test('a call that fails does not hold the next call of its volume', async (t) => {
  const r = recordingVolumes();
  let calls = 0;
  const volumes: NodeVolumes = {
    ...r.volumes,
    publish: async () => {
      if (calls++ === 0) throw Object.assign(new Error('target busy'), { code: 'failed-precondition' });
    },
  };
  const service = new NodeService({ nodeName: NODE, diskDir: '/disks', volumes });
  const err = await t.throwsAsync(service.handlers.NodePublishVolume(publishRequest('/pods/a/mount')));
  t.is((err as CsiError).code, 'FAILED_PRECONDITION');
  t.deepEqual(await service.handlers.NodePublishVolume(publishRequest('/pods/a/mount')), {});
});

test("the node advertises VOLUME_CONDITION and NodeGetVolumeStats passes the volume's condition on beside its usage", async (t) => {
  const r = recordingVolumes();
  const condition = { abnormal: true, message: 'the ext4 filesystem on this volume (loop3) went read-only after IO errors.' };
  const volumes: NodeVolumes = { ...r.volumes, volumeStats: async () => ({ kind: 'block', bytes: { total: 4096 }, condition }) };
  const service = new NodeService({ nodeName: NODE, diskDir: '/disks', volumes });
  const caps = (await service.handlers.NodeGetCapabilities()).capabilities.map((c) => c.rpc.type);
  t.true(caps.includes('VOLUME_CONDITION') && caps.includes('GET_VOLUME_STATS'));
  t.deepEqual(await service.handlers.NodeGetVolumeStats({ volume_id: VOLUME, volume_path: '/pods/a/dev', staging_target_path: '' }), {
    usage: [{ unit: 'BYTES', total: 4096, available: 0, used: 0 }],
    volume_condition: condition,
  });
});

test("the volume's condition and the VOLUME_CONDITION capability reach the wire as the kubelet reads them (CSI spec v1.9: capability 4, field 2), not only the handler's answer", async (t) => {
  const r = recordingVolumes();
  const condition = { abnormal: true, message: 'the ext4 filesystem on this volume (loop3) went read-only after IO errors.' };
  const service = new NodeService({ nodeName: NODE, diskDir: '/disks', volumes: { ...r.volumes, volumeStats: async () => ({ kind: 'block', bytes: { total: 4096 }, condition }) } });
  // Encoded and decoded by the descriptor the driver serves, as grpc-js does: a field or an enum name the
  // descriptor lacks is dropped without a word.
  const root = protobuf.Root.fromJSON(csiDescriptor as unknown as INamespace);
  const wire = (type: string, answer: object) => {
    const T = root.lookupType(`csi.v1.${type}`);
    return T.toObject(T.decode(T.encode(T.fromObject(answer)).finish()), { enums: Number });
  };
  const caps = wire('NodeGetCapabilitiesResponse', await service.handlers.NodeGetCapabilities()) as { capabilities: { rpc: { type: number } }[] };
  t.deepEqual(
    caps.capabilities.map((c) => c.rpc.type),
    [1, 2, 4],
    'STAGE_UNSTAGE_VOLUME, GET_VOLUME_STATS, VOLUME_CONDITION',
  );
  const stats = wire('NodeGetVolumeStatsResponse', await service.handlers.NodeGetVolumeStats({ volume_id: VOLUME, volume_path: '/pods/a/dev', staging_target_path: '' }));
  t.deepEqual((stats as { volume_condition?: unknown }).volume_condition, condition);
});
