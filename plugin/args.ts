// Command-line parsing for the plugin, on node:util's parseArgs, with kubectl-style help.
//
// Not yargs (which the daemons use): loading yargs costs more of every plugin run than the API call
// itself, and a kubectl plugin is judged by how fast it answers (ADR 9).
import { parseArgs } from 'node:util';
import { usageError } from './errors.ts';

export interface FlagSpec {
  type: 'string' | 'boolean';
  short?: string;
  multiple?: boolean;
  default?: string | boolean;
  describe: string;
  /** Allowed values of a string flag. */
  choices?: readonly string[];
  /** A number-valued string flag (converted, and checked to be a positive integer). */
  integer?: boolean;
  /**
   * A string flag that may also be given bare, as pflag's NoOptDefVal allows (kubectl's --dry-run): the
   * bare form parses as true, and the next word is never taken for its value.
   */
  optionalValue?: boolean;
}

export interface PositionalSpec {
  name: string;
  describe: string;
  /** Collects the rest (NAME…). */
  variadic?: boolean;
  required?: boolean;
  choices?: readonly string[];
}

export interface CommandSpec<A = Record<string, unknown>> {
  name: string;
  aliases?: string[];
  summary: string;
  description?: string;
  positionals: PositionalSpec[];
  flags: Record<string, FlagSpec>;
  examples: [string, string][];
  run: (session: import('./context.ts').Session, args: A) => Promise<void>;
}

export const GLOBAL_FLAGS: Record<string, FlagSpec> = {
  kubeconfig: { type: 'string', describe: 'Path to the kubeconfig file to use' },
  context: { type: 'string', describe: 'The name of the kubeconfig context to use' },
  cluster: { type: 'string', describe: 'The name of the kubeconfig cluster to use' },
  user: { type: 'string', describe: 'The name of the kubeconfig user to use' },
  server: { type: 'string', short: 's', describe: 'The address and port of the Kubernetes API server' },
  token: { type: 'string', describe: 'Bearer token for authentication to the API server' },
  as: { type: 'string', describe: 'Username to impersonate for the operation' },
  'as-group': { type: 'string', multiple: true, describe: 'Group to impersonate for the operation (repeatable)' },
  'certificate-authority': { type: 'string', describe: 'Path to a cert file for the certificate authority' },
  'insecure-skip-tls-verify': { type: 'boolean', describe: "If true, the server's certificate will not be checked for validity" },
  'request-timeout': { type: 'string', default: '0', describe: 'The length of time to wait before giving up on a single server request (0 = no limit; 30s, 1m)' },
  help: { type: 'boolean', short: 'h', describe: 'Help for the command' },
};

/** What a bare optionalValue flag is passed to parseArgs as: no argument can hold a NUL (execve's strings end at one). */
const BARE = '\0';

/**
 * kubectl's (pflag's) flag forms that node:util's parseArgs reads differently: `-o=json` (parseArgs would
 * take "=json" as the value), `--flag=true|false` on a boolean flag (parseArgs refuses a value) and a bare
 * optionalValue flag (parseArgs would take the next word as its value).
 */
function pflagForms(argv: string[], flags: Record<string, FlagSpec>): { args: string[]; explicitFalse: string[] } {
  const args: string[] = [];
  const explicitFalse: string[] = [];
  const byShort = new Map(
    Object.entries(flags)
      .filter(([, f]) => f.short)
      .map(([name, f]) => [f.short!, { name, f }]),
  );
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      args.push(...argv.slice(i));
      break;
    }
    if (a.startsWith('--') && flags[a.slice(2)]?.optionalValue) {
      args.push(`${a}=${BARE}`);
      continue;
    }
    const short = /^-([A-Za-z])=(.*)$/s.exec(a);
    if (short && byShort.get(short[1]!)?.f.type === 'string') {
      args.push(`-${short[1]}`, short[2]!);
      continue;
    }
    const bool = /^--([A-Za-z0-9-]+)=(true|false)$/.exec(a) ?? /^-([A-Za-z])=(true|false)$/.exec(a);
    const name = bool ? (bool[1]!.length === 1 ? byShort.get(bool[1]!)?.name : bool[1]!) : undefined;
    if (bool && name && flags[name]?.type === 'boolean') {
      if (bool[2] === 'true') args.push(`--${name}`);
      else explicitFalse.push(name);
      continue;
    }
    args.push(a);
  }
  return { args, explicitFalse };
}

/** Parses argv for one command: flags (its own and the global ones) and named positionals. */
export function parseCommand(spec: CommandSpec, argv: string[]): Record<string, unknown> {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }> = {};
  for (const [name, f] of Object.entries({ ...GLOBAL_FLAGS, ...spec.flags })) {
    options[name] = { type: f.type, ...(f.short ? { short: f.short } : {}), ...(f.multiple ? { multiple: true } : {}) };
  }
  const { args: normalized, explicitFalse } = pflagForms(argv, { ...GLOBAL_FLAGS, ...spec.flags });
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: normalized, options, allowPositionals: true, strict: true });
    for (const name of explicitFalse) parsed.values[name] = false;
  } catch (err) {
    const msg = (err as Error).message.replace(/\. To specify a positional argument.*$/s, '');
    throw usageError(`${msg}\nSee 'kubectl nodedisks ${spec.name} --help'.`);
  }
  const args: Record<string, unknown> = {};
  for (const [name, f] of Object.entries({ ...GLOBAL_FLAGS, ...spec.flags })) {
    const v = parsed.values[name] ?? f.default;
    if (v === undefined) continue;
    if (v === BARE) {
      args[name] = true;
      continue;
    }
    if (f.choices && typeof v === 'string' && !f.choices.includes(v)) {
      throw usageError(`--${name} must be one of ${f.choices.join(', ')}, got ${JSON.stringify(v)}`);
    }
    if (f.integer) {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1) throw usageError(`--${name} must be a positive whole number, got ${JSON.stringify(v)}`);
      args[name] = n;
      continue;
    }
    args[name] = v;
  }
  const rest = [...parsed.positionals];
  for (const p of spec.positionals) {
    if (p.variadic) {
      args[p.name] = rest.splice(0);
      continue;
    }
    const v = rest.shift();
    if (v === undefined) {
      if (p.required && !args.help) throw usageError(`${spec.name} needs ${p.name.toUpperCase()}: ${p.describe}\nSee 'kubectl nodedisks ${spec.name} --help'.`);
      continue;
    }
    if (p.choices && !p.choices.includes(v)) throw usageError(`${p.name.toUpperCase()} must be one of ${p.choices.join(', ')}, got ${JSON.stringify(v)}`);
    args[p.name] = v;
  }
  if (rest.length) throw usageError(`unexpected argument ${JSON.stringify(rest[0])}\nSee 'kubectl nodedisks ${spec.name} --help'.`);
  return args;
}

function flagLines(flags: Record<string, FlagSpec>): string {
  return Object.entries(flags)
    .map(([name, f]) => {
      const def = f.type === 'boolean' ? (f.default === true ? 'true' : 'false') : `'${f.default ?? ''}'`;
      const head = `${f.short ? `-${f.short}, ` : '    '}--${name}=${def}`;
      return `    ${head}:\n\t${f.describe}\n`;
    })
    .join('\n');
}

/** kubectl's help layout: description, examples, options, usage. */
export function commandHelp(spec: CommandSpec): string {
  const usage = spec.positionals.map((p) => (p.variadic ? `[${p.name.toUpperCase()}...]` : p.required ? p.name.toUpperCase() : `[${p.name.toUpperCase()}]`)).join(' ');
  const examples = spec.examples.map(([cmd, what]) => `  # ${what}\n  ${cmd}`).join('\n\n');
  return (
    `${spec.description ?? spec.summary}\n\n` +
    (examples ? `Examples:\n${examples}\n\n` : '') +
    (Object.keys(spec.flags).length ? `Options:\n${flagLines(spec.flags)}\n` : '') +
    `Usage:\n  kubectl nodedisks ${spec.name} ${usage}${usage ? ' ' : ''}[options]\n\n` +
    `Use "kubectl nodedisks options" for a list of global command-line options (applies to all commands).\n`
  );
}

export function globalHelp(): string {
  return `The following options can be passed to any command:\n\n${flagLines(GLOBAL_FLAGS)}`;
}
