import { Counter, Gauge, Histogram, Registry } from '../lib/runtime/prom-client.ts';
import { CLAIM_PHASES, type NodeDiskClaim } from '../api/v1alpha1/claim-types.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import { CONDITION, REASON_CLAIM_GONE } from '../api/constants.ts';
import { ownerKind } from '../api/owner.ts';
import { registerProcessMetrics } from '../lib/runtime/process-metrics.ts';

/** A node's heartbeat as the leader sees it: seconds since it saw the node's Lease renewed. */
export interface HeartbeatAge {
  node: string;
  ageSeconds: number;
}

/**
 * `leading` is asked at each scrape: the `leader` gauge is never a remembered value. `nodeDisks` (the
 * leader's informer cache; nothing on a replica that does not lead) is counted at each scrape too, and so
 * are `heartbeats` (the leader's view of the agents' heartbeat Leases; none on a replica that does not lead)
 * and `claims` (the leader's NodeDiskClaim cache).
 */
export function controllerMetrics(
  leading: () => boolean,
  nodeDisks: () => Iterable<NodeDisk> = () => [],
  heartbeats: () => Iterable<HeartbeatAge> = () => [],
  tracked: () => Readonly<Record<string, number>> = () => ({}),
  claims: () => Iterable<NodeDiskClaim> = () => [],
) {
  const registry = new Registry();
  registerProcessMetrics(registry);
  return {
    registry,
    reconciles: new Counter({ name: 'nodedisks_controller_reconcile_total', help: 'Reconciles, by result', labelNames: ['result'], registers: [registry] }),
    reconcileSeconds: new Histogram({
      name: 'nodedisks_controller_reconcile_duration_seconds',
      help: 'Reconcile duration',
      registers: [registry],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
    }),
    writes: new Counter({ name: 'nodedisks_controller_writes_total', help: 'Writes to the API server, by kind', labelNames: ['kind'], registers: [registry] }),
    conflicts: new Counter({
      name: 'nodedisks_controller_stale_writes_total',
      help: 'Writes refused because the NodeDisk changed since it was read (decided again from a fresh read)',
      registers: [registry],
    }),
    policyActions: new Counter({ name: 'nodedisks_controller_policy_actions_total', help: 'Label policy actions', labelNames: ['action'], registers: [registry] }),
    apiErrors: new Counter({
      name: 'nodedisks_controller_api_errors_total',
      help: 'Failed API requests (refused with an HTTP status, or no answer: code "none"), by verb and code',
      labelNames: ['verb', 'code'],
      registers: [registry],
    }),
    queueDepth: new Gauge({ name: 'nodedisks_controller_workqueue_depth', help: 'Keys waiting in the work queue', registers: [registry] }),
    leader: new Gauge({
      name: 'nodedisks_controller_leader',
      help: '1 while this replica leads (its leadership confirmed within the renew deadline)',
      registers: [registry],
      collect() {
        this.set(leading() ? 1 : 0);
      },
    }),
    // What the alerts and dashboards need per node, as the controller sees it: free disks (desired and
    // phase Available), Missing or Error ones, refused reservations (Accepted False), stale agents
    // (Ready's reason AgentStale, judged from the heartbeat Lease even when the agent cannot be scraped)
    // and the kind of owner of each reservation (api/owner.ts: five values, never the owner string).
    nodeDisks: new Gauge({
      name: 'nodedisks_controller_nodedisks',
      help: "NodeDisks in the leader's cache, by node, desired state, reported phase, Accepted status, Ready reason and kind of owner",
      labelNames: ['node', 'desired', 'phase', 'accepted', 'ready', 'owner'],
      registers: [registry],
      collect() {
        countInto(
          this,
          nodeDisks(),
          (nd) => {
            const cond = (type: string) => nd.status?.conditions?.find((c) => c.type === type);
            return {
              node: nd.spec.nodeName,
              desired: nd.spec.desired?.state ?? 'Available',
              phase: nd.status?.node?.phase ?? '',
              accepted: cond(CONDITION.accepted)?.status ?? '',
              ready: cond(CONDITION.ready)?.reason ?? '',
              owner: ownerKind(nd.spec.desired),
            };
          },
          () => 1,
        );
      },
    }),
    // Free capacity is desired and phase Available, reserved capacity desired Reserved: the bytes the
    // agents report (a disk not reported yet counts 0).
    capacityBytes: new Gauge({
      name: 'nodedisks_controller_nodedisk_capacity_bytes',
      help: "Reported capacity of the NodeDisks in the leader's cache, by node, desired state and reported phase",
      labelNames: ['node', 'desired', 'phase'],
      registers: [registry],
      collect() {
        countInto(
          this,
          nodeDisks(),
          (nd) => ({ node: nd.spec.nodeName, desired: nd.spec.desired?.state ?? 'Available', phase: nd.status?.node?.phase ?? '' }),
          (nd) => nd.status?.node?.capacityBytes ?? 0,
        );
      },
    }),
    // By phase only: a namespace label would be one series per team, and `kubectl get ndc -A` answers
    // "whose". The three phases are always there (0 included), so a panel or an alert needs no absent();
    // a claim the binder has not written yet has phase "".
    claims: new Gauge({
      name: 'nodedisks_controller_claims',
      help: 'NodeDiskClaims in the leader\'s cache, by phase ("": not looked at yet)',
      labelNames: ['phase'],
      registers: [registry],
      collect() {
        const n = new Map<string, number>(CLAIM_PHASES.map((p) => [p, 0]));
        for (const c of claims()) {
          const phase = c.status?.phase ?? '';
          n.set(phase, (n.get(phase) ?? 0) + 1);
        }
        this.reset();
        for (const [phase, count] of n) this.set({ phase }, count);
      },
    }),
    // Reservations held for a claim that is gone (Accepted reason ClaimGone, as the controller wrote it):
    // Released disks that keep their data and nobody uses until a person releases them. No label: the
    // NodeDisks say which (kubectl nodedisks status), and a team's namespace would be one series per team.
    orphanedClaimReservations: new Gauge({
      name: 'nodedisks_controller_orphaned_claim_reservations',
      help: "NodeDisks in the leader's cache reserved for a NodeDiskClaim that is gone (Accepted reason ClaimGone): Released, kept with their data until a person releases them",
      registers: [registry],
      collect() {
        let n = 0;
        for (const nd of nodeDisks()) if (nd.status?.conditions?.some((c) => c.type === CONDITION.accepted && c.reason === REASON_CLAIM_GONE)) n++;
        this.set(n);
      },
    }),
    // From the claim's creationTimestamp (whole seconds: a bind within the second of its create counts up
    // to 1 s long) to the binder's Bound write, for claims Bound for the first time.
    claimBindSeconds: new Histogram({
      name: 'nodedisks_controller_claim_bind_duration_seconds',
      help: 'Seconds from a NodeDiskClaim created to Bound (its first binding), as the binder writes it',
      registers: [registry],
      buckets: [0.5, 1, 2, 5, 10, 30, 60, 300, 1800, 3600],
    }),
    heartbeatAge: new Gauge({
      name: 'nodedisks_controller_agent_heartbeat_age_seconds',
      help: "Seconds since the leader saw each node's agent heartbeat Lease renewed",
      labelNames: ['node'],
      registers: [registry],
      collect() {
        this.reset();
        for (const { node, ageSeconds } of heartbeats()) this.set({ node }, ageSeconds);
      },
    }),
    // The controller's own per-node state, by structure: what must not grow as Nodes come and go.
    trackedNodes: new Gauge({
      name: 'nodedisks_controller_tracked_nodes',
      help: "Nodes the leader keeps an entry for, by structure: node_cache (Nodes that exist), disks_by_node and gone_since (nodes some NodeDisk names), heartbeats and heartbeat_leases (the agents' Leases)",
      labelNames: ['state'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [state, n] of Object.entries(tracked())) this.set({ state }, n);
      },
    }),
  };
}

/**
 * Sets `gauge` to the sum of `value` over `items`, per label set: only the combinations there are now, so
 * one that is gone is not left at its last value.
 */
function countInto<L extends string>(gauge: Gauge<L>, items: Iterable<NodeDisk>, labelsOf: (nd: NodeDisk) => Record<L, string>, value: (nd: NodeDisk) => number): void {
  const sums = new Map<string, { labels: Record<L, string>; n: number }>();
  for (const nd of items) {
    const labels = labelsOf(nd);
    const key = JSON.stringify(labels);
    const c = sums.get(key);
    if (c) c.n += value(nd);
    else sums.set(key, { labels, n: value(nd) });
  }
  gauge.reset();
  for (const { labels, n } of sums.values()) gauge.set(labels, n);
}

export type ControllerMetrics = ReturnType<typeof controllerMetrics>;
