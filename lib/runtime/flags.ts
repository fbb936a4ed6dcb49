// How the daemons (agent, controller) parse flags with yargs: unknown flags are errors, and errors are
// thrown (main.ts prints them and exits 2) instead of yargs exiting the process itself.
import type { Argv } from 'yargs';

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
