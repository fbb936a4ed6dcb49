// Agent configuration from flags and environment (a DaemonSet sets NODE_NAME from spec.nodeName).
// Parsed with yargs as the controller's (lib/runtime/flags.ts): unknown flags are errors, exit 2.
import yargs from 'yargs';
import { DEFAULT_BY_ID_DIR, DEFAULT_DISK_DIR, DEFAULT_SYSTEM_NAMESPACE } from '../api/constants.ts';
import { LEASE_PERIODS } from '../api/heartbeat-lease.ts';
import { nodeNameProblem } from '../api/names.ts';
import { parseDuration } from '../lib/runtime/duration.ts';
import { daemonConfig, daemonFlags, stopIfHelp, strictFlags } from '../lib/runtime/flags.ts';
import type { Level } from '../lib/runtime/log.ts';
import { parseDriveSelector, type DriveSelector } from './drive-select.ts';

export interface AgentConfig {
  nodeName: string;
  diskDir: string;
  hostDiskDir: string;
  kubeconfig: string | undefined;
  httpAddress: string;
  heartbeatMs: number;
  leaseNamespace: string;
  rescanMs: number;
  logLevel: Level;
  /** The informer syncs through the streaming watch-list where the API server offers it. */
  watchList: boolean;
  /** The drives the admin chose (--drive); none by default. */
  driveSelectors: DriveSelector[];
  byIdDir: string;
  hostByIdDir: string;
}

export function parseAgentConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): AgentConfig {
  const parser = daemonFlags(
    yargs(argv)
      .scriptName('node-disks-agent')
      .usage('$0 [flags]\n\nDiscovers disk image files on this node, reports them as NodeDisks and keeps reservation markers in step.')
      .option('node-name', { type: 'string', default: env.NODE_NAME, defaultDescription: '$NODE_NAME', describe: 'Name of the Node this agent runs on' })
      .option('disk-dir', { type: 'string', default: env.DISK_DIR ?? DEFAULT_DISK_DIR, describe: 'Directory with the *.img disk files, as this process sees it' })
      .option('host-disk-dir', { type: 'string', default: env.HOST_DISK_DIR, defaultDescription: '--disk-dir', describe: 'The same directory as a host path, written to spec.path' }),
    env,
  )
    .option('heartbeat', {
      type: 'string',
      default: env.HEARTBEAT ?? '60s',
      describe: `Renew this node's heartbeat Lease this often; it lasts ${LEASE_PERIODS} times as long (status is written only when it changes)`,
    })
    .option('lease-namespace', {
      type: 'string',
      default: env.POD_NAMESPACE ?? DEFAULT_SYSTEM_NAMESPACE,
      defaultDescription: `$POD_NAMESPACE or ${DEFAULT_SYSTEM_NAMESPACE}`,
      describe: 'Namespace of the heartbeat Lease (the system namespace)',
    })
    .option('drive', {
      type: 'string',
      array: true,
      default: env.DRIVES ? env.DRIVES.split(';').filter((d) => d !== '') : [],
      defaultDescription: 'none ($DRIVES, ;-separated)',
      describe:
        'Report these drives as NodeDisks too: comma-separated terms that must all hold (by-id=GLOB, model=GLOB, serial=GLOB, media=nvme|ssd|hdd, transport=…, min-size=Q, max-size=Q); repeat for more. Nothing is taken by default',
    })
    .option('by-id-dir', { type: 'string', default: env.BY_ID_DIR ?? DEFAULT_BY_ID_DIR, describe: "udev's stable drive names, read to find and name drives; written to a drive's spec.path" })
    .option('host-by-id-dir', { type: 'string', default: env.HOST_BY_ID_DIR, defaultDescription: '--by-id-dir', describe: 'The same dir as a host path, written to spec.path' })
    .option('rescan-interval', { type: 'string', default: env.RESCAN_INTERVAL ?? '60s', describe: 'Full rescan of the disk dir, a safety net for missed file-system events' })
    // A flag given with no value is a mistake, not an empty value to default from.
    .requiresArg(['node-name', 'disk-dir', 'host-disk-dir', 'kubeconfig', 'http-address', 'heartbeat', 'lease-namespace', 'rescan-interval', 'log-level', 'drive', 'by-id-dir', 'host-by-id-dir']);
  const a = strictFlags(parser).parseSync();
  stopIfHelp(a);

  const nodeName = a['node-name'];
  if (!nodeName) throw new Error('NODE_NAME is required: set it from the pod (fieldRef spec.nodeName) or pass --node-name');
  const problem = nodeNameProblem(nodeName);
  if (problem) throw new Error(`invalid NODE_NAME: ${problem}`);
  const diskDir = a['disk-dir'];
  const hostDiskDir = a['host-disk-dir'] ?? diskDir;
  if (!hostDiskDir.startsWith('/')) throw new Error(`--host-disk-dir must be an absolute path, got ${JSON.stringify(hostDiskDir)}`);
  const daemon = daemonConfig(a);
  const heartbeatMs = parseDuration(a.heartbeat, '--heartbeat');
  const rescanMs = parseDuration(a['rescan-interval'], '--rescan-interval');
  if (heartbeatMs < 1000) throw new Error('--heartbeat must be at least 1s');
  const leaseNamespace = a['lease-namespace'];
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(leaseNamespace))
    throw new Error(`--lease-namespace ${JSON.stringify(leaseNamespace)} is not a namespace name (lowercase letters, digits and '-', at most 63)`);
  if (rescanMs < 100) throw new Error('--rescan-interval must be at least 100ms');
  const driveSelectors = a.drive.map((d) => parseDriveSelector(String(d)));
  const byIdDir = a['by-id-dir'];
  const hostByIdDir = a['host-by-id-dir'] ?? byIdDir;
  for (const [flag, dir] of [
    ['--by-id-dir', byIdDir],
    ['--host-by-id-dir', hostByIdDir],
  ] as const)
    if (!dir.startsWith('/')) throw new Error(`${flag} must be an absolute path, got ${JSON.stringify(dir)}`);
  return { nodeName, diskDir, hostDiskDir, ...daemon, heartbeatMs, leaseNamespace, rescanMs, driveSelectors, byIdDir, hostByIdDir };
}
