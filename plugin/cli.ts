// kubectl nodedisks: the command line. Global flags are kubectl's; each command lives in ./cmd/.
import { commandHelp, globalHelp, parseCommand, type CommandSpec } from './args.ts';
import { claimCommand } from './cmd/claim.ts';
import { claimsCommand } from './cmd/claims.ts';
import { completionScript, complete, SHELLS } from './cmd/completion.ts';
import { cordonCommand, uncordonCommand } from './cmd/cordon.ts';
import { pruneCommand } from './cmd/prune.ts';
import { gitopsCommand } from './cmd/gitops.ts';
import { listCommand } from './cmd/list.ts';
import { releaseCommand, reserveCommand } from './cmd/reserve.ts';
import { statusCommand } from './cmd/status.ts';
import { waitCommand } from './cmd/wait.ts';
import { Session, type GlobalFlags, type Io } from './context.ts';
import { describeError, EXIT, ReportedError, usageError } from './errors.ts';
import { escapeControl } from './escape.ts';
import { versionLine } from './version.ts';

const completionCommand: CommandSpec<{ shell?: string }> = {
  name: 'completion',
  summary: 'Print a shell completion script (bash, zsh, fish or powershell) for kubectl-nodedisks',
  description:
    'Print a shell completion script for the kubectl-nodedisks executable. Through kubectl (1.26+), `kubectl nodedisks <TAB>` completes when the kubectl_complete-nodedisks helper (in the release archive) is on your PATH next to kubectl-nodedisks; after a krew install, copy it there as the install message says.',
  positionals: [{ name: 'shell', describe: SHELLS.join(', '), required: true, choices: SHELLS }],
  flags: {},
  examples: [
    ['source <(kubectl-nodedisks completion bash)', 'Complete kubectl-nodedisks in the current bash'],
    ['kubectl-nodedisks completion fish | source', 'Complete kubectl-nodedisks in the current fish'],
    ['kubectl-nodedisks completion powershell | Out-String | Invoke-Expression', 'Complete kubectl-nodedisks in the current PowerShell'],
  ],
  run: async (session, args) => session.io.out(completionScript(args.shell ?? 'bash')),
};

const versionCommand: CommandSpec = {
  name: 'version',
  summary: 'Print the plugin version',
  positionals: [],
  flags: {},
  examples: [],
  run: async (session) => session.io.out(`${versionLine()}\n`),
};

export const COMMANDS: CommandSpec<never>[] = [
  listCommand,
  statusCommand,
  reserveCommand,
  releaseCommand,
  cordonCommand,
  uncordonCommand,
  pruneCommand,
  waitCommand,
  // NodeDiskClaims: a team's own disks, in its namespace.
  claimCommand,
  claimsCommand,
  gitopsCommand,
  completionCommand,
  versionCommand,
] as CommandSpec<never>[];

function find(name: string): CommandSpec<never> | undefined {
  return COMMANDS.find((c) => c.name === name || c.aliases?.includes(name));
}

export function rootHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length)) + 2;
  return (
    'kubectl nodedisks lists, inspects, reserves, releases, cordons, prunes and waits for node-local disks (NodeDisks),\n' +
    'and writes the same changes as Kustomize overlays for Argo CD or Flux.\n\n' +
    'Commands:\n' +
    COMMANDS.map((c) => `  ${c.name.padEnd(width)}${c.summary}${c.aliases?.length ? ` (alias: ${c.aliases.join(', ')})` : ''}`).join('\n') +
    '\n\nUsage:\n  kubectl nodedisks <command> [options]\n\n' +
    'Use "kubectl nodedisks <command> --help" for more information about a given command.\n' +
    'Use "kubectl nodedisks options" for a list of global command-line options (applies to all commands).\n\n' +
    'Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 forbidden or unauthorized, 5 conflict, 6 timeout,\n' +
    '7 API server unreachable.\n'
  );
}

/** Runs the plugin with `argv` (without the program name); resolves with the exit code. */
export async function run(argv: string[], io: Io): Promise<number> {
  let session: Session | undefined;
  try {
    const [first, ...rest] = argv;
    // kubectl's plugin completion protocol.
    if (first === '__complete') {
      await complete(io, rest, COMMANDS as CommandSpec[]);
      return EXIT.ok;
    }
    // No arguments: help on stdout and success, as kubectl does.
    if (first === undefined || first === 'help' || first === '--help' || first === '-h') {
      io.out(rootHelp());
      return EXIT.ok;
    }
    if (first === 'options') {
      io.out(globalHelp());
      return EXIT.ok;
    }
    const spec = find(first);
    if (!spec) throw usageError(`unknown command ${JSON.stringify(first)} for "kubectl nodedisks"\nRun 'kubectl nodedisks --help' for usage.`);
    const args = parseCommand(spec as CommandSpec, rest);
    if (args.help) {
      io.out(commandHelp(spec as CommandSpec));
      return EXIT.ok;
    }
    session = new Session(args as GlobalFlags, io);
    await (spec as CommandSpec).run(session, args);
    return EXIT.ok;
  } catch (err) {
    const { message, exitCode } = describeError(err);
    // A message may quote the server (or a kubeconfig, an exec plugin): its own lines are kept, its
    // control characters are not passed to the terminal.
    if (!(err instanceof ReportedError)) io.err(`error: ${escapeControl(message, true)}\n`);
    return exitCode;
  } finally {
    session?.close();
  }
}
