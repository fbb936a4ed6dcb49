// What the agent reports when it cannot see or cannot write: the real agent
// process, with its node-bound identity, against a real API server with the admission policies.
import { rename, rm, writeFile, mkdtemp, truncate } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { API_VERSION, FIELD_MANAGER, KIND, LABEL_DISK, LABEL_NODE } from '../../api/constants.ts';
import { diskPath, labelValue, nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { seedDisks, startAgent, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { nodeDisksFor, restFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
let work = '';
const started: Program[] = [];
const client = () => nodeDisksFor(controlPlane().admin());
const kubectl = (...args: string[]) => controlPlane().kubectl(controlPlane().admin(), args);

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-reports-'));
});
test.afterEach.always((t) => {
  if (!t.passed) for (const p of started) console.error(`----- ${p.name} -----\n${p.logs(6000)}`);
});
test.after.always(async () => {
  await Promise.all(started.map((p) => p.stop()));
  await rm(work, { recursive: true, force: true });
});

async function launch(node: string, o: { heartbeat?: string; disks?: number; sizeBytes?: number } = {}): Promise<{ agent: Program; dir: string }> {
  const dir = join(work, node.slice(0, 40), 'disks');
  await seedDisks(dir, o.disks ?? 1, o.sizeBytes ?? 4096);
  const agent = await startAgent(controlPlane(), { node, diskDir: dir, logDir: join(work, 'logs'), rescanInterval: '500ms', heartbeat: o.heartbeat ?? '5m' });
  started.push(agent);
  return { agent, dir };
}

const portOf = (p: Program) => eventually(`${p.name} http port`, async () => Number(/"httpPort":(\d+)/.exec(p.logs())?.[1]) || undefined);
async function readyz(p: Program): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${await portOf(p)}/readyz`);
  return { status: res.status, body: await res.text() };
}
const unready = (p: Program, why: RegExp) =>
  eventually(
    `${p.name} unready: ${why}`,
    async () => {
      const r = await readyz(p);
      return r.status === 503 && why.test(r.body) ? r.body : undefined;
    },
    30_000,
  );
const ready = (p: Program) => eventually(`${p.name} ready`, async () => (await readyz(p)).status === 200, 90_000);

const heartbeat = (node: string) =>
  restFor(controlPlane().admin()).request<{ spec: { renewTime?: string } }>('GET', `/apis/coordination.k8s.io/v1/namespaces/node-disks-system/leases/node-disks-agent-${node}`);

async function phase(node: string, disk: string, check: (nd: NodeDisk) => boolean, what: string, timeoutMs = 20_000): Promise<NodeDisk> {
  return await eventually(
    `${node}/${disk} ${what}`,
    async () => {
      const nd = await client().get(nodeDiskName(node, disk));
      return check(nd) ? nd : undefined;
    },
    timeoutMs,
  );
}

test.serial('an unreadable disk dir keeps the last reports, lets the heartbeat Lease lapse, and readiness says why', async (t) => {
  const node = 'node-dir-gone';
  const { agent, dir } = await launch(node, { heartbeat: '2s', disks: 2 });
  await phase(node, 'disk1', (nd) => nd.status?.node?.phase === 'Available', 'Available');
  await kubectl('patch', 'nodedisk', nodeDiskName(node, 'disk2'), '--type=merge', '-p', '{"spec":{"desired":{"state":"Reserved","owner":"team-db"}}}');
  await phase(node, 'disk2', (nd) => nd.status?.node?.phase === 'Reserved', 'Reserved');
  await ready(agent);
  // Its first heartbeat may still be on its way when it is ready (seen under load): wait for the Lease.
  await eventually('the heartbeat Lease created', async () => (await heartbeat(node).catch(() => undefined))?.spec.renewTime, 20_000);

  // The dir becomes unreadable: a file stands where it was (as root, chmod would not deny anything).
  await rename(dir, `${dir}.away`);
  await writeFile(dir, 'not a directory');
  t.regex(await unready(agent, /cannot read disk dir/), /cannot read disk dir .*node-dir-gone\/disks: ENOTDIR/);
  // Nor does it renew its heartbeat Lease (ADR 24): that would say its reports are current.
  // Over three heartbeat periods (2 s each) a renewing agent changes renewTime three times; a renewal that
  // was already on its way when the dir went may still land once, however late (no sleep can bound that).
  const renewTimes = new Set([(await heartbeat(node)).spec.renewTime]);
  const deadline = Date.now() + 2 * 2400 + 1000;
  while (Date.now() < deadline) {
    for (const disk of ['disk1', 'disk2']) {
      const nd = await client().get(nodeDiskName(node, disk));
      t.not(nd.status?.node?.phase, 'Error', `${disk}: ${nd.status?.node?.message}`);
    }
    renewTimes.add((await heartbeat(node)).spec.renewTime);
    await new Promise((r) => setTimeout(r, 200));
  }
  const renewedBefore = (await heartbeat(node)).spec.renewTime;
  t.true(renewTimes.size <= 2, `the heartbeat Lease was renewed ${renewTimes.size - 1} times while the dir could not be read`);
  t.is((await client().get(nodeDiskName(node, 'disk1'))).status?.node?.phase, 'Available');
  t.is((await client().get(nodeDiskName(node, 'disk2'))).status?.node?.phase, 'Reserved');

  await rm(dir);
  await rename(`${dir}.away`, dir);
  await ready(agent);
  await eventually('the heartbeat Lease renewed again', async () => (await heartbeat(node)).spec.renewTime !== renewedBefore, 20_000);
  await phase(node, 'disk2', (nd) => nd.status?.node?.phase === 'Reserved', 'still Reserved');
  t.true(existsSync(join(dir, 'disk2.img.reserved')));
});

test.serial('a 0-byte image is reported Error with capacity 0 and why; grown, it becomes Available', async (t) => {
  const node = 'node-empty';
  const { dir } = await launch(node);
  await writeFile(join(dir, 'empty.img'), '');
  const nd = await phase(node, 'empty', (x) => x.status?.node?.phase !== undefined, 'reported');
  t.is(nd.status?.node?.phase, 'Error');
  t.is(nd.status?.node?.capacityBytes, 0);
  t.regex(nd.status?.node?.message ?? '', /is empty \(0 bytes\)/);
  await truncate(join(dir, 'empty.img'), 8192);
  const grown = await phase(node, 'empty', (x) => x.status?.node?.phase === 'Available', 'Available once grown');
  t.is(grown.status?.node?.capacityBytes, 8192);
});

test.serial('an agent whose writes are refused (403) is not ready and says so; allowed again, it is ready', async (t) => {
  const node = 'node-forbidden';
  const { agent, dir } = await launch(node);
  await phase(node, 'disk1', (nd) => nd.status?.node?.phase === 'Available', 'Available');
  await ready(agent);
  const binding = await kubectl('get', 'clusterrolebinding', 'node-disks-agent', '-o', 'json');
  await kubectl('delete', 'clusterrolebinding', 'node-disks-agent');
  try {
    await writeFile(join(dir, 'disk9.img'), 'x'); // something to write: a new disk to create
    t.regex(await unready(agent, /refused/), /403/);
  } finally {
    const restored = JSON.parse(binding) as { metadata: Record<string, unknown> };
    restored.metadata = { name: 'node-disks-agent', labels: restored.metadata.labels };
    await controlPlane().kubectl(controlPlane().admin(), ['apply', '--server-side', '-f', '-'], JSON.stringify(restored));
  }
  await ready(agent);
  await phase(node, 'disk9', (nd) => nd.status?.node?.phase === 'Available', 'created once allowed', 90_000);
});

test.serial('an agent whose token is refused (401: its Node was deleted) is not ready and says so', async (t) => {
  const node = 'node-revoked';
  const { agent, dir } = await launch(node);
  await phase(node, 'disk1', (nd) => nd.status?.node?.phase === 'Available', 'Available');
  await ready(agent);
  await kubectl('delete', 'node', node); // the agent's token is bound to the Node: it is now invalid
  // The API server caches a token's successful authentication for a few seconds: wait until it refuses it.
  const identity = await controlPlane().agent(node);
  await eventually(
    'the agent token refused',
    async () => {
      try {
        await controlPlane().kubectl(identity, ['get', 'nodedisks', '-o', 'name']);
        return false;
      } catch (err) {
        return /Unauthorized|provide credentials/.test((err as Error).message);
      }
    },
    30_000,
    500,
  );
  await writeFile(join(dir, 'disk9.img'), 'x');
  t.regex(await unready(agent, /refused|Unauthorized|401/), /401/);
});

test.serial('a NodeDisk whose name is not the canonical one of its disk is reported by the agent and never acted on', async (t) => {
  // Only a name long enough to carry a hash can get past the API server (the hash is not computable in CEL).
  const node = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(50)}`;
  const { dir } = await launch(node);
  const canonical = nodeDiskName(node, 'disk1');
  t.regex(canonical, /-[0-9a-f]{10}$/);
  await phase(node, 'disk1', (nd) => nd.status?.node?.phase === 'Available', 'Available');
  const alias = `${canonical.slice(0, -10)}0000000000`;
  const body: NodeDisk = {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: alias, labels: { [LABEL_NODE]: labelValue(node), [LABEL_DISK]: 'disk1', 'localtest.example.com/auto-reserve': 'true' } },
    spec: { nodeName: node, diskID: 'disk1', path: diskPath(dir, 'disk1'), desired: { state: 'Reserved', owner: 'auto' } },
  };
  await client().create(body, { fieldManager: FIELD_MANAGER.plugin });
  const reported = await eventually('the alias reported', async () => {
    const nd = await client().get(alias);
    return nd.status?.node?.phase ? nd : undefined;
  });
  t.is(reported.status?.node?.phase, 'Error');
  t.regex(reported.status?.node?.message ?? '', new RegExp(`not the canonical name ${canonical}`));
  t.is(reported.metadata.finalizers, undefined);
  t.false(existsSync(join(dir, 'disk1.img.reserved')), 'nothing acted on the node for the alias');
  t.is((await client().get(canonical)).status?.node?.phase, 'Available');
});
