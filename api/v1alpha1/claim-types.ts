// The NodeDiskClaim resource: a team's namespaced request for one NodeDisk (docs/adr/0034). The CRD schema
// in ./claim-schema.ts is tested against these types.

import type { Condition, ListMeta, ObjectMeta } from '../../lib/kube/types.ts';
import type { API_VERSION, CLAIM_KIND, CLAIM_LIST_KIND } from '../constants.ts';

export const CLAIM_PHASES = ['Pending', 'Bound', 'Lost'] as const;
export type ClaimPhase = (typeof CLAIM_PHASES)[number];

export const RECLAIM_POLICIES = ['Delete', 'Retain'] as const;
export type ReclaimPolicy = (typeof RECLAIM_POLICIES)[number];

export const SELECTOR_OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist'] as const;
export type SelectorOperator = (typeof SELECTOR_OPERATORS)[number];

/** metav1.LabelSelectorRequirement */
export interface LabelSelectorRequirement {
  key: string;
  operator: SelectorOperator;
  values?: string[];
}

/** metav1.LabelSelector, over NodeDisk labels. */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

export interface NodeDiskClaimSpec {
  /** Only disks of this node. */
  nodeName?: string;
  /** Only disks whose labels match. */
  selector?: LabelSelector;
  /** Only disks at least this big: a Kubernetes quantity such as 32Mi. */
  minCapacity?: string;
  /** This NodeDisk and no other. */
  diskName?: string;
  /** What happens to the disk when the claim is deleted: Delete releases it (the default), Retain keeps it reserved. */
  reclaimPolicy?: ReclaimPolicy;
}

/** Written by the controller only. */
export interface NodeDiskClaimStatus {
  phase?: ClaimPhase;
  diskName?: string;
  nodeName?: string;
  path?: string;
  capacityBytes?: number;
  /** Why the claim is Pending or Lost, in one line. */
  message?: string;
  observedGeneration?: number;
  conditions?: Condition[];
}

export interface NodeDiskClaim {
  apiVersion: typeof API_VERSION;
  kind: typeof CLAIM_KIND;
  metadata: ObjectMeta;
  spec: NodeDiskClaimSpec;
  status?: NodeDiskClaimStatus;
}

export interface NodeDiskClaimList {
  apiVersion: typeof API_VERSION;
  kind: typeof CLAIM_LIST_KIND;
  metadata: ListMeta;
  items: NodeDiskClaim[];
}
