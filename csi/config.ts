// node-disks-csi's flags: one program, two sides (`controller`, `node`), parsed with yargs as the other
// daemons' (unknown flags are errors, exit 2).
import yargs from 'yargs';
import { DEFAULT_BY_ID_DIR, DEFAULT_DISK_DIR, DEFAULT_SYSTEM_NAMESPACE } from '../api/constants.ts';
import { parseDuration } from '../lib/runtime/duration.ts';
import { nodeNameProblem } from '../api/names.ts';
import { parseAddress } from '../lib/runtime/server.ts';
import { parseLevel, type Level } from '../lib/runtime/log.ts';
import { daemonConfig, daemonFlags, stopIfHelp, strictFlags } from '../lib/runtime/flags.ts';
import { DEFAULT_FORMATS_AT_ONCE } from './node-devices.ts';

export interface ControllerSideConfig {
  side: 'controller';
  csiAddress: string;
  kubeconfig: string | undefined;
  httpAddress: string;
  logLevel: Level;
  watchList: boolean;
  identity: string;
  /** Namespace of the agents' heartbeat Leases: a disk of a node whose Lease expired goes to no volume. */
  agentLeaseNamespace: string;
  /** For a node with no heartbeat Lease: a report older than this makes its disks go to no volume. */
  staleAfterMs: number;
}

export interface NodeSideConfig {
  side: 'node';
  csiAddress: string;
  /** The kubelet's plugins_registry dir; '' registers nowhere (a test that calls the socket itself). */
  registrationDir: string;
  nodeName: string;
  diskDir: string;
  /** Where the agent's drives are named (a wipe request names one of them). */
  byIdDir: string;
  httpAddress: string;
  logLevel: Level;
  /** nodedisks-toolrunner's path, which then starts the tools ('': csi-node starts them itself). */
  toolRunner: string;
  /** mkfs runs at once; the others wait their turn. */
  formatsAtOnce: number;
}

/** A unix socket path from `/path`, `unix:/path` or `unix:///path` (how the sidecars and kubelet write it). */
export function socketPath(address: string, flag = '--csi-address'): string {
  const path = address.replace(/^unix:(\/\/)?/, '');
  if (!path.startsWith('/')) throw new Error(`${flag} must be an absolute unix socket path (or unix:///path), got ${JSON.stringify(address)}`);
  return path;
}

export function parseCsiConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): ControllerSideConfig | NodeSideConfig {
  const side = argv[0];
  if (side !== 'controller' && side !== 'node') {
    if (side === '--help' || side === '-h') {
      console.log(
        'node-disks-csi <controller|node> [flags]\n\nThe NodeDisks CSI driver: `controller` serves the Identity and Controller services next to csi-provisioner; `node` serves the Identity and Node services to the kubelet. --help after the side lists its flags.',
      );
      stopIfHelp({ help: true });
    }
    throw new Error(`the first argument must be controller or node, got ${side === undefined ? 'nothing' : JSON.stringify(side)}`);
  }
  if (side === 'controller') {
    const a = strictFlags(
      daemonFlags(
        yargs(argv.slice(1)).scriptName('node-disks-csi controller').usage('$0 [flags]\n\nThe CSI Identity and Controller services: PersistentVolumes are NodeDisks reserved for them.'),
        {
          ...env,
          HTTP_ADDRESS: env.HTTP_ADDRESS ?? ':8082',
        },
      )
        .option('csi-address', { type: 'string', default: env.CSI_ADDRESS ?? '/csi/csi.sock', describe: 'Unix socket to serve CSI on (shared with csi-provisioner)' })
        .option('identity', { type: 'string', default: env.POD_NAME ?? 'node-disks-csi-controller', defaultDescription: '$POD_NAME', describe: 'Name in logs and the user agent' })
        .option('agent-lease-namespace', {
          type: 'string',
          default: env.POD_NAMESPACE ?? DEFAULT_SYSTEM_NAMESPACE,
          defaultDescription: `$POD_NAMESPACE or ${DEFAULT_SYSTEM_NAMESPACE}`,
          describe: "Namespace of the agents' heartbeat Leases: no volume is given a disk of a node whose Lease expired",
        })
        .option('agent-stale-after', {
          type: 'string',
          default: env.AGENT_STALE_AFTER ?? '15m',
          describe: 'For a node with no heartbeat Lease (an agent older than it): no volume is given its disks once its report is older than this',
        })
        .requiresArg(['csi-address', 'kubeconfig', 'http-address', 'log-level', 'identity', 'agent-lease-namespace', 'agent-stale-after']),
    ).parseSync();
    stopIfHelp(a);
    return {
      side,
      csiAddress: socketPath(a['csi-address']),
      identity: a.identity,
      agentLeaseNamespace: a['agent-lease-namespace'],
      staleAfterMs: parseDuration(a['agent-stale-after'], '--agent-stale-after'),
      ...daemonConfig(a),
    };
  }
  const a = strictFlags(
    yargs(argv.slice(1))
      .scriptName('node-disks-csi node')
      .usage("$0 [flags]\n\nThe CSI Identity and Node services: stages and publishes this node's NodeDisks for pods (loop devices, mounts). No Kubernetes API access.")
      .option('csi-address', { type: 'string', default: env.CSI_ADDRESS, describe: 'Unix socket to serve CSI on (the kubelet calls it)' })
      .option('registration-dir', {
        type: 'string',
        default: env.REGISTRATION_DIR ?? '/var/lib/kubelet/plugins_registry',
        describe: "The kubelet's plugin watcher dir, where the registration socket goes ('' registers nowhere)",
      })
      .option('node-name', { type: 'string', default: env.NODE_NAME, defaultDescription: '$NODE_NAME', describe: 'Name of the Node this runs on' })
      .option('disk-dir', { type: 'string', default: env.DISK_DIR ?? DEFAULT_DISK_DIR, describe: 'Directory with the *.img disk files' })
      .option('by-id-dir', { type: 'string', default: env.BY_ID_DIR ?? DEFAULT_BY_ID_DIR, describe: "udev's stable drive names, where a drive the agent asks to wipe is found" })
      .option('http-address', { type: 'string', default: env.HTTP_ADDRESS ?? ':8083', describe: 'Address for /metrics, /healthz and /readyz' })
      .option('log-level', { type: 'string', default: env.LOG_LEVEL ?? 'info', describe: 'debug, info, warn or error' })
      .option('tool-runner', {
        type: 'string',
        default: env.TOOL_RUNNER ?? '',
        describe: "nodedisks-toolrunner's path: it starts the storage tools, so that their forks never hold this process ('': this process starts them)",
      })
      .option('formats-at-once', {
        type: 'string',
        default: env.FORMATS_AT_ONCE ?? String(DEFAULT_FORMATS_AT_ONCE),
        defaultDescription: 'the cores this process may use',
        describe: 'mkfs runs at once on this node; volumes staged meanwhile wait their turn, first come first formatted',
      })
      .requiresArg(['csi-address', 'node-name', 'disk-dir', 'by-id-dir', 'http-address', 'log-level', 'formats-at-once']),
  ).parseSync();
  stopIfHelp(a);
  if (!a['csi-address']) throw new Error('--csi-address is required (the kubelet dials /var/lib/kubelet/plugins/<driver>/csi.sock)');
  const nodeName = a['node-name'];
  if (!nodeName) throw new Error('NODE_NAME is required: set it from the pod (fieldRef spec.nodeName) or pass --node-name');
  const problem = nodeNameProblem(nodeName);
  if (problem) throw new Error(`invalid NODE_NAME: ${problem}`);
  for (const flag of ['disk-dir', 'by-id-dir'] as const) if (!a[flag].startsWith('/')) throw new Error(`--${flag} must be an absolute path, got ${JSON.stringify(a[flag])}`);
  if (a['tool-runner'] && !a['tool-runner'].startsWith('/')) throw new Error(`--tool-runner must be an absolute path (or '' for none), got ${JSON.stringify(a['tool-runner'])}`);
  if (!/^[1-9]\d{0,5}$/.test(a['formats-at-once'])) throw new Error(`--formats-at-once must be a positive integer (mkfs runs at once), got ${JSON.stringify(a['formats-at-once'])}`);
  parseAddress(a['http-address']);
  return {
    side,
    csiAddress: socketPath(a['csi-address']),
    registrationDir: a['registration-dir'],
    nodeName,
    diskDir: a['disk-dir'],
    byIdDir: a['by-id-dir'],
    httpAddress: a['http-address'],
    logLevel: parseLevel(a['log-level']),
    toolRunner: a['tool-runner'],
    formatsAtOnce: Number(a['formats-at-once']),
  };
}
