// node-disks-agent: entry point. Exit codes: 0 after SIGTERM/SIGINT, 2 for bad configuration.
import { NodeDiskClient } from '../api/client.ts';
import { loadKubeConfig } from '../lib/kube/kubeconfig.ts';
import { RestClient } from '../lib/kube/rest.ts';
import { configuredOrExit, opsServerOrExit, shutdownSignal } from '../lib/runtime/daemon.ts';
import { createLogger } from '../lib/runtime/log.ts';
import { Agent } from './agent.ts';
import { parseAgentConfig } from './config.ts';
import { agentMetrics } from './metrics.ts';

const { config, client } = configuredOrExit(() => {
  const config = parseAgentConfig(process.argv.slice(2));
  const access = loadKubeConfig({ kubeconfig: config.kubeconfig });
  return { config, client: new NodeDiskClient(new RestClient(access, { timeoutMs: 30_000, userAgent: 'node-disks-agent' })) };
});

const log = createLogger('node-disks-agent', { level: config.logLevel, base: { node: config.nodeName } });
const metrics = agentMetrics();
const agent = new Agent({ client, ...config, log, metrics, drives: { selectors: config.driveSelectors, byIdDir: config.byIdDir, hostByIdDir: config.hostByIdDir } });
const ops = await opsServerOrExit({
  address: config.httpAddress,
  registry: metrics.registry,
  healthz: () => agent.liveness(),
  readyz: () => agent.readiness(),
});
log.info('agent started', {
  diskDir: config.diskDir,
  hostDiskDir: config.hostDiskDir,
  httpPort: ops.port,
  heartbeatMs: config.heartbeatMs,
  leaseNamespace: config.leaseNamespace,
  drives: config.driveSelectors.map((d) => d.text),
});

await agent.run(shutdownSignal(log));
await ops.close();
log.info('stopped');
