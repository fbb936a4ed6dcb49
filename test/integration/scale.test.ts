// Costs that grow with the number of disks (issue 13): API writes per new disk, how soon a new disk file
// becomes a NodeDisk on a node that already has many, and shell completion past the first page.
// One control plane with an audit log of every write, so the tests can count who wrote what.
import { writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { nodeDiskName } from '../../api/names.ts';
import { seedDisks, startAgent, startController, type Program } from '../harness/programs.ts';
import { eventually } from '../harness/wait.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test, { auditWrites: true });
let work = '';
const started: Program[] = [];
const client = () => nodeDisksFor(controlPlane().admin());
const CONTROLLER_USER = 'system:serviceaccount:node-disks-system:node-disks-controller';

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

const readyTrue = (nd: { status?: { controller?: { conditions?: { type: string; status: string }[] } } }) =>
  nd.status?.controller?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

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
  await eventually(`${DISKS} disks Ready`, async () => {
    const items = (await client().list({ fieldSelector: `spec.nodeName=${node}` })).items;
    return items.length === DISKS && items.every(readyTrue);
  }, 120_000);
  // Let anything late arrive (a second write would follow the first within the controller's queue pass).
  await new Promise((r) => setTimeout(r, 2000));
  const writes = (await cp.auditedWrites()).filter(
    (w) => w.user.username === CONTROLLER_USER && w.objectRef?.resource === 'nodedisks' && w.objectRef.subresource === 'status' && names.has(w.objectRef.name ?? ''),
  );
  t.log(`${writes.length} controller status writes for ${DISKS} new disks`);
  t.true(writes.length <= DISKS + 2, `${writes.length} controller status writes for ${DISKS} new disks; expected one each`);
  t.true(writes.every((w) => w.responseStatus?.code === 200), 'none refused');
});
