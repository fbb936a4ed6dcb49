// node-disks-operator: entry point. Exit codes: 0 after SIGTERM/SIGINT, 1 when leadership is lost
// (the Deployment restarts us as a standby), 2 for bad configuration.
import { NodeDiskClient } from '../api/client.ts';
import { loadKubeConfig } from '../lib/kube/config.ts';
import { RestClient } from '../lib/kube/rest.ts';
import { createLogger } from '../lib/runtime/log.ts';
import { startOpsServer } from '../lib/runtime/server.ts';
import { parseControllerConfig, type ControllerConfig } from './config.ts';
import { Controller } from './controller.ts';
import { EventRecorder } from './events.ts';
import { LeaderElector } from './leader.ts';
import { controllerMetrics } from './metrics.ts';
import { Reconciler } from './reconciler.ts';

let config: ControllerConfig;
let rest: RestClient;
try {
  config = parseControllerConfig(process.argv.slice(2));
  rest = new RestClient(loadKubeConfig({ kubeconfig: config.kubeconfig }), { timeoutMs: 30_000, userAgent: 'node-disks-operator' });
} catch (err) {
  console.error(`error: ${(err as Error).message}`);
  process.exit(2);
}

const log = createLogger('node-disks-operator', { level: config.logLevel, base: { identity: config.identity } });
const metrics = controllerMetrics();
const client = new NodeDiskClient(rest);
const reconciler = new Reconciler({ client, events: new EventRecorder(rest, config.identity, log), log, metrics, staleAfterMs: config.staleAfterMs });
const controller = new Controller({ client, reconciler, workers: config.workers, log, metrics });
const stop = new AbortController();
let exitCode = 0;
for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.once(sig, () => {
    log.info('shutting down', { signal: sig });
    stop.abort();
  });
}

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

const ops = await startOpsServer({
  address: config.httpAddress,
  registry: metrics.registry,
  healthz: () => undefined,
  // A standby is ready (it can take over); the leader is ready once its cache has synced.
  readyz: () => (elector && !elector.isLeader ? undefined : controller.readiness()),
});
log.info('controller started', { httpPort: ops.port, leaderElect: config.leaderElect });

if (elector) {
  if (await elector.acquire(stop.signal)) {
    metrics.leader.set(1);
    const work = new AbortController();
    stop.signal.addEventListener('abort', () => work.abort(), { once: true });
    const running = controller.run(work.signal);
    const outcome = await elector.hold(stop.signal);
    work.abort();
    await running;
    metrics.leader.set(0);
    if (outcome === 'lost') exitCode = 1;
    else await elector.release();
  }
} else {
  await controller.run(stop.signal);
}
await ops.close();
log.info('stopped', { exitCode });
process.exit(exitCode);
