// The agent's finalizer (ADR 12): present whenever node-side reservation state may exist for a NodeDisk.
// Added before a marker is written, removed only after the marker is gone, so a reserved NodeDisk cannot
// be deleted out from under its reservation (as kubernetes.io/pvc-protection holds a PVC in use).
// Both changes are JSON merge patches of metadata.finalizers guarded by the resourceVersion they were
// computed from (a concurrent change of the list is a 409, retried from fresh state), and the admission
// policy lets the agent change nothing else on the NodeDisk itself.
import { FIELD_MANAGER, FINALIZER } from '../api/constants.ts';
import type { NodeDiskClient } from '../api/client.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';

export function isProtected(nd: NodeDisk): boolean {
  return nd.metadata.finalizers?.includes(FINALIZER) ?? false;
}

export async function addProtection(client: Pick<NodeDiskClient, 'mergePatch'>, nd: NodeDisk): Promise<NodeDisk> {
  const finalizers = [...(nd.metadata.finalizers ?? []), FINALIZER];
  return await client.mergePatch(nd.metadata.name ?? '', { metadata: { resourceVersion: nd.metadata.resourceVersion, finalizers } }, { fieldManager: FIELD_MANAGER.agent });
}

export async function removeProtection(client: Pick<NodeDiskClient, 'mergePatch'>, nd: NodeDisk): Promise<NodeDisk> {
  const rest = (nd.metadata.finalizers ?? []).filter((f) => f !== FINALIZER);
  return await client.mergePatch(
    nd.metadata.name ?? '',
    { metadata: { resourceVersion: nd.metadata.resourceVersion, finalizers: rest.length ? rest : null } },
    { fieldManager: FIELD_MANAGER.agent },
  );
}
