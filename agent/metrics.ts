import { Counter, Gauge, Histogram, Registry } from '../lib/runtime/prom-client.ts';
import { registerProcessMetrics } from '../lib/runtime/process-metrics.ts';

export function agentMetrics() {
  const registry = new Registry();
  registerProcessMetrics(registry);
  return {
    registry,
    disks: new Gauge({ name: 'nodedisks_agent_disks', help: 'NodeDisks of this node by reported phase', labelNames: ['phase'], registers: [registry] }),
    failingDisks: new Gauge({
      name: 'nodedisks_agent_failing_disks',
      help: 'NodeDisks of this node the agent saw failing (IO or filesystem errors) that no person has marked checked since',
      registers: [registry],
    }),
    ignoredFiles: new Gauge({ name: 'nodedisks_agent_ignored_files', help: 'Files named *.img in the disk dir that are not usable disk images', registers: [registry] }),
    statusWrites: new Counter({
      name: 'nodedisks_agent_status_writes_total',
      help: 'status.node writes, by cause (a change: the only one since the heartbeat is a Lease)',
      labelNames: ['cause'],
      registers: [registry],
    }),
    heartbeats: new Counter({
      name: 'nodedisks_agent_heartbeat_renewals_total',
      help: "Renewals of the node's heartbeat Lease, by result (renewed, failed)",
      labelNames: ['result'],
      registers: [registry],
    }),
    creates: new Counter({ name: 'nodedisks_agent_creates_total', help: 'NodeDisks created', registers: [registry] }),
    markerOps: new Counter({ name: 'nodedisks_agent_marker_operations_total', help: 'Marker files written or removed', labelNames: ['op'], registers: [registry] }),
    markerErrors: new Counter({
      name: 'nodedisks_agent_marker_operation_errors_total',
      help: 'Marker files that could not be written or removed, by operation (counted at each attempt)',
      labelNames: ['op'],
      registers: [registry],
    }),
    wipes: new Counter({
      name: 'nodedisks_agent_wipes_total',
      help: 'Disk images wiped for a wipe request (spec.desired.wipe), by result (wiped, failed; a failure is counted at each attempt)',
      labelNames: ['result'],
      registers: [registry],
    }),
    apiErrors: new Counter({ name: 'nodedisks_agent_api_errors_total', help: 'Failed API requests', labelNames: ['op'], registers: [registry] }),
    scanSeconds: new Histogram({ name: 'nodedisks_agent_scan_duration_seconds', help: 'Time to scan the disk dir', registers: [registry], buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5] }),
  };
}

export type AgentMetrics = ReturnType<typeof agentMetrics>;
