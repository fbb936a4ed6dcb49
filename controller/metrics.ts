import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { registerProcessMetrics } from '../lib/runtime/process-metrics.ts';

/** `leading` is asked at each scrape: the `leader` gauge is never a remembered value. */
export function controllerMetrics(leading: () => boolean) {
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
  };
}

export type ControllerMetrics = ReturnType<typeof controllerMetrics>;
