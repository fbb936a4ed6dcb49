// The parts of the Kubernetes API's own types (meta/v1) this client and its users read, as the API server
// sends them in JSON (times are RFC 3339 strings). Generic over any resource: the product's types (api/)
// build on these, never the other way round.

/** The part of metav1.ManagedFieldsEntry a program reads (to name who owns a field). */
export interface ManagedFieldsEntry {
  manager?: string;
  operation?: 'Apply' | 'Update';
  apiVersion?: string;
  time?: string;
  fieldsType?: string;
  fieldsV1?: Record<string, unknown>;
  subresource?: string;
}

/** metav1.OwnerReference */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** The part of metav1.ObjectMeta in use. */
export interface ObjectMeta {
  name?: string;
  /** Namespaced objects only. */
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  managedFields?: ManagedFieldsEntry[];
}

/** metav1.ListMeta */
export interface ListMeta {
  resourceVersion?: string;
  continue?: string;
  remainingItemCount?: number;
}

/** Any object of the API: what the informer caches and the pager lists. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
}

/** A list of T, as a list request answers. */
export interface KubeList<T> {
  apiVersion?: string;
  kind?: string;
  metadata: ListMeta;
  items: T[];
}

export type ConditionStatus = 'True' | 'False' | 'Unknown';

/** metav1.Condition */
export interface Condition {
  type: string;
  status: ConditionStatus;
  observedGeneration?: number;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

/** metav1.Status, the body of every API error (and of a watch's ERROR event). */
export interface Status {
  kind?: 'Status';
  apiVersion?: string;
  metadata?: ListMeta;
  status?: 'Success' | 'Failure';
  message?: string;
  reason?: string;
  code?: number;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    causes?: { reason?: string; message?: string; field?: string }[];
    retryAfterSeconds?: number;
  };
}
