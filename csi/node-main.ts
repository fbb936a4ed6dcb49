// The node side of node-disks-csi: the Identity and Node services on the socket the kubelet dials, and the
// registration socket its plugin watcher finds. No Kubernetes API access; nothing kept that a restart loses.
import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import pkg from '../package.json' with { type: 'json' };
import type { opsServerOrExit } from '../lib/runtime/daemon.ts';
import type { Logger } from '../lib/runtime/log.ts';
import type { NodeSideConfig } from './config.ts';
import { DriveWiper } from './drive-wiper.ts';
import { identityHandlers } from './identity.ts';
import { NodeService } from './node-service.ts';
import { setFormatsAtOnce } from './node-devices.ts';
import * as volumes from './node-volumes.ts';
import { identityService, nodeService } from './proto/load.ts';
import { Registration, registrationSocket } from './registration.ts';
import { useToolRunner } from './run-tool.ts';
import { serve } from './server.ts';
import { csiMetrics } from './metrics.ts';
import { pruneStaleRecords } from './staged-records.ts';

export async function runNodeSide(config: NodeSideConfig, log: Logger, stopping: AbortSignal, ops: typeof opsServerOrExit): Promise<void> {
  if (config.toolRunner) {
    // Refused at the start, not at the first volume: a runner that is not there is an install's mistake.
    await access(config.toolRunner, constants.X_OK).catch((err: NodeJS.ErrnoException) => {
      throw new Error(`--tool-runner ${config.toolRunner} cannot be run (${err.code ?? err.message}): give the path of nodedisks-toolrunner, or '' to start the tools from this process`);
    });
    await useToolRunner(config.toolRunner);
  }
  setFormatsAtOnce(config.formatsAtOnce);
  const registration = config.registrationDir ? new Registration({ endpoint: config.csiAddress, log }) : undefined;
  const service = new NodeService({ nodeName: config.nodeName, diskDir: config.diskDir, byIdDir: config.byIdDir, volumes });
  // Before any call is served, so that nothing is being staged meanwhile: records whose device was detached
  // or went with a reboot while this program was not running.
  const stale = await pruneStaleRecords(config.diskDir).catch((err: unknown) => {
    log.warn('cannot look for stale staged records', { diskDir: config.diskDir, error: (err as Error).message });
    return [];
  });
  if (stale.length) log.info('stale staged records removed', { records: stale });
  // Drives the agent asks to wipe (it has no device access): looked at as requests appear, and every minute.
  const wiper = new DriveWiper({ diskDir: config.diskDir, byIdDir: config.byIdDir, log: log.with({ loop: 'drive-wipes' }), sweepMs: 60_000 });
  wiper.start();
  const notReady = () => registration?.problem();
  const metrics = csiMetrics();
  const server = await ops({ address: config.httpAddress, registry: metrics.registry, healthz: () => undefined, readyz: notReady });
  const stopCsi = await serve(
    config.csiAddress,
    [
      { definition: identityService, handlers: identityHandlers({ version: `v${pkg.version}`, notReady: () => undefined }) },
      { definition: nodeService, handlers: service.handlers },
    ],
    log,
    metrics.calls,
  );
  // Registered last: the kubelet dials the CSI socket as soon as it has the registration's answer.
  const stopRegistration = registration ? await serve(registrationSocket(config.registrationDir), [registration.service()], log) : undefined;
  log.info('serving CSI', {
    side: 'node',
    node: config.nodeName,
    csiAddress: config.csiAddress,
    registrationDir: config.registrationDir || '(none)',
    toolRunner: config.toolRunner || '(none: tools started by this process)',
    formatsAtOnce: config.formatsAtOnce,
    httpPort: server.port,
  });
  await new Promise<void>((resolve) => stopping.addEventListener('abort', () => resolve(), { once: true }));
  // The registration socket goes first, so the kubelet stops sending work; the mounts stay for the next start.
  await stopRegistration?.();
  await stopCsi();
  wiper.close();
  await server.close();
  await useToolRunner(undefined);
}
