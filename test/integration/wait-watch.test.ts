// `kubectl nodedisks wait` on a disk nobody changed for a long time: the object's resourceVersion has
// left the API server's watch cache (the normal case in a long-lived cluster). Here the cache is made to
// forget it by restarting kube-apiserver: the new cache starts at the current version, so a watch from
// the object's own (older) version gets 410 Gone. The wait must still work, and cost the API server a
// handful of requests, not a flood. Requests are counted with the API server's own apiserver_request_total.
import { existsSync } from 'node:fs';
import test from 'ava';
import { FIELD_MANAGER } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { execResult, PLUGIN_BIN, type ExecResult } from '../harness/exec.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { nodeDisksFor, openNodeDiskWatches, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const NODE = 'node-w';

function nd(...args: string[]): Promise<ExecResult> {
  return execResult(PLUGIN_BIN, args, { env: { KUBECONFIG: controlPlane().admin().kubeconfig }, timeoutMs: 120_000 });
}

/** Requests the API server has served for NodeDisks since it started, by verb. */
async function nodeDiskRequests(): Promise<Record<string, number>> {
  const metrics = await controlPlane().kubectl(controlPlane().admin(), ['get', '--raw', '/metrics']);
  const byVerb: Record<string, number> = {};
  for (const line of metrics.split('\n')) {
    if (!line.startsWith('apiserver_request_total{') || !line.includes('resource="nodedisks"')) continue;
    const verb = /verb="([A-Z]+)"/.exec(line)?.[1] ?? '?';
    byVerb[verb] = (byVerb[verb] ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return byVerb;
}
const openWatches = () => openNodeDiskWatches(controlPlane());
const total = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);

async function report(disk: string, phase: 'Available' | 'Reserved'): Promise<void> {
  const agent = nodeDisksFor(await controlPlane().agent(NODE));
  await agent.applyStatus(
    { apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDisk', metadata: { name: nodeDiskName(NODE, disk) }, status: { node: { phase, capacityBytes: 1 << 26 } } },
    { fieldManager: FIELD_MANAGER.agent, force: true },
  );
}

test.serial.before(async () => {
  if (!existsSync(PLUGIN_BIN)) throw new Error('run npm run build first (npm test does)');
  const agent = nodeDisksFor(await controlPlane().agent(NODE));
  for (const disk of ['disk1', 'disk2']) {
    await agent.create(newNodeDisk(NODE, disk), { fieldManager: FIELD_MANAGER.agent });
    await report(disk, 'Available');
  }
  // The watch cache of the restarted API server begins after the disks' last change.
  await controlPlane().restartApiserver();
});

test.serial('wait on a disk whose version left the watch cache makes a bounded number of requests', async (t) => {
  const before = await nodeDiskRequests();
  const r = await nd('wait', nodeDiskName(NODE, 'disk1'), '--for=phase=Reserved', '--timeout=5s');
  const after = await nodeDiskRequests();
  t.is(r.code, 6, r.stderr);
  t.regex(r.stderr, /timed out after 5s waiting for phase Reserved/);
  const made = Object.fromEntries(Object.entries(after).map(([verb, n]) => [verb, n - (before[verb] ?? 0)]));
  t.log(`requests for NodeDisks during a 5 s wait: ${JSON.stringify(made)}`);
  t.true(total(made) <= 20, `tens at most, not hundreds: ${JSON.stringify(made)}`);
});

test.serial('after the API server forgot its version, wait still sees the change it waits for', async (t) => {
  const waiting = nd('wait', nodeDiskName(NODE, 'disk2'), '--for=phase=Reserved', '--timeout=60s');
  // Once the wait is watching (the API server counts its open watch), report the change it waits for.
  await eventually('the wait to be watching', async () => (await openWatches()) > 0, 30_000, 100);
  await report('disk2', 'Reserved');
  const r = await waiting;
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, `nodedisk.localtest.example.com/${nodeDiskName(NODE, 'disk2')} condition met\n`);
});
