import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import { CONDITION } from '../api/constants.ts';
import { registerProcessMetrics } from '../lib/runtime/process-metrics.ts';

/**
 * `leading` is asked at each scrape: the `leader` gauge is never a remembered value. `nodeDisks` (the
 * leader's informer cache; nothing on a replica that does not lead) is counted at each scrape too.
 */
export function controllerMetrics(leading: () => boolean, nodeDisks: () => Iterable<NodeDisk> = () => []) {
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
    // phase Available), Missing or Error ones, refused reservations (Accepted False) and stale agents
    // (Ready's reason AgentStale, judged from the heartbeat Lease even when the agent cannot be scraped).
    nodeDisks: new Gauge({
      name: 'nodedisks_controller_nodedisks',
      help: "NodeDisks in the leader's cache, by node, desired state, reported phase, Accepted status and Ready reason",
      labelNames: ['node', 'desired', 'phase', 'accepted', 'ready'],
      registers: [registry],
      collect() {
        const counts = new Map<string, { labels: Record<string, string>; n: number }>();
        for (const nd of nodeDisks()) {
          const cond = (type: string) => nd.status?.conditions?.find((c) => c.type === type);
          const labels = {
            node: nd.spec.nodeName,
            desired: nd.spec.desired?.state ?? 'Available',
            phase: nd.status?.node?.phase ?? '',
            accepted: cond(CONDITION.accepted)?.status ?? '',
            ready: cond(CONDITION.ready)?.reason ?? '',
          };
          const key = JSON.stringify(labels);
          const c = counts.get(key);
          if (c) c.n++;
          else counts.set(key, { labels, n: 1 });
        }
        // Only the combinations there are now: one that is gone is not left at its last count.
        this.reset();
        for (const { labels, n } of counts.values()) this.set(labels, n);
      },
    }),
  };
}

export type ControllerMetrics = ReturnType<typeof controllerMetrics>;
