// What the controller keeps of a NodeDisk in its informer cache: only what the policy, the reconcile and
// the conditions read (ADR 23: on a large fleet whole objects, managedFields above all, were most of the
// controller's memory). Everything else of the object is dropped as it arrives.
//
// Kept: metadata name, uid, resourceVersion, generation, creationTimestamp, deletionTimestamp, finalizers
// (what keeps the disk of a gone node, ADR 35), the labels (the policy's auto-reserve and cordoned
// labels; a NodeDiskClaim's selector may name any) and the wipe-on-release annotation (ADR 38); spec.nodeName, spec.diskID (the CSI driver's volume context), spec.path, spec.desired; status as it
// is (node report and the controller's own conditions, small). A field the controller starts to read must
// be kept here too: test/unit/cache.test.ts decides, reports and writes from the lean copy and from the
// whole object and requires the same result.
import { ANNOTATION_WIPE_ON_RELEASE, API_VERSION, KIND } from '../api/constants.ts';
import type { NodeDisk, ObjectMeta } from '../api/v1alpha1/types.ts';

export function leanNodeDisk(nd: NodeDisk): NodeDisk {
  const m = nd.metadata;
  const metadata: ObjectMeta = {};
  if (m.name !== undefined) metadata.name = m.name;
  if (m.uid !== undefined) metadata.uid = m.uid;
  if (m.resourceVersion !== undefined) metadata.resourceVersion = m.resourceVersion;
  if (m.generation !== undefined) metadata.generation = m.generation;
  if (m.creationTimestamp !== undefined) metadata.creationTimestamp = m.creationTimestamp;
  if (m.deletionTimestamp !== undefined) metadata.deletionTimestamp = m.deletionTimestamp;
  if (m.finalizers !== undefined) metadata.finalizers = m.finalizers;
  // All labels, by reference: the policy reads the auto-reserve and cordoned labels, a claim's selector any of them.
  if (m.labels !== undefined) metadata.labels = m.labels;
  // Of the annotations only the one the label policy reads (ADR 38): the rest are people's, and large.
  const wipeOnRelease = m.annotations?.[ANNOTATION_WIPE_ON_RELEASE];
  if (wipeOnRelease !== undefined) metadata.annotations = { [ANNOTATION_WIPE_ON_RELEASE]: wipeOnRelease };
  const { nodeName, diskID, path, desired } = nd.spec;
  const spec: NodeDisk['spec'] = { nodeName, diskID, path, ...(desired !== undefined ? { desired } : {}) };
  // By reference: the rest of the parsed object becomes garbage, what is kept here is all that stays
  // reachable. As small a heap as a deep copy through JSON at a fraction of its CPU, and smaller than a
  // copy through structuredClone (`node bench/cache-heap.ts`; the figures are in docs/benchmarks.md).
  return { apiVersion: API_VERSION, kind: KIND, metadata, spec, ...(nd.status !== undefined ? { status: nd.status } : {}) };
}
