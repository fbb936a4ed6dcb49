// node-disks-operator: entry point. Exit codes: 0 after SIGTERM/SIGINT, 2 for bad configuration.
import { NodeDiskClaimClient } from '../api/claim-client.ts';
import { NodeDiskClient } from '../api/client.ts';
import { loadKubeConfig } from '../lib/kube/kubeconfig.ts';
import { TokenBucket } from '../lib/kube/ratelimit.ts';
import { RestClient } from '../lib/kube/rest.ts';
import { configuredOrExit, opsServerOrExit, shutdownSignal } from '../lib/runtime/daemon.ts';
import { createLogger } from '../lib/runtime/log.ts';
import { cgroupMemoryLimit, heapProblem } from '../lib/runtime/memory.ts';
import { parseControllerConfig } from './config.ts';
import { Binder } from './claim-binder.ts';
import { Controller } from './controller.ts';
import { EventRecorder } from './events.ts';
import { AgentHeartbeats } from './agent-liveness.ts';
import { LeaderElector, NotLeaderError } from '../lib/kube/leader-election.ts';
import { controllerMetrics } from './metrics.ts';
import { Nodes } from './nodes.ts';
import { Reconciler } from './reconciler.ts';

const { config, rest: baseRest } = configuredOrExit(() => {
  const config = parseControllerConfig(process.argv.slice(2));
  const access = loadKubeConfig({ kubeconfig: config.kubeconfig });
  const userAgent = `node-disks-operator (${config.identity.replace(/[^\x20-\x7e]/g, '_')})`;
  return { config, rest: new RestClient(access, { timeoutMs: 30_000, userAgent }) };
});

// The gauges are read from the elector's clock at each scrape, so they cannot lag behind a lost lease:
// a replica that does not lead counts no NodeDisk (its last term's cache is not the cluster any more).
const leading = () => elector?.isLeader ?? true;
const metrics = controllerMetrics(
  leading,
  () => (controller && leading() ? controller.informer.cache.values() : []),
  () => (heartbeats && leading() ? heartbeats.ages() : []),
  () => {
    if (!leading()) return {};
    const n = nodes?.tracked;
    const h = heartbeats?.tracked;
    return { ...(n ? { node_cache: n.nodes, disks_by_node: n.disksByNode, gone_since: n.goneSince } : {}), ...h };
  },
  () => (binder && leading() ? binder.informer.cache.values() : []),
);
// Every request of the process counts in the API errors counter, leader election's included.
const rest = baseRest.with({ onError: (verb, err) => metrics.apiErrors.inc({ verb, code: 'statusCode' in err ? String(err.statusCode) : 'none' }) });

// Every request of the controller's work (workers, informer, events) shares one bucket. Leader election
// keeps the client without it, as kube-controller-manager gives it a client of its own: a renewal must
// never wait behind a queue of writes, or a busy leader would lose its lease.
const workRest = rest.with({ rateLimiter: new TokenBucket({ qps: config.kubeApiQps, burst: config.kubeApiBurst }) });

const log = createLogger('node-disks-operator', { level: config.logLevel, base: { identity: config.identity } });
const stopping = shutdownSignal(log);

const elector = config.leaderElect
  ? new LeaderElector({
      rest,
      namespace: config.leaderElectionNamespace,
      name: config.leaderElectionId,
      identity: config.identity,
      leaseDurationMs: config.leaseDurationMs,
      renewDeadlineMs: config.renewDeadlineMs,
      retryPeriodMs: config.retryPeriodMs,
      log,
    })
  : undefined;

/** A controller whose every request goes through `termRest`, its claims binder, and the agents' heartbeats it judges staleness by. */
function newController(termRest: RestClient): { controller: Controller; binder: Binder; heartbeats: AgentHeartbeats; nodes: Nodes | undefined } {
  const client = new NodeDiskClient(termRest);
  // A node whose heartbeat turned stale or fresh: its disks' Ready condition is decided again, and the
  // claims that could (not) use them look again.
  const heartbeats: AgentHeartbeats = new AgentHeartbeats({
    rest: termRest,
    namespace: config.agentLeaseNamespace,
    log,
    watchList: config.watchList,
    onChange: (nodes) => {
      for (const [name, nd] of c.informer.cache) if (nodes.has(nd.spec.nodeName)) c.queue.add(name);
      b.diskChanged();
    },
  });
  // A node that appeared, went or was replaced: its disks are decided again (NodeGone, ADR 35).
  const nodes: Nodes | undefined = config.nodeLifecycle
    ? new Nodes({
        rest: termRest,
        log,
        watchList: config.watchList,
        onChange: (changed) => {
          for (const [name, nd] of c.informer.cache) if (changed.has(nd.spec.nodeName)) c.queue.add(name);
          b.diskChanged();
        },
      })
    : undefined;
  // One recorder, one token bucket, for all of this controller's events: NodeDisks' and claims'.
  const events = new EventRecorder(termRest, config.identity, log);
  const reconciler = new Reconciler({
    client,
    events,
    log,
    metrics,
    staleAfterMs: config.staleAfterMs,
    firstReportGraceMs: config.firstReportGraceMs,
    heartbeats,
    ...(nodes ? { nodes } : {}),
    nodeGoneGraceMs: config.nodeGoneGraceMs,
    driveElsewhere: (nd): string[] => c.drivePresentOn(nd),
    claims: {
      get hasSynced() {
        return b.informer.hasSynced;
      },
      claimGoneOf: (nd) => b.claimGoneOf(nd),
    },
  });
  const c: Controller = new Controller({
    client,
    reconciler,
    workers: config.workers,
    watchList: config.watchList,
    log,
    metrics,
    onNodeDisk: (name) => b.diskChanged(name),
    ...(nodes ? { nodes } : {}),
  });
  const b: Binder = new Binder({
    claims: new NodeDiskClaimClient(termRest),
    disks: client,
    diskInformer: c.informer,
    heartbeats,
    staleAfterMs: config.staleAfterMs,
    workers: config.workers,
    log: log.with({ loop: 'claims' }),
    events,
    bindSeconds: metrics.claimBindSeconds,
    watchList: config.watchList,
    // Its disks' Accepted condition says ClaimGone now.
    onClaimGone: (owner) => {
      for (const name of b.reservedFor(owner)) c.queue.add(name);
    },
  });
  return { controller: c, binder: b, heartbeats, nodes };
}
let controller: Controller | undefined;
let binder: Binder | undefined;
let heartbeats: AgentHeartbeats | undefined;
let nodes: Nodes | undefined;

const ops = await opsServerOrExit({
  address: config.httpAddress,
  registry: metrics.registry,
  healthz: () => undefined,
  // A standby is ready when it could take over (it reaches the lease); the leader when it can do the work.
  readyz: () => {
    if (elector && !elector.isLeader) return elector.problem;
    return controller ? (controller.readiness() ?? binder?.readiness() ?? heartbeats?.readiness()) : 'starting';
  },
});
log.info('controller started', {
  httpPort: ops.port,
  leaderElect: config.leaderElect,
  nodeLifecycle: config.nodeLifecycle,
  nodeGoneGraceMs: config.nodeGoneGraceMs,
  workers: config.workers,
  watchList: config.watchList,
  kubeApiQps: config.kubeApiQps,
  kubeApiBurst: config.kubeApiBurst,
});
// The heap must fit the container's memory limit (docs/adr/0023): say so at once if it was not sized.
const memoryLimit = cgroupMemoryLimit();
const heapWarning = heapProblem(memoryLimit);
if (heapWarning) log.warn(heapWarning, { memoryLimitBytes: memoryLimit });

if (elector) {
  // Each term of leadership runs a fresh controller whose requests all carry the term's signal and pass
  // the elector's clock check right before they leave: when leadership cannot be confirmed, nothing more
  // is sent and everything in flight is cancelled. The process itself stays up and competes again.
  while (!stopping.aborted && (await elector.acquire(stopping))) {
    const term = new AbortController();
    const gate = () => {
      if (elector.isLeader) return;
      term.abort(); // found out here first (a frozen process wakes): end the whole term at once
      throw new NotLeaderError();
    };
    ({ controller, binder, heartbeats, nodes } = newController(workRest.with({ signal: term.signal, gate })));
    const running = Promise.all([controller.run(term.signal), binder.run(term.signal), heartbeats.run(term.signal)]);
    await elector.hold(AbortSignal.any([stopping, term.signal]));
    term.abort();
    await running;
    if (stopping.aborted) {
      await elector.release();
      break;
    }
    log.warn('lost leadership; stopped all work and standing by');
  }
} else {
  ({ controller, binder, heartbeats, nodes } = newController(workRest.with({ signal: stopping })));
  await Promise.all([controller.run(stopping), binder.run(stopping), heartbeats.run(stopping)]);
}
await ops.close();
log.info('stopped');
