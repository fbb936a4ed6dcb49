// What both daemons do around their work: refuse bad configuration with exit 2 (exit 0 after --help),
// including an --http-address that cannot be listened on, and turn SIGTERM/SIGINT into an AbortSignal
// for a clean shutdown.
import { HelpRequested } from './flags.ts';
import type { Logger } from './log.ts';
import { listenError, startOpsServer, type OpsServerOptions } from './server.ts';

export function configuredOrExit<T>(init: () => T): T {
  try {
    return init();
  } catch (err) {
    if (err instanceof HelpRequested) process.exit(0);
    console.error(`error: ${(err as Error).message}`);
    process.exit(2);
  }
}

export function shutdownSignal(log: Logger): AbortSignal {
  const stop = new AbortController();
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.once(sig, () => {
      log.info('shutting down', { signal: sig });
      stop.abort();
    });
  }
  return stop.signal;
}

/**
 * The ops server, or exit 2 with the reason when its address cannot be used (in use, not this machine's):
 * that is a configuration error like a bad flag, not a crash, so no stack trace.
 */
export async function opsServerOrExit(o: OpsServerOptions): ReturnType<typeof startOpsServer> {
  try {
    return await startOpsServer(o);
  } catch (err) {
    const why = listenError(o.address, err);
    if (why === undefined) throw err;
    console.error(`error: ${why}`);
    process.exit(2);
  }
}
