// Controller configuration from flags and environment.
import { hostname } from 'node:os';
import yargs from 'yargs';
import { DEFAULT_SYSTEM_NAMESPACE } from '../api/constants.ts';
import { daemonConfig, daemonFlags, stopIfHelp, strictFlags } from '../lib/runtime/flags.ts';
import { parseDuration } from '../lib/runtime/duration.ts';
import type { Level } from '../lib/runtime/log.ts';

export interface ControllerConfig {
  kubeconfig: string | undefined;
  httpAddress: string;
  leaderElect: boolean;
  leaderElectionNamespace: string;
  leaderElectionId: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  staleAfterMs: number;
  agentLeaseNamespace: string;
  firstReportGraceMs: number;
  nodeLifecycle: boolean;
  nodeGoneGraceMs: number;
  workers: number;
  kubeApiQps: number;
  kubeApiBurst: number;
  logLevel: Level;
  /** Informers sync through the streaming watch-list where the API server offers it (docs/adr/0023). */
  watchList: boolean;
}

export function parseControllerConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): ControllerConfig {
  const parser = daemonFlags(
    yargs(argv).scriptName('node-disks-operator').usage('$0 [flags]\n\nApplies the auto-reserve label policy to NodeDisks, reports their conditions, and binds NodeDiskClaims to free NodeDisks.'),
    env,
  )
    .option('leader-elect', { type: 'boolean', default: true, describe: 'Use a Lease so only one replica acts' })
    .option('leader-election-namespace', { type: 'string', default: env.POD_NAMESPACE ?? DEFAULT_SYSTEM_NAMESPACE })
    .option('leader-election-id', { type: 'string', default: 'node-disks-operator.localtest.example.com' })
    .option('identity', { type: 'string', default: env.POD_NAME ?? `${hostname()}-${process.pid}`, describe: 'This replica in the Lease and in Events' })
    .option('lease-duration', { type: 'string', default: '15s' })
    .option('renew-deadline', { type: 'string', default: '10s' })
    .option('retry-period', { type: 'string', default: '2s' })
    .option('agent-lease-namespace', {
      type: 'string',
      default: env.POD_NAMESPACE ?? DEFAULT_SYSTEM_NAMESPACE,
      defaultDescription: `$POD_NAMESPACE or ${DEFAULT_SYSTEM_NAMESPACE}`,
      describe: "Namespace of the agents' heartbeat Leases: Ready turns Unknown (AgentStale) when a node's Lease expires",
    })
    .option('agent-stale-after', {
      type: 'string',
      default: env.AGENT_STALE_AFTER ?? '15m',
      describe: 'For a node with no heartbeat Lease (an agent older than it): Ready turns Unknown when its report is older than this',
    })
    .option('agent-report-grace', {
      type: 'string',
      default: env.AGENT_REPORT_GRACE ?? '5s',
      describe: "How long a new NodeDisk waits for its agent's first report before its status says WaitingForAgent (one status write per new disk instead of two); 0 writes at once",
    })
    // Long enough for a reboot, a brief deletion and re-registration, or a machine's replacement under the
    // same name to show up before its disks are forgotten (ADR 35).
    .option('node-lifecycle', {
      type: 'boolean',
      default: true,
      describe: 'Watch Nodes: the NodeDisks of a deleted Node turn Ready False (NodeGone), are not reserved by the label, and the unreserved ones are deleted after --node-gone-grace',
    })
    .option('node-gone-grace', {
      type: 'string',
      default: env.NODE_GONE_GRACE ?? '1h',
      describe: 'How long the NodeDisks of a deleted Node stay (Ready False, NodeGone) before the unreserved ones are deleted; reserved ones stay until a person releases them',
    })
    // kube-controller-manager's default for its concurrent syncs (--concurrent-deployment-syncs and the
    // like): enough to keep several requests in flight per round trip, few enough to keep the API server's
    // queue short. Each worker holds one NodeDisk at a time; the queue never hands one to two workers.
    .option('workers', { type: 'number', default: 5, describe: 'NodeDisks reconciled at once (one worker per NodeDisk at a time)' })
    // A fuse, not a throttle: at the defaults the API server (its CPU, its priority and fairness) is what
    // bounds a cold start of tens of thousands of NodeDisks, not this client. See docs/adr/0023.
    .option('kube-api-qps', { type: 'number', default: 500, describe: "Requests per second to the API server, all workers together (client-go's QPS); leader election is not counted" })
    .option('kube-api-burst', { type: 'number', default: 1000, describe: "Requests allowed at once above --kube-api-qps before it applies (client-go's burst)" });
  const a = strictFlags(parser).parseSync();
  stopIfHelp(a);
  const daemon = daemonConfig(a);
  const cfg: ControllerConfig = {
    kubeconfig: daemon.kubeconfig,
    httpAddress: daemon.httpAddress,
    leaderElect: a['leader-elect'],
    leaderElectionNamespace: a['leader-election-namespace'],
    leaderElectionId: a['leader-election-id'],
    identity: a.identity,
    leaseDurationMs: parseDuration(a['lease-duration'], '--lease-duration'),
    renewDeadlineMs: parseDuration(a['renew-deadline'], '--renew-deadline'),
    retryPeriodMs: parseDuration(a['retry-period'], '--retry-period'),
    staleAfterMs: parseDuration(a['agent-stale-after'], '--agent-stale-after'),
    agentLeaseNamespace: a['agent-lease-namespace'],
    firstReportGraceMs: a['agent-report-grace'] === '0' ? 0 : parseDuration(a['agent-report-grace'], '--agent-report-grace'),
    nodeLifecycle: a['node-lifecycle'],
    nodeGoneGraceMs: parseDuration(a['node-gone-grace'], '--node-gone-grace'),
    workers: a.workers,
    kubeApiQps: a['kube-api-qps'],
    kubeApiBurst: a['kube-api-burst'],
    logLevel: daemon.logLevel,
    watchList: daemon.watchList,
  };
  if (!(cfg.leaseDurationMs > cfg.renewDeadlineMs && cfg.renewDeadlineMs > cfg.retryPeriodMs)) {
    throw new Error('leader election timings must satisfy --lease-duration > --renew-deadline > --retry-period');
  }
  if (!Number.isInteger(cfg.workers) || cfg.workers < 1) throw new Error('--workers must be a positive integer');
  if (!(cfg.kubeApiQps > 0) || !Number.isFinite(cfg.kubeApiQps)) throw new Error(`--kube-api-qps must be a positive number of requests per second, got ${a['kube-api-qps']}`);
  if (!Number.isInteger(cfg.kubeApiBurst) || cfg.kubeApiBurst < 1) throw new Error(`--kube-api-burst must be a positive integer, got ${a['kube-api-burst']}`);
  return cfg;
}
