// coordination.k8s.io/v1 Leases: the type (the fields in use), where they live, and their MicroTime. Used
// by leader election (./leader-election.ts) and by the product's heartbeat Leases.
import type { ObjectMeta } from './types.ts';

export const LEASES_API = 'coordination.k8s.io/v1';

export interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

/** A coordination.k8s.io/v1 Lease, the fields we use. */
export interface Lease {
  apiVersion?: typeof LEASES_API;
  kind?: 'Lease';
  metadata: Pick<ObjectMeta, 'name' | 'namespace' | 'resourceVersion' | 'labels' | 'ownerReferences' | 'managedFields'>;
  spec?: LeaseSpec;
}

/** The Leases of a namespace. */
export function leasesPath(namespace: string): string {
  return `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases`;
}

/** A Lease's MicroTime (metav1.MicroTime: RFC 3339 with microseconds). */
export function microTime(d = new Date()): string {
  return d.toISOString().replace(/Z$/, '000Z');
}
