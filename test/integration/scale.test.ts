// Costs that grow with the number of disks: API writes per new disk, how soon a new disk file
// becomes a NodeDisk on a node that already has many, and shell completion past the first page.
// One control plane with an audit log of every write, so the tests can count who wrote what.
import { writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { FIELD_MANAGER } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { seedDisks, startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';
import { continueAtEnd } from '../../lib/kube/informer.ts';

const controlPlane = useControlPlane(test, { auditWrites: true });
let work = '';
const started: Program[] = [];
const client = () => nodeDisksFor(controlPlane().admin());
// The identity the harness's controller writes as (its ServiceAccount, as in kustomize/rbac).
const CONTROLLER_USER = 'system:serviceaccount:node-disks-system:node-disks-operator';

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-scale-'));
});
test.afterEach.always((t) => {
  if (!t.passed) for (const p of started) console.error(`----- ${p.name} -----\n${p.logs(6000)}`);
});
test.after.always(async () => {
  await Promise.all(started.map((p) => p.stop()));
  await rm(work, { recursive: true, force: true });
});

const readyTrue = (nd: { status?: { conditions?: { type: string; status: string }[] } }) => nd.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

test.serial('the controller writes the status of a new disk once, after the agent has reported it', async (t) => {
  const cp = controlPlane();
  const node = 'node-writes';
  const DISKS = 40;
  const diskDir = join(work, node);
  await seedDisks(diskDir, DISKS, 1024 * 1024);
  const controller = await startController(cp, { logDir: join(work, 'logs') });
  started.push(controller);
  started.push(await startAgent(cp, { node, diskDir, logDir: join(work, 'logs') }));
  const names = new Set(Array.from({ length: DISKS }, (_, i) => nodeDiskName(node, `disk${i + 1}`)));
  await eventually(
    `${DISKS} disks Ready`,
    async () => {
      const items = (await client().list({ fieldSelector: `spec.nodeName=${node}` })).items;
      return items.length === DISKS && items.every(readyTrue);
    },
    120_000,
  );
  // Let anything late arrive (a second write would follow the first within the controller's queue pass).
  await new Promise((r) => setTimeout(r, 2000));
  const writes = (await cp.auditedWrites()).filter(
    (w) => w.user.username === CONTROLLER_USER && w.objectRef?.resource === 'nodedisks' && w.objectRef.subresource === 'status' && names.has(w.objectRef.name ?? ''),
  );
  t.log(`${writes.length} controller status writes for ${DISKS} new disks`);
  // At least one each (Ready True is the controller's write), so a filter that matches nothing fails here.
  t.true(writes.length >= DISKS && writes.length <= DISKS + 2, `${writes.length} controller status writes for ${DISKS} new disks; expected one each`);
  t.true(
    writes.every((w) => w.responseStatus?.code === 200),
    'none refused',
  );
  await Promise.all(started.map((p) => p.stop())); // the later tests' disks are not theirs
});

const scans = async (agent: Program) => {
  const port = await eventually(`${agent.name} http port`, async () => Number(/"httpPort":(\d+)/.exec(agent.logs(Number.MAX_SAFE_INTEGER))?.[1]) || undefined);
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return Number(/^nodedisks_agent_scan_duration_seconds_count (\d+)$/m.exec(text)?.[1] ?? NaN);
};

test.serial('a new, grown or removed disk file is acted on from its own file-system event, without a full rescan of the dir', async (t) => {
  const cp = controlPlane();
  const node = 'node-events';
  const DISKS = 300;
  const diskDir = join(work, node);
  await seedDisks(diskDir, DISKS, 1024 * 1024);
  // A rescan period far longer than the test: any scan after the first is one an event caused.
  const agent = await startAgent(cp, { node, diskDir, logDir: join(work, 'logs'), rescanInterval: '30m' });
  started.push(agent);
  await eventually(`${DISKS} disks Available`, async () => (await client().list({ fieldSelector: `spec.nodeName=${node},status.node.phase=Available` })).items.length === DISKS, 120_000);
  const before = await scans(agent);
  t.is(before, 1, 'one scan at start');

  const name = nodeDiskName(node, 'fresh');
  writeFileSync(join(diskDir, 'fresh.img'), Buffer.alloc(4096));
  await eventually('the new file is Available', async () => (await client().get(name)).status?.node?.phase === 'Available', 30_000, 20);
  writeFileSync(join(diskDir, 'fresh.img'), Buffer.alloc(8192));
  await eventually('its growth is reported', async () => (await client().get(name)).status?.node?.capacityBytes === 8192, 30_000, 20);
  await rm(join(diskDir, 'fresh.img'));
  await eventually('its removal is reported', async () => (await client().get(name)).status?.node?.phase === 'Missing', 30_000, 20);
  t.is(await scans(agent), before, 'no full rescan was needed');
  await agent.stop();
});

test.serial('completion offers the names of the last node of 1,200 NodeDisks, by --node and by a typed prefix', async (t) => {
  // 24 nodes of 50 disks: listed in name order, the last node's disks come after the first 1,000.
  const NODES = 24;
  const PER_NODE = 50;
  const todo = Array.from({ length: NODES * PER_NODE }, (_, i) => newNodeDisk(`cnode-${String(Math.floor(i / PER_NODE)).padStart(2, '0')}`, `disk${i % PER_NODE}`));
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      for (let nd = todo.shift(); nd; nd = todo.shift()) await client().create(nd, { fieldManager: FIELD_MANAGER.agent });
    }),
  );
  const last = `cnode-${NODES - 1}`;
  const expected = Array.from({ length: PER_NODE }, (_, i) => nodeDiskName(last, `disk${i}`)).sort();
  const complete = async (...words: string[]) => {
    const { stdout } = await promisify(execFile)(process.execPath, [join(REPO_ROOT, 'plugin/main.ts'), '__complete', ...words], {
      env: { ...process.env, KUBECONFIG: controlPlane().admin().kubeconfig },
      maxBuffer: 64 * 1024 * 1024,
    });
    const lines = stdout.split('\n').filter(Boolean);
    t.is(lines.at(-1), ':4', 'cobra directive: no file completion');
    return lines.slice(0, -1).sort();
  };
  t.deepEqual(await complete('status', '--node', last, ''), expected);
  t.deepEqual(
    await complete('reserve', `--node=${last}`, nodeDiskName(last, 'disk1')),
    expected.filter((n) => n.startsWith(nodeDiskName(last, 'disk1'))),
  );
  t.deepEqual(await complete('status', `node-disk-${last}-`), expected, 'a typed prefix is matched past the first page');
});

test.serial("a list page's continue token is found at the end of the API server's own text, so the informer asks for the next page before parsing", async (t) => {
  // The informer's prefetch (lib/kube/informer-list.ts) rests on the server writing a list's metadata last;
  // were that to change, lists would stay correct but lose the overlap. This checks the real layout.
  const c = client();
  const node = 'node-pages';
  for (const disk of ['p1', 'p2', 'p3']) await c.create(newNodeDisk(node, disk), { fieldManager: FIELD_MANAGER.agent });
  const text = await c.listText({ limit: 2, fieldSelector: `spec.nodeName=${node}` });
  const page = JSON.parse(text) as { metadata: { continue?: string }; items: unknown[] };
  t.is(page.items.length, 2);
  t.truthy(page.metadata.continue);
  t.is(continueAtEnd(text), page.metadata.continue);
});
