// The agent's heartbeat (ADR 24): one coordination.k8s.io/v1 Lease per node, in the system namespace,
// renewed by that node's agent and read by the controller. The agent and the controller import this; the
// admission policy (kustomize/policies/agent_heartbeat_policy.yaml) spells the same name rule in CEL.
import { createHash } from 'node:crypto';
import { GROUP, MAX_NAME_LENGTH } from './constants.ts';
import { HASH_LENGTH } from './names.ts';

export const HEARTBEAT_LEASE_PREFIX = 'node-disks-agent-';
/** Set on every heartbeat Lease: what the controller selects its Leases by. */
export const LABEL_HEARTBEAT = `${GROUP}/agent-heartbeat`;
export const HEARTBEAT_LABEL_VALUE = 'true';
/** A heartbeat Lease lasts this many heartbeat periods, as a kubelet's node lease (40 s, renewed every 10 s). */
export const LEASE_PERIODS = 4;

/**
 * `node-disks-agent-<node>`. A node name is a DNS subdomain, so this is one too while it fits in 253
 * characters; a longer one keeps the first 242 characters (a trailing dot made a dash) and ends in `-` and
 * a hash of the node name, as long NodeDisk names do.
 */
export function heartbeatLeaseName(nodeName: string): string {
  const full = `${HEARTBEAT_LEASE_PREFIX}${nodeName}`;
  if (full.length <= MAX_NAME_LENGTH) return full;
  const head = full.slice(0, MAX_NAME_LENGTH - HASH_LENGTH - 1).replace(/\.$/, '-');
  return `${head}-${createHash('sha256').update(nodeName).digest('hex').slice(0, HASH_LENGTH)}`;
}

/**
 * The node a heartbeat Lease speaks for: its holderIdentity, when the Lease bears that node's own name
 * (`heartbeatLeaseName`). Any other Lease speaks for no node, whatever it holds or is labelled: the
 * admission policy ties each agent to its own name, not to the label (anyone who may write Leases in the
 * namespace can label one).
 */
export function heartbeatLeaseNode(lease: { metadata?: { name?: string }; spec?: { holderIdentity?: string } }): string | undefined {
  const node = lease.spec?.holderIdentity;
  return node && lease.metadata?.name === heartbeatLeaseName(node) ? node : undefined;
}
