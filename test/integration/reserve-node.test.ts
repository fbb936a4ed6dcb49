// `kubectl nodedisks reserve --node X`, "give me a free disk of X", run by several people at once: each
// gets a different disk, nobody's reservation is taken over, and when no disk is free the refusal says
// why each one is not. The bundled plugin runs as separate processes against a real API server; the
// NodeDisks and their status.node are written by the test as the node's agent (its own identity).
import { existsSync } from 'node:fs';
import test from 'ava';
import { FIELD_MANAGER } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { execResult, PLUGIN_BIN, type ExecResult } from '../harness/exec.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);

function nd(...args: string[]): Promise<ExecResult> {
  return execResult(PLUGIN_BIN, args, { env: { KUBECONFIG: controlPlane().admin().kubeconfig }, timeoutMs: 60_000 });
}

/** Creates the node's disks and reports them, as the node's agent does. */
async function agentReports(node: string, disks: Record<string, { phase: 'Available' | 'Error'; capacityBytes: number; message?: string }>): Promise<void> {
  const agent = nodeDisksFor(await controlPlane().agent(node));
  for (const [disk, report] of Object.entries(disks)) {
    await agent.create(newNodeDisk(node, disk), { fieldManager: FIELD_MANAGER.agent });
    await agent.applyStatus(
      { apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDisk', metadata: { name: nodeDiskName(node, disk) }, status: { node: { ...report, lastSeenTime: new Date().toISOString() } } },
      { fieldManager: FIELD_MANAGER.agent, force: true },
    );
  }
}

const desiredOf = async (node: string): Promise<Map<string, NodeDisk['spec']['desired']>> => {
  const list = await nodeDisksFor(controlPlane().admin()).list({ fieldSelector: `spec.nodeName=${node}` });
  return new Map(list.items.map((i) => [i.spec.diskID, i.spec.desired]));
};

test.serial.before(() => {
  if (!existsSync(PLUGIN_BIN)) throw new Error('run npm run build first (npm test does)');
});

test.serial('concurrent reserves of one node each get a different disk; when none is left the refusal says so', async (t) => {
  const node = 'node-race';
  await agentReports(node, {
    disk1: { phase: 'Available', capacityBytes: 1 << 26 },
    disk2: { phase: 'Available', capacityBytes: 1 << 26 },
    disk3: { phase: 'Available', capacityBytes: 1 << 26 },
  });
  const owners = ['team-a', 'team-b', 'team-c'];
  const results = await Promise.all(owners.map((o) => nd('reserve', '--node', node, '--owner', o)));
  for (const [i, r] of results.entries()) t.is(r.code, 0, `${owners[i]}: ${r.stderr}`);
  const desired = await desiredOf(node);
  const holders = [...desired.values()].map((d) => (d?.state === 'Reserved' ? d.owner : undefined));
  t.deepEqual([...holders].sort(), owners, 'three distinct disks, one per owner, nobody overwritten');
  for (const [i, r] of results.entries()) {
    const disk = [...desired.entries()].find(([, d]) => d?.owner === owners[i])?.[0];
    t.is(r.stdout, `nodedisk.localtest.example.com/${nodeDiskName(node, disk ?? '?')} reserved for ${owners[i]}\n`);
  }

  const fourth = await nd('reserve', '--node', node, '--owner', 'team-d');
  t.is(fourth.code, 5, fourth.stderr);
  t.regex(fourth.stderr, /^error: node node-race has no free disk: disk1 is reserved by team-\w, disk2 is reserved by team-\w, disk3 is reserved by team-\w\n$/);
  t.notRegex(fourth.stderr, /--force/);
  t.deepEqual(await desiredOf(node), desired, 'the refusal changed nothing');
});

test.serial('a 0-byte image or a failed disk is never offered; the refusal says why each disk was skipped', async (t) => {
  const node = 'node-empty';
  await agentReports(node, {
    disk1: { phase: 'Available', capacityBytes: 0 },
    disk2: { phase: 'Error', capacityBytes: 0, message: 'disk2.img is empty (0 bytes)' },
    disk3: { phase: 'Available', capacityBytes: 1 << 26 },
  });
  const first = await nd('reserve', '--node', node, '--owner', 'team-db');
  t.is(first.code, 0, first.stderr);
  t.is(first.stdout, `nodedisk.localtest.example.com/${nodeDiskName(node, 'disk3')} reserved for team-db\n`, 'the only usable disk, not the 0-byte disk1');

  const second = await nd('reserve', '--node', node, '--owner', 'team-web');
  t.is(second.code, 5, second.stderr);
  t.is(second.stderr, 'error: node node-empty has no free disk: disk1 is an empty (0-byte) image, disk2 is in phase Error (disk2.img is empty (0 bytes)), disk3 is reserved by team-db\n');
  const desired = await desiredOf(node);
  t.is(desired.get('disk1')?.state ?? 'Available', 'Available');
  t.is(desired.get('disk2')?.state ?? 'Available', 'Available');
  t.deepEqual(desired.get('disk3'), { state: 'Reserved', owner: 'team-db' });
});
