// What both daemons do around their work: refuse bad configuration with exit 2 (exit 0 after --help),
// and turn SIGTERM/SIGINT into an AbortSignal for a clean shutdown.
import { HelpRequested } from './flags.ts';
import type { Logger } from './log.ts';

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
