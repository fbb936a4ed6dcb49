// node-disks-agent: entry point. Exit codes: 0 after SIGTERM/SIGINT, 2 for bad configuration.
import { NodeDiskClient } from '../api/client.ts';
import { loadKubeConfig } from '../lib/kube/kubeconfig.ts';
import { RestClient } from '../lib/kube/rest.ts';
import { HelpRequested } from '../lib/runtime/flags.ts';
import { createLogger } from '../lib/runtime/log.ts';
import { startOpsServer } from '../lib/runtime/server.ts';
import { Agent } from './agent.ts';
import { parseAgentConfig, type AgentConfig } from './config.ts';
import { agentMetrics } from './metrics.ts';

let config: AgentConfig;
let client: NodeDiskClient;
try {
  config = parseAgentConfig(process.argv.slice(2));
  client = new NodeDiskClient(new RestClient(loadKubeConfig({ kubeconfig: config.kubeconfig }), { timeoutMs: 30_000, userAgent: 'node-disks-agent' }));
} catch (err) {
  if (err instanceof HelpRequested) process.exit(0);
  console.error(`error: ${(err as Error).message}`);
  process.exit(2);
}

const log = createLogger('node-disks-agent', { level: config.logLevel, base: { node: config.nodeName } });
const metrics = agentMetrics();
const agent = new Agent({ client, ...config, log, metrics });
const stop = new AbortController();
const ops = await startOpsServer({
  address: config.httpAddress,
  registry: metrics.registry,
  healthz: () => agent.liveness(),
  readyz: () => agent.readiness(),
});
log.info('agent started', { diskDir: config.diskDir, hostDiskDir: config.hostDiskDir, httpPort: ops.port, heartbeatMs: config.heartbeatMs });

for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.once(sig, () => {
    log.info('shutting down', { signal: sig });
    stop.abort();
  });
}
await agent.run(stop.signal);
await ops.close();
log.info('stopped');
