// Nodes deleted and registered again under their names (new UIDs) against a fleet of reported NodeDisks,
// what the churn benchmark (bench/node-churn.ts) and its test (test/integration/node-churn.test.ts)
// share: making the fleet and the Nodes, the churn itself, and what is read back (the controller's
// per-node state and Ready reasons from its /metrics, the NodeDisks' resourceVersions from the API server).
import { API_VERSION, FIELD_MANAGER, KIND } from '../../api/constants.ts';
import type { NodeDiskClient } from '../../api/client.ts';
import { isApiError } from '../../lib/kube/errors.ts';
import type { RestClient } from '../../lib/kube/rest.ts';
import { newNodeDisk } from './nodedisks.ts';
import { eventually } from './wait.ts';

const NODES_PATH = '/api/v1/nodes';

/** Runs `fn` over `items`, `concurrency` at a time. */
export async function pool<T>(items: readonly T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      for (let i = next++; i < items.length; i = next++) await fn(items[i]!);
    }),
  );
}

/** `count` NodeDisks spread round robin over `nodes`, created and reported Available as their agent would. */
export async function populateReportedFleet(client: NodeDiskClient, nodes: readonly string[], count: number, concurrency = 32): Promise<void> {
  const indexes = Array.from({ length: count }, (_, i) => i);
  await pool(indexes, concurrency, async (i) => {
    const nd = newNodeDisk(nodes[i % nodes.length]!, `disk${Math.floor(i / nodes.length) + 1}`);
    const name = (await client.create(nd, { fieldManager: FIELD_MANAGER.agent })).metadata.name ?? '';
    await client.applyStatus(
      {
        apiVersion: API_VERSION,
        kind: KIND,
        metadata: { name },
        status: { node: { phase: 'Available', capacityBytes: 64 * 2 ** 20, lastSeenTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') } },
      },
      { fieldManager: FIELD_MANAGER.agent },
    );
  });
}

/** Registers Nodes (objects only: no kubelet runs) and answers each one's UID. */
export async function createNodes(rest: RestClient, names: readonly string[], concurrency = 16): Promise<Map<string, string>> {
  const uids = new Map<string, string>();
  await pool(names, concurrency, async (name) => {
    const node = await rest.request<{ metadata: { uid: string } }>('POST', NODES_PATH, { body: { apiVersion: 'v1', kind: 'Node', metadata: { name } } });
    uids.set(name, node.metadata.uid);
  });
  return uids;
}

/** Deletes Nodes and waits until none of them can be read any more (no kubelet holds a finalizer). */
export async function deleteNodes(rest: RestClient, names: readonly string[], concurrency = 16): Promise<void> {
  await pool(names, concurrency, async (name) => {
    try {
      await rest.request('DELETE', `${NODES_PATH}/${name}`);
    } catch (err) {
      if (!isApiError(err, 404)) throw err;
    }
  });
  const wanted = new Set(names);
  await eventually(
    'the Nodes deleted',
    async () => (await rest.request<{ items: { metadata: { name: string } }[] }>('GET', NODES_PATH)).items.every((n) => !wanted.has(n.metadata.name)),
    60_000,
    100,
  );
}

/** The resourceVersion of every NodeDisk of `nodes`, read page by page. */
export async function versionsOn(client: NodeDiskClient, nodes: ReadonlySet<string>): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for await (const page of client.listPages({ pageSize: 500 })) {
    for (const nd of page.items) if (nodes.has(nd.spec.nodeName)) out.set(nd.metadata.name ?? '', nd.metadata.resourceVersion ?? '');
  }
  return out;
}

/** The NodeDisks whose version differs between two readings (or that one reading lacks). */
export function changed(before: ReadonlyMap<string, string>, after: ReadonlyMap<string, string>): string[] {
  const names = new Set([...before.keys(), ...after.keys()]);
  return [...names].filter((n) => before.get(n) !== after.get(n)).sort();
}

/** The controller's `nodedisks_controller_tracked_nodes` series: state → count. */
export function trackedNodes(metrics: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of metrics.matchAll(/^nodedisks_controller_tracked_nodes\{state="([^"]+)"\} (\S+)$/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

/** How many NodeDisks of the controller's cache have each Ready reason (`nodedisks_controller_nodedisks`). */
export function readyReasons(metrics: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of metrics.matchAll(/^nodedisks_controller_nodedisks\{[^}]*\bready="([^"]*)"[^}]*\} (\S+)$/gm)) out[m[1]!] = (out[m[1]!] ?? 0) + Number(m[2]);
  return out;
}

/** The sum of a counter's series, e.g. nodedisks_controller_writes_total. */
export function counterSum(metrics: string, name: string): number {
  let sum = 0;
  for (const line of metrics.split('\n')) if (line.startsWith(name) && (line[name.length] === '{' || line[name.length] === ' ')) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}
