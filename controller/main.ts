// node-disks-operator: entry point. Exit codes: 0 after SIGTERM/SIGINT, 2 for bad configuration.
import { NodeDiskClient } from '../api/client.ts';
import { loadKubeConfig } from '../lib/kube/kubeconfig.ts';
import { RestClient } from '../lib/kube/rest.ts';
import { configuredOrExit, shutdownSignal } from '../lib/runtime/daemon.ts';
import { createLogger } from '../lib/runtime/log.ts';
import { startOpsServer } from '../lib/runtime/server.ts';
import { parseControllerConfig } from './config.ts';
import { Controller } from './controller.ts';
import { EventRecorder } from './events.ts';
import { LeaderElector } from './leader.ts';
import { controllerMetrics } from './metrics.ts';
import { Reconciler } from './reconciler.ts';

const { config, rest } = configuredOrExit(() => {
  const config = parseControllerConfig(process.argv.slice(2));
  const access = loadKubeConfig({ kubeconfig: config.kubeconfig });
  return { config, rest: new RestClient(access, { timeoutMs: 30_000, userAgent: `node-disks-operator (${config.identity.replace(/[^\x20-\x7e]/g, '_')})` }) };
});

const log = createLogger('node-disks-operator', { level: config.logLevel, base: { identity: config.identity } });
const metrics = controllerMetrics();
const client = new NodeDiskClient(rest);
const reconciler = new Reconciler({ client, events: new EventRecorder(rest, config.identity, log), log, metrics, staleAfterMs: config.staleAfterMs });
const newController = () => new Controller({ client, reconciler, workers: config.workers, log, metrics });
let controller = newController();
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

const ops = await startOpsServer({
  address: config.httpAddress,
  registry: metrics.registry,
  healthz: () => undefined,
  // A standby is ready (it can take over); the leader is ready once its cache has synced.
  readyz: () => (elector && !elector.isLeader ? undefined : controller.readiness()),
});
log.info('controller started', { httpPort: ops.port, leaderElect: config.leaderElect });

if (elector) {
  // Each term of leadership runs a fresh controller. Losing the lease (the API server was unreachable
  // past the renew deadline, or another replica took over) stops all work before this replica competes
  // again, so two replicas never act at once; the process itself stays up.
  while (!stopping.aborted && (await elector.acquire(stopping))) {
    metrics.leader.set(1);
    const term = new AbortController();
    const onStop = () => term.abort();
    stopping.addEventListener('abort', onStop, { once: true });
    const running = controller.run(term.signal);
    const outcome = await elector.hold(stopping);
    term.abort();
    await running;
    stopping.removeEventListener('abort', onStop);
    metrics.leader.set(0);
    if (outcome === 'stopped') {
      await elector.release();
      break;
    }
    log.warn('lost leadership; stopped all work and standing by');
    controller = newController();
  }
} else {
  await controller.run(stopping);
}
await ops.close();
log.info('stopped');
