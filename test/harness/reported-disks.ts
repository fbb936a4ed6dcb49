// NodeDisks as their agent would have made and reported them, for tests that need a node's disks without
// running its agent (a gone node's, say), and a read that tells "gone" from an error.
import { API_VERSION, FIELD_MANAGER, KIND } from '../../api/constants.ts';
import type { NodeDiskClient } from '../../api/client.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { isApiError } from '../../lib/kube/errors.ts';

export interface ReportedDisk {
  desired?: NodeDisk['spec']['desired'];
  labels?: Record<string, string>;
  finalizers?: string[];
  /** Give the report a lastSeenTime of now (a fresh report, for a node with no heartbeat Lease). */
  seenNow?: boolean;
}

/** Creates the NodeDisk with the agent's field manager and reports it in the phase of its desired state; returns its name. */
export async function reportedNodeDisk(client: NodeDiskClient, node: string, disk: string, o: ReportedDisk = {}): Promise<string> {
  const body = newNodeDisk(node, disk);
  if (o.desired) body.spec.desired = o.desired;
  if (o.labels) body.metadata.labels = { ...body.metadata.labels, ...o.labels };
  if (o.finalizers) body.metadata.finalizers = o.finalizers;
  const name = (await client.create(body, { fieldManager: FIELD_MANAGER.agent })).metadata.name ?? '';
  const seen = o.seenNow ? { lastSeenTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') } : {};
  await client.applyStatus(
    { apiVersion: API_VERSION, kind: KIND, metadata: { name }, status: { node: { phase: o.desired?.state ?? 'Available', capacityBytes: 1 << 20, ...seen } } },
    { fieldManager: FIELD_MANAGER.agent },
  );
  return name;
}

/** The NodeDisk, or undefined once it is deleted. */
export async function getOrGone(client: NodeDiskClient, name: string): Promise<NodeDisk | undefined> {
  try {
    return await client.get(name);
  } catch (err) {
    if (isApiError(err, 404)) return undefined;
    throw err;
  }
}
