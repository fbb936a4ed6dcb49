// The streaming watch-list (KEP-3157) against the real kube-apiserver: the informer, and the controller
// and agent built on it, sync with no LIST of their resources (the API server's own request counts say
// so), and against an API server whose WatchList feature gate is off they fall back to the paged list.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import type { NodeDiskClient } from '../../api/client.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { ControlPlane } from '../../hack/controlplane/controlplane.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { seedDisks, startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { Informer } from '../../lib/kube/informer.ts';
import { createLogger } from '../../lib/runtime/log.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
let work = '';
const started: Program[] = [];
const DISKS = 40;

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-watch-list-'));
  const admin = nodeDisksFor(controlPlane().admin());
  for (let i = 0; i < DISKS; i++) await admin.create(newNodeDisk(`wl-node-${i % 4}`, `disk${i}`), { fieldManager: 'test' });
});
test.afterEach.always((t) => {
  if (!t.passed) for (const p of started) console.error(`----- ${p.name} -----\n${p.logs(6000)}`);
});
test.after.always(async () => {
  await Promise.all(started.map((p) => p.stop()));
  await rm(work, { recursive: true, force: true });
});

/** The API server's count of requests by verb for one resource, from its /metrics (apiserver_request_total). */
async function requests(cp: ControlPlane, resource: string): Promise<Map<string, number>> {
  const text = await cp.kubectl(cp.admin(), ['get', '--raw', '/metrics']);
  const byVerb = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{') || !line.includes(`resource="${resource}"`)) continue;
    const verb = /verb="([^"]*)"/.exec(line)?.[1] ?? '?';
    byVerb.set(verb, (byVerb.get(verb) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)));
  }
  return byVerb;
}
const lists = async (cp: ControlPlane, resource: string) => (await requests(cp, resource)).get('LIST') ?? 0;

function informer(client: NodeDiskClient, lines: string[], watchList = true) {
  const inf = new Informer<NodeDisk>(
    { list: (l) => client.list(l), watch: (w, s) => client.watch(w, s), watchList: (w, s) => client.watch(w, s) },
    {},
    { log: createLogger('test', { level: 'debug', write: (l) => lines.push(l) }), watchList },
  );
  const stop = new AbortController();
  const done = inf.run(stop.signal);
  return { inf, stop: async () => (stop.abort(), await done) };
}

test.serial('the informer syncs through the watch-list: no LIST at the API server, and the same watch delivers later changes', async (t) => {
  const cp = controlPlane();
  const client = nodeDisksFor(cp.admin());
  const before = await lists(cp, 'nodedisks');
  const lines: string[] = [];
  const { inf, stop } = informer(client, lines);
  try {
    await eventually('synced', async () => inf.hasSynced, 30_000);
    t.is(inf.cache.size, DISKS);
    const changed = await client.mergePatch(nodeDiskName('wl-node-0', 'disk0'), { metadata: { labels: { touched: 'yes' } } }, { fieldManager: 'test' });
    await eventually('the change seen', async () => inf.cache.get(nodeDiskName('wl-node-0', 'disk0'))?.metadata.resourceVersion === changed.metadata.resourceVersion, 10_000);
  } finally {
    await stop();
  }
  t.is(await lists(cp, 'nodedisks'), before, 'no LIST of nodedisks');
  t.false(
    lines.some((l) => l.includes('listing in pages')),
    lines.join('\n'),
  );
  // The same measure sees a paged list: the count above could fail.
  const paged = informer(client, [], false);
  await eventually('synced by pages', async () => paged.inf.hasSynced, 30_000);
  await paged.stop();
  t.true((await lists(cp, 'nodedisks')) > before, 'the paged informer is counted as a LIST');
});

test.serial('the controller and an agent sync NodeDisks, Nodes, heartbeat Leases, NodeDiskClaims and Namespaces without a LIST', async (t) => {
  const cp = controlPlane();
  const before = {
    nodedisks: await lists(cp, 'nodedisks'),
    nodes: await lists(cp, 'nodes'),
    leases: await lists(cp, 'leases'),
    claims: await lists(cp, 'nodediskclaims'),
    namespaces: await lists(cp, 'namespaces'),
  };
  const controller = await startController(cp, { logDir: join(work, 'logs'), nodeLifecycle: true });
  started.push(controller);
  const diskDir = join(work, 'wl-node-0');
  await seedDisks(diskDir, 2, 1024 * 1024);
  const agent = await startAgent(cp, { node: 'wl-node-0', diskDir, logDir: join(work, 'logs') });
  started.push(agent);
  // The controller has looked at every NodeDisk (its status says so) and the agent reported its own.
  const client = nodeDisksFor(cp.admin());
  let ownLists = 0; // this test's own, to wait for the programs: taken off the count below
  await eventually(
    'every NodeDisk has a status from the controller, and the agent reported its node',
    async () => {
      ownLists++;
      const items = (await client.list()).items;
      return items.every((nd) => nd.status?.conditions?.some((c) => c.type === 'Ready')) && items.filter((nd) => nd.spec.nodeName === 'wl-node-0').every((nd) => nd.status?.node?.phase);
    },
    90_000,
  );
  await Promise.all([controller.stop(), agent.stop()]);
  started.length = 0;
  t.is((await lists(cp, 'nodedisks')) - ownLists, before.nodedisks, "no LIST of nodedisks but this test's own");
  t.is(await lists(cp, 'nodes'), before.nodes, 'no LIST of nodes');
  t.is(await lists(cp, 'leases'), before.leases, 'no LIST of leases');
  t.is(await lists(cp, 'nodediskclaims'), before.claims, 'no LIST of nodediskclaims');
  t.is(await lists(cp, 'namespaces'), before.namespaces, 'no LIST of namespaces');
  t.false(controller.logs(Number.MAX_SAFE_INTEGER).includes('listing in pages'));
});

test.serial('against an API server with the WatchList feature gate off, the informer lists in pages', async (t) => {
  const cp = await ControlPlane.start({ apiserverFlags: ['--feature-gates=WatchList=false'] });
  try {
    const client = nodeDisksFor(cp.admin());
    for (let i = 0; i < 3; i++) await client.create(newNodeDisk('gate-off', `disk${i}`), { fieldManager: 'test' });
    const before = await lists(cp, 'nodedisks');
    const lines: string[] = [];
    const { inf, stop } = informer(client, lines);
    try {
      await eventually('synced', async () => inf.hasSynced, 30_000);
      t.is(inf.cache.size, 3);
      const changed = await client.mergePatch(nodeDiskName('gate-off', 'disk0'), { metadata: { labels: { touched: 'yes' } } }, { fieldManager: 'test' });
      await eventually('the change seen', async () => inf.cache.get(nodeDiskName('gate-off', 'disk0'))?.metadata.resourceVersion === changed.metadata.resourceVersion, 10_000);
    } finally {
      await stop();
    }
    t.true((await lists(cp, 'nodedisks')) > before, 'a paged LIST');
    t.is(inf.error, undefined);
    const fallback = lines.find((l) => l.includes('no streaming watch-list; listing in pages')) ?? '';
    t.regex(fallback, /422: .*sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled/, lines.join('\n'));
  } catch (err) {
    console.error(cp.logs(8 * 1024));
    throw err;
  } finally {
    await cp.stop();
  }
});
