// Agent configuration from flags and environment (a DaemonSet sets NODE_NAME from spec.nodeName).
import { parseArgs } from 'node:util';
import { HelpRequested } from '../lib/runtime/flags.ts';
import { DEFAULT_DISK_DIR, DEFAULT_SYSTEM_NAMESPACE } from '../api/constants.ts';
import { LEASE_PERIODS } from '../api/heartbeat-lease.ts';
import { nodeNameProblem } from '../api/names.ts';
import { parseDuration } from '../lib/runtime/duration.ts';
import { parseLevel, type Level } from '../lib/runtime/log.ts';
import { parseAddress } from '../lib/runtime/server.ts';

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
}

interface FlagSpec {
  env?: string;
  default?: string;
  /** What --help shows as the default, when it is not a plain value. */
  defaultDescription?: string;
  describe: string;
}

/**
 * The agent's flags. Parsed with node:util's parseArgs, not yargs as the controller is: yargs and its
 * dependencies stay resident in a process that reads its flags once (docs/benchmarks.md, the agent's
 * memory step by step).
 */
function agentFlags(env: NodeJS.ProcessEnv): Record<string, FlagSpec> {
  return {
    'node-name': { default: env.NODE_NAME, defaultDescription: '$NODE_NAME', describe: 'Name of the Node this agent runs on' },
    'disk-dir': { default: env.DISK_DIR ?? DEFAULT_DISK_DIR, describe: 'Directory with the *.img disk files, as this process sees it' },
    'host-disk-dir': { default: env.HOST_DISK_DIR, defaultDescription: '--disk-dir', describe: 'The same directory as a host path, written to spec.path' },
    kubeconfig: { describe: 'Path to a kubeconfig; in-cluster config when unset' },
    'http-address': { default: env.HTTP_ADDRESS ?? ':8080', describe: 'Address for /metrics, /healthz and /readyz' },
    heartbeat: { default: env.HEARTBEAT ?? '60s', describe: `Renew this node's heartbeat Lease this often; it lasts ${LEASE_PERIODS} times as long (status is written only when it changes)` },
    'lease-namespace': {
      default: env.POD_NAMESPACE ?? DEFAULT_SYSTEM_NAMESPACE,
      defaultDescription: `$POD_NAMESPACE or ${DEFAULT_SYSTEM_NAMESPACE}`,
      describe: 'Namespace of the heartbeat Lease (the system namespace)',
    },
    'rescan-interval': { default: env.RESCAN_INTERVAL ?? '60s', describe: 'Full rescan of the disk dir, a safety net for missed file-system events' },
    'log-level': { default: env.LOG_LEVEL ?? 'info', describe: 'debug, info, warn or error' },
  };
}

function usage(flags: Record<string, FlagSpec>): string {
  const lines = Object.entries(flags).map(([name, f]) => {
    const def = f.defaultDescription ?? f.default;
    return `  --${name.padEnd(16)} ${f.describe}${def !== undefined ? ` [default: ${def}]` : ''}`;
  });
  return `node-disks-agent [flags]\n\nDiscovers disk image files on this node, reports them as NodeDisks and keeps reservation markers in step.\n\nFlags:\n${lines.join('\n')}\n  --help             Show this help\n`;
}

export function parseAgentConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): AgentConfig {
  const flags = agentFlags(env);
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { ...Object.fromEntries(Object.keys(flags).map((name) => [name, { type: 'string' as const }])), help: { type: 'boolean' as const } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    // The words yargs used, which people and scripts already know.
    const unknown = /Unknown option '--?([^']+)'/.exec((err as Error).message)?.[1];
    if (unknown) throw new Error(`Unknown argument: ${unknown}`);
    const positional = /Unexpected argument '([^']+)'/.exec((err as Error).message)?.[1];
    if (positional) throw new Error(`Unknown argument: ${positional}`);
    throw new Error((err as Error).message.replace(/\s*To specify .*$/s, ''));
  }
  if (values.help === true) {
    process.stdout.write(usage(flags));
    throw new HelpRequested();
  }
  const flag = (name: string): string | undefined => (values[name] as string | undefined) ?? flags[name]?.default;
  const args = {
    'node-name': flag('node-name'),
    'disk-dir': flag('disk-dir')!,
    'host-disk-dir': flag('host-disk-dir'),
    kubeconfig: flag('kubeconfig'),
    'http-address': flag('http-address')!,
    heartbeat: flag('heartbeat')!,
    'lease-namespace': flag('lease-namespace')!,
    'rescan-interval': flag('rescan-interval')!,
    'log-level': flag('log-level')!,
  };

  const nodeName = args['node-name'];
  if (!nodeName) throw new Error('NODE_NAME is required: set it from the pod (fieldRef spec.nodeName) or pass --node-name');
  const problem = nodeNameProblem(nodeName);
  if (problem) throw new Error(`invalid NODE_NAME: ${problem}`);
  const diskDir = args['disk-dir'];
  const hostDiskDir = args['host-disk-dir'] ?? diskDir;
  if (!hostDiskDir.startsWith('/')) throw new Error(`--host-disk-dir must be an absolute path, got ${JSON.stringify(hostDiskDir)}`);
  parseAddress(args['http-address']);
  const heartbeatMs = parseDuration(args.heartbeat, '--heartbeat');
  const rescanMs = parseDuration(args['rescan-interval'], '--rescan-interval');
  if (heartbeatMs < 1000) throw new Error('--heartbeat must be at least 1s');
  const leaseNamespace = args['lease-namespace'];
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(leaseNamespace))
    throw new Error(`--lease-namespace ${JSON.stringify(leaseNamespace)} is not a namespace name (lowercase letters, digits and '-', at most 63)`);
  if (rescanMs < 100) throw new Error('--rescan-interval must be at least 100ms');
  return {
    nodeName,
    diskDir,
    hostDiskDir,
    kubeconfig: args.kubeconfig,
    httpAddress: args['http-address'],
    heartbeatMs,
    leaseNamespace,
    rescanMs,
    logLevel: parseLevel(args['log-level']),
  };
}
