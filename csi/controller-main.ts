// The controller side of node-disks-csi: a NodeDisk informer (the controller's lean cache), the allocator
// on it, and the Identity and Controller services on the socket csi-provisioner dials.
import pkg from '../package.json' with { type: 'json' };
import { NodeDiskClient } from '../api/client.ts';
import { FIELD_MANAGER } from '../api/constants.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import { AgentHeartbeats } from '../controller/agent-liveness.ts';
import { Allocator } from '../controller/allocator.ts';
import { leanNodeDisk } from '../controller/cache.ts';
import { Informer } from '../lib/kube/informer.ts';
import { loadKubeConfig } from '../lib/kube/kubeconfig.ts';
import { RestClient } from '../lib/kube/rest.ts';
import type { opsServerOrExit } from '../lib/runtime/daemon.ts';
import type { Logger } from '../lib/runtime/log.ts';
import type { ControllerSideConfig } from './config.ts';
import { ControllerService } from './controller-service.ts';
import { identityHandlers } from './identity.ts';
import { controllerService, identityService } from './proto/load.ts';
import { serve } from './server.ts';
import { csiMetrics } from './metrics.ts';

export async function runControllerSide(config: ControllerSideConfig, log: Logger, stopping: AbortSignal, ops: typeof opsServerOrExit): Promise<void> {
  const access = loadKubeConfig({ kubeconfig: config.kubeconfig });
  const userAgent = `node-disks-csi-controller (${config.identity.replace(/[^\x20-\x7e]/g, '_')})`;
  const rest = new RestClient(access, { timeoutMs: 30_000, userAgent }).with({ signal: stopping });
  const disks = new NodeDiskClient(rest);
  const informer: Informer<NodeDisk> = new Informer<NodeDisk>(
    { list: (l) => disks.list(l), listText: (l) => disks.listText(l), watch: (w, s) => disks.watch(w, s), watchList: (w, s) => disks.watch(w, s) },
    {
      onUpsert: (nd) => allocator.diskChanged(nd.metadata.name ?? ''),
      onDelete: (nd) => allocator.diskChanged(nd.metadata.name ?? ''),
      onSync: () => allocator.index.rebuild(informer.cache),
    },
    { log: log.with({ loop: 'informer' }), transform: leanNodeDisk, ...(config.watchList ? {} : { watchList: false }) },
  );
  const allocator = new Allocator({ disks, diskInformer: informer, fieldManager: FIELD_MANAGER.csiController, log });
  // The agents' heartbeats, as the claims binder reads them: a disk of a node whose agent stopped goes to
  // no volume, whether or not the controller has said so on the disk yet (or runs at all).
  const heartbeats = new AgentHeartbeats({ rest, namespace: config.agentLeaseNamespace, log, watchList: config.watchList, onChange: () => {} });
  const agents = () => ({ now: Date.now(), staleAfterMs: config.staleAfterMs, liveness: (node: string) => heartbeats.liveness(node) });
  const notReady = () => {
    if (!informer.hasSynced) return `NodeDisk informer not synced${informer.error ? `: ${informer.error.message}` : ''}`;
    if (informer.error) return `cannot list or watch NodeDisks: ${informer.error.message}`;
    return heartbeats.readiness();
  };
  const service = new ControllerService({ allocator, disks, log, notReady, agents });
  const metrics = csiMetrics();
  const server = await ops({ address: config.httpAddress, registry: metrics.registry, healthz: () => undefined, readyz: notReady });
  const stop = await serve(
    config.csiAddress,
    [
      { definition: identityService, handlers: identityHandlers({ version: `v${pkg.version}`, notReady }) },
      { definition: controllerService, handlers: service.handlers },
    ],
    log,
    metrics.calls,
  );
  log.info('serving CSI', { side: 'controller', csiAddress: config.csiAddress, httpPort: server.port });
  await Promise.all([informer.run(stopping), heartbeats.run(stopping)]);
  await stop();
  await server.close();
}
