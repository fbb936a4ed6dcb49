// `kubectl nodedisks list` keeps the text it prints, not the NodeDisks it reads: listed page by page
// under a V8 old-space limit smaller than the objects, it still answers; the same objects kept whole
// (--sort-by needs them all, as kubectl's does) exceed the limit, which shows the limit is a real bound.
import test from 'ava';
import { API_VERSION, FIELD_MANAGER, KIND, LABEL_DISK, LABEL_NODE } from '../../api/constants.ts';
import { diskPath, nodeDiskName } from '../../api/names.ts';
import { execResult, PLUGIN_BIN } from '../harness/exec.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const DISKS = 1000;
/** 48 KiB of annotation a disk: 1,000 disks are ~48 MiB of strings once parsed, above HEAP_MIB. */
const PADDING = 'x'.repeat(48 * 1024);
const HEAP_MIB = 32;

test.serial.before(async (t) => {
  t.timeout(15 * 60_000, 'creating the padded NodeDisks on a loaded machine');
  const client = nodeDisksFor(controlPlane().admin());
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < DISKS; i = next++) {
      const node = `mem-node-${String(i % 20).padStart(2, '0')}`;
      const disk = `disk${Math.floor(i / 20)}`;
      await client.create(
        {
          apiVersion: API_VERSION,
          kind: KIND,
          metadata: { name: nodeDiskName(node, disk), labels: { [LABEL_NODE]: node, [LABEL_DISK]: disk }, annotations: { 'test.example.com/padding': PADDING } },
          spec: { nodeName: node, diskID: disk, path: diskPath('/var/lib/node-disks-manager/disks', disk) },
        },
        { fieldManager: FIELD_MANAGER.agent },
      );
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
});

const list = (args: string[]) =>
  execResult(PLUGIN_BIN, ['list', '--chunk-size', '50', ...args], {
    env: { KUBECONFIG: controlPlane().admin().kubeconfig, NODE_OPTIONS: `--max-old-space-size=${HEAP_MIB}` },
    timeoutMs: 300_000,
  });

const lines = (text: string) => text.split('\n').filter(Boolean).length;

test.serial('the objects kept whole exceed the heap limit the listings below stay within', async (t) => {
  t.timeout(6 * 60_000);
  const r = await list(['--sort-by', '.spec.diskID', '-o', 'name']);
  t.not(r.code, 0, `--sort-by kept ${DISKS} padded NodeDisks within ${HEAP_MIB} MiB of heap: the limit bounds nothing`);
  t.regex(r.stderr, /heap/i);
});

for (const [title, args, expected] of [
  ['the default table', [], DISKS + 1],
  ['-o wide', ['-o', 'wide'], DISKS + 1],
  ['-o name', ['-o', 'name'], DISKS],
  ['-o custom-columns', ['-o', 'custom-columns=NAME:.metadata.name,NODE:.spec.nodeName'], DISKS + 1],
  ['-o jsonpath with range', ['-o', 'jsonpath={range .items[*]}{.metadata.name}{"\\n"}{end}'], DISKS],
  ['-L (the objects, for their labels)', ['-L', LABEL_NODE], DISKS + 1],
] as const) {
  test.serial(`${title} of ${DISKS} padded NodeDisks, 50 a page, within ${HEAP_MIB} MiB of heap`, async (t) => {
    t.timeout(6 * 60_000);
    const r = await list([...args]);
    t.is(r.code, 0, r.stderr.slice(-2000));
    t.is(lines(r.stdout), expected);
  });
}
