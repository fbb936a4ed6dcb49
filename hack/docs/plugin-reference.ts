// docs/reference/plugin.md, from the plugin's own command specs (plugin/cli.ts's COMMANDS, plugin/args.ts's
// GLOBAL_FLAGS, plugin/errors.ts's EXIT): what `--help` prints, as a page, so the two cannot differ.
import { commandHelp, type CommandSpec, type FlagSpec, GLOBAL_FLAGS } from '../../plugin/args.ts';
import { COMMANDS, rootHelp } from '../../plugin/cli.ts';
import { EXIT } from '../../plugin/errors.ts';
import type { GeneratedFile } from '../lib/generated-files.ts';
import { anchor, code, inline, table, textBlock } from './markdown.ts';

export const PLUGIN_REFERENCE = 'docs/reference/plugin.md';

/**
 * When each exit code is returned, from plugin/errors.ts (describeError) and the commands that raise a
 * PluginError with it. Typed by EXIT's names: a new exit code does not compile until it is described here.
 */
const EXIT_CAUSES: Record<keyof typeof EXIT, string> = {
  ok: 'The command did what was asked (help and `--dry-run` included).',
  error:
    'Any other failure: the API server busy or failing (429, 5xx), a watch that ended, a list that changed too much while read page by page, a file under `--dir` that cannot be read or written (gitops).',
  usage: 'Bad command line: an unknown command or flag, a missing argument, a value not among the choices; a kubeconfig that cannot be used; a change the API server rejected as invalid (422).',
  notFound:
    'No such NodeDisk or NodeDiskClaim (404), no NodeDisk matching the selection, the NodeDisk API not installed in the cluster, a claim deleted while waiting for it to bind; `list NAME` of a missing disk.',
  forbidden: 'The API server did not accept the credentials (401) or RBAC refused the request (403); the message names the ClusterRole to ask for.',
  conflict:
    'A reservation held by someone else (without `--force`), fields owned by another field manager (a GitOps controller: change them in git), or an object someone else changed while the command ran (run it again).',
  timeout: '`wait` or `claim --wait` ran out of `--timeout`, or a request ran out of `--request-timeout`.',
  unreachable: 'No answer from the API server (connection refused, DNS, TLS, proxy); the message says what to check.',
};

/** The short word per code from the root help's "Exit codes:" line, so the page says what `--help` says. */
function exitWords(): Map<number, string> {
  const line = /Exit codes: ([\s\S]*?)\.\n/.exec(rootHelp())?.[1]?.replace(/\n/g, ' ');
  if (!line) throw new Error('plugin/cli.ts rootHelp() has no "Exit codes: …." line; the reference reads the codes from it');
  const words = new Map<number, string>();
  for (const part of line.split(/,\s*/)) {
    const m = /^(\d+) (.+)$/.exec(part.trim());
    if (m) words.set(Number(m[1]), m[2]!);
  }
  for (const [name, n] of Object.entries(EXIT)) {
    if (!words.has(n)) throw new Error(`exit code ${n} (EXIT.${name}) is missing from the "Exit codes:" line of plugin/cli.ts rootHelp(); add it there`);
  }
  return words;
}

function flagType(f: FlagSpec): string {
  const t = f.integer ? 'integer' : f.type;
  return f.multiple ? `${t} (repeatable)` : t;
}

function flagDefault(f: FlagSpec): string {
  if (f.type === 'boolean') return code(f.default === true ? 'true' : 'false');
  return f.default === undefined || f.default === '' ? '' : code(String(f.default));
}

function flagTable(flags: Record<string, FlagSpec>): string {
  return table(
    ['flag', 'type', 'default', 'description'],
    Object.entries(flags).map(([name, f]) => [
      code(`${f.short ? `-${f.short}, ` : ''}--${name}`),
      flagType(f),
      flagDefault(f),
      inline(f.describe) + (f.choices ? `; one of ${f.choices.map(code).join(', ')}` : ''),
    ]),
  );
}

/** The usage line exactly as `kubectl nodedisks CMD --help` prints it. */
function usage(spec: CommandSpec): string {
  const m = /\nUsage:\n {2}(.+)\n/.exec(commandHelp(spec));
  if (!m) throw new Error(`no "Usage:" in the help of ${spec.name}`);
  return m[1]!;
}

function commandSection(spec: CommandSpec): string {
  const parts = [`## ${spec.name}`, inline(spec.description ?? spec.summary), textBlock(usage(spec))];
  if (spec.aliases?.length) parts.push(`Alias: ${spec.aliases.map((a) => code(a)).join(', ')}.`);
  if (spec.positionals.length) {
    parts.push(
      '**Arguments**',
      table(
        ['argument', 'description', 'values'],
        spec.positionals.map((p) => [
          code(p.variadic ? `${p.name.toUpperCase()}...` : p.name.toUpperCase()),
          inline(p.describe) + (p.required ? ' (required)' : ''),
          p.choices ? p.choices.map(code).join(', ') : '',
        ]),
      ),
    );
  }
  if (Object.keys(spec.flags).length) parts.push('**Options**', flagTable(spec.flags));
  if (spec.examples.length) parts.push('**Examples**', textBlock(spec.examples.map(([cmd, what]) => `# ${what}\n${cmd}`).join('\n\n')));
  return parts.join('\n\n');
}

/** The page's text. */
export function pluginReference(commands: CommandSpec[] = COMMANDS as CommandSpec[], globals: Record<string, FlagSpec> = GLOBAL_FLAGS): string {
  const words = exitWords();
  const page = [
    '<!-- Generated by `npm run generate` from plugin/ (hack/docs/plugin-reference.ts): do not edit. -->',
    '# `kubectl nodedisks` reference',
    'Every command, argument, flag and exit code of the kubectl plugin, from the same specs its `--help` prints. Install it and the tasks it is for: [reserve](../reserve.md), [claims](../claims.md).',
    table(
      ['command', 'what it does'],
      commands.map((c) => [`[${c.name}](#${anchor(c.name)})${c.aliases?.length ? ` (alias ${c.aliases.join(', ')})` : ''}`, inline(c.summary)]),
    ),
    '## Exit codes',
    table(
      ['code', 'name', 'when'],
      Object.entries(EXIT).map(([name, n]) => [String(n), inline(words.get(n)!), inline(EXIT_CAUSES[name as keyof typeof EXIT])]),
    ),
    '## Global options',
    'Accepted by every command (`kubectl nodedisks options`), with the meaning kubectl gives them.',
    flagTable(globals),
    ...commands.map(commandSection),
  ];
  return `${page.join('\n\n')}\n`;
}

export function pluginReferenceFiles(): GeneratedFile[] {
  return [{ path: PLUGIN_REFERENCE, content: pluginReference() }];
}
