// node-disks-csi: the NodeDisks CSI driver. `controller` runs next to csi-provisioner (Identity and
// Controller services, a NodeDisk informer, the allocator); `node` runs on every node for the kubelet
// (Identity and Node services, the plugin-watcher registration). Exit codes: 0 after SIGTERM/SIGINT,
// 2 for bad configuration, 1 when serving fails.
import { configuredOrExit, opsServerOrExit, shutdownSignal } from '../lib/runtime/daemon.ts';
import { createLogger } from '../lib/runtime/log.ts';
import { parseCsiConfig } from './config.ts';
import { runControllerSide } from './controller-main.ts';
import { runNodeSide } from './node-main.ts';

const config = configuredOrExit(() => parseCsiConfig(process.argv.slice(2)));
const log = createLogger(`node-disks-csi-${config.side}`, { level: config.logLevel });
const stopping = shutdownSignal(log);
try {
  if (config.side === 'controller') await runControllerSide(config, log, stopping, opsServerOrExit);
  else await runNodeSide(config, log, stopping, opsServerOrExit);
  log.info('stopped');
} catch (err) {
  log.error('stopped on an error', { error: (err as Error).message });
  process.exit(1);
}
