// How the daemons (agent, controller) parse their flags: one small parser for both, declared as a table
// of flags. Not yargs (the plugin's parser): in a daemon it was the largest part of the bundle and a few
// MiB of resident memory for a command line read once at start (docs/adr/0006, docs/benchmarks.md).
// The rules are yargs' as the daemons used it: `--name=value` or `--name value`, booleans as `--name`,
// `--name=false` or `--no-name`; an unknown flag, a stray argument or a flag with no value is an error
// (thrown: main.ts prints it and exits 2); `--help` prints the flags and main.ts exits 0.
import { parseLevel, type Level } from './log.ts';
import { parseAddress } from './server.ts';

export type Flag =
  | { type: 'string'; default?: string | undefined; defaultDescription?: string; describe?: string }
  | { type: 'number'; default: number; describe?: string }
  | { type: 'boolean'; default: boolean; describe?: string };

/** The parsed value of each flag: a string flag with no default may be absent. */
export type FlagValues<F extends Record<string, Flag>> = {
  [K in keyof F]: F[K] extends { type: 'boolean' } ? boolean : F[K] extends { type: 'number' } ? number : F[K] extends { default: string } ? string : string | undefined;
};

/** Thrown after --help was printed, so main.ts exits 0 instead of validating the (absent) flags. */
export class HelpRequested extends Error {
  override name = 'HelpRequested';
}

/** The flags both daemons have, with the same names, defaults and environment variables. */
export function daemonFlags(env: NodeJS.ProcessEnv) {
  return {
    kubeconfig: { type: 'string', describe: 'Path to a kubeconfig; in-cluster config when unset' },
    'http-address': { type: 'string', default: env.HTTP_ADDRESS ?? ':8080', describe: 'Address for /metrics, /healthz and /readyz' },
    'log-level': { type: 'string', default: env.LOG_LEVEL ?? 'info', describe: 'debug, info, warn or error' },
    'watch-list': {
      type: 'boolean',
      default: true,
      describe: 'Sync the caches through a streaming watch-list where the API server offers it (a paged list where it does not); --no-watch-list lists in pages always',
    },
  } as const satisfies Record<string, Flag>;
}

function help(program: string, about: string, flags: Record<string, Flag>): string {
  const rows = Object.entries(flags).map(([name, f]) => {
    const dflt = 'defaultDescription' in f && f.defaultDescription !== undefined ? f.defaultDescription : f.default === undefined ? undefined : JSON.stringify(f.default);
    return [`  --${name}`, `${f.describe ?? ''} [${f.type}]${dflt === undefined ? '' : ` [default: ${dflt}]`}`.trim()] as const;
  });
  const width = Math.max(...rows.map(([n]) => n.length), '  --help'.length) + 2;
  const line = (n: string, d: string) => `${n.padEnd(width)}${d}`;
  return `${program} [flags]\n\n${about}\n\nFlags:\n${[...rows.map(([n, d]) => line(n, d)), line('  --help', 'Show this help [boolean]')].join('\n')}\n`;
}

/** Parses `argv` against `flags`; prints the help and throws HelpRequested for --help. */
export function parseFlags<F extends Record<string, Flag>>(argv: readonly string[], flags: F, usage: { program: string; about: string }): FlagValues<F> {
  const values: Record<string, string | number | boolean | undefined> = {};
  for (const [name, f] of Object.entries(flags)) values[name] = f.default;
  const set = (name: string, f: Flag, raw: string) => {
    if (f.type === 'boolean') {
      if (raw !== 'true' && raw !== 'false') throw new Error(`--${name} takes true or false, got ${JSON.stringify(raw)}`);
      values[name] = raw === 'true';
    } else values[name] = f.type === 'number' ? Number(raw) : raw;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const m = /^--([^=]+)(?:=(.*))?$/s.exec(arg);
    if (!m) throw new Error(`Unknown argument: ${arg}`);
    const [, key, inline] = m as unknown as [string, string, string | undefined];
    if (key === 'help') {
      process.stdout.write(help(usage.program, usage.about, flags));
      throw new HelpRequested();
    }
    const negated = key.startsWith('no-') && flags[key.slice(3)]?.type === 'boolean' && !(key in flags);
    const name = negated ? key.slice(3) : key;
    const f = flags[name];
    if (!f) throw new Error(`Unknown argument: ${key}`);
    if (negated) {
      if (inline !== undefined) throw new Error(`--${key} takes no value, got ${JSON.stringify(inline)}`);
      values[name] = false;
    } else if (inline !== undefined) set(name, f, inline);
    else if (f.type === 'boolean') {
      // yargs' reading of a boolean: a following true/false is its value, anything else is the next argument.
      const next = argv[i + 1];
      if (next === 'true' || next === 'false') set(name, f, argv[++i]!);
      else values[name] = true;
    } else {
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('--')) throw new Error(`Not enough arguments following: ${name}`);
      set(name, f, argv[++i]!);
    }
  }
  return values as FlagValues<F>;
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
