// Which machine this agent runs on: the UID of its Node object (ADR 35). A Node deleted and registered
// again under the same name (a machine replaced, reinstalled, an autoscaling group reusing names) has
// another UID; the NodeDisks reported under the old one are another machine's.
//
// Learnt from the agent's own token, not from the Node: a SelfSubjectReview (authentication.k8s.io/v1,
// which every authenticated user may create) returns the token's user info, and a node-bound token (a
// pod's projected token, ADR 28) carries the node's name and UID as extras. No RBAC on Nodes is needed,
// and the UID is the one the API server checked the token against, the same the admission policy reads.
import type { RestClient } from '../lib/kube/rest.ts';

export const NODE_NAME_EXTRA = 'authentication.kubernetes.io/node-name';
export const NODE_UID_EXTRA = 'authentication.kubernetes.io/node-uid';

interface SelfSubjectReview {
  status?: { userInfo?: { username?: string; extra?: Record<string, string[]> } };
}

export interface NodeIdentity {
  /** The node's UID, or undefined when the token carries none (a token not bound to a node). */
  uid: string | undefined;
  /** The node name the token names, if any. */
  node: string | undefined;
}

/** Asks the API server who this agent's token is. Throws on an API failure (the caller retries). */
export async function tokenNodeIdentity(rest: RestClient, signal?: AbortSignal): Promise<NodeIdentity> {
  const review = await rest.request<SelfSubjectReview>('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
    ...(signal ? { signal } : {}),
  });
  const extra = review.status?.userInfo?.extra ?? {};
  return { uid: extra[NODE_UID_EXTRA]?.[0] || undefined, node: extra[NODE_NAME_EXTRA]?.[0] || undefined };
}
