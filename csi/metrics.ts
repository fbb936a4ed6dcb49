// What each side of the CSI driver serves on /metrics: how long its CSI calls take, by method and
// answer, under the names and labels of the CSI sidecars' own histogram (csi-lib-utils), so one query reads
// the provisioner's view of a call beside the driver's. And the process metrics the other programs export.
import { Histogram, Registry } from '../lib/runtime/prom-client.ts';
import { registerProcessMetrics } from '../lib/runtime/process-metrics.ts';

/** From a quick probe to a large disk's mkfs; a call past the last bucket is counted only in +Inf. */
const CALL_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600];

export type CallHistogram = Histogram<'method_name' | 'grpc_status_code'>;

export function csiMetrics(): { registry: Registry; calls: CallHistogram } {
  const registry = new Registry();
  registerProcessMetrics(registry);
  const calls = new Histogram({
    name: 'nodedisks_csi_operations_seconds',
    help: 'CSI calls this side served, by method (its full gRPC name) and answer (the gRPC status code name), from arrival to answer',
    labelNames: ['method_name', 'grpc_status_code'],
    buckets: CALL_BUCKETS,
    registers: [registry],
  });
  return { registry, calls };
}
