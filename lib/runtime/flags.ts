// How the daemons (agent, controller) parse flags with yargs: unknown flags are errors, and errors are
// thrown (main.ts prints them and exits 2) instead of yargs exiting the process itself.
import type { Argv } from 'yargs';
import { parseLevel, type Level } from './log.ts';
import { parseAddress } from './server.ts';

export function strictFlags<T>(y: Argv<T>): Argv<T> {
  return y
    .strict()
    .version(false)
    .help()
    .exitProcess(false)
    .fail((msg, err) => {
      throw err ?? new Error(msg);
    });
}

/** Thrown after yargs printed --help, so main.ts exits 0 instead of validating the (absent) flags. */
export class HelpRequested extends Error {
  override name = 'HelpRequested';
}

export function stopIfHelp(args: Record<string, unknown>): void {
  if (args.help === true) throw new HelpRequested();
}

/** The flags both daemons have, with the same names, defaults and environment variables. */
export function daemonFlags<T>(y: Argv<T>, env: NodeJS.ProcessEnv) {
  return y
    .option('kubeconfig', { type: 'string', describe: 'Path to a kubeconfig; in-cluster config when unset' })
    .option('http-address', { type: 'string', default: env.HTTP_ADDRESS ?? ':8080', describe: 'Address for /metrics, /healthz and /readyz' })
    .option('log-level', { type: 'string', default: env.LOG_LEVEL ?? 'info', describe: 'debug, info, warn or error' })
    .option('watch-list', {
      type: 'boolean',
      default: true,
      describe: 'Sync the caches through a streaming watch-list where the API server offers it (a paged list where it does not); --no-watch-list lists in pages always',
    });
}

/** The daemon flags checked and read: an address this machine has, a known log level. */
export function daemonConfig(a: { kubeconfig: string | undefined; 'http-address': string; 'log-level': string; 'watch-list': boolean }): {
  kubeconfig: string | undefined;
  httpAddress: string;
  logLevel: Level;
  watchList: boolean;
} {
  parseAddress(a['http-address']);
  return { kubeconfig: a.kubeconfig, httpAddress: a['http-address'], logLevel: parseLevel(a['log-level']), watchList: a['watch-list'] };
}
