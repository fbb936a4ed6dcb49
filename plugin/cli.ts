// kubectl nodedisks: the command line. Global flags are kubectl's; each command lives in ./commands/.
import yargs, { type Argv } from 'yargs';
import { completionScript, complete } from './commands/completion.ts';
import { gitopsCommand } from './commands/gitops.ts';
import { listCommand } from './commands/list.ts';
import { releaseCommand, reserveCommand } from './commands/reserve.ts';
import { statusCommand } from './commands/status.ts';
import { waitCommand } from './commands/wait.ts';
import { Session, type GlobalFlags, type Io } from './context.ts';
import { describeError, EXIT, usageError } from './errors.ts';
import { versionLine } from './version.ts';

interface Command<A> {
  command: string;
  aliases?: string[];
  describe: string;
  builder: (y: Argv) => Argv<unknown>;
  run: (session: Session, args: A) => Promise<void>;
}

const GLOBAL_GROUP = 'Global flags (as kubectl):';

function globalFlags(y: Argv): Argv {
  return y
    .option('kubeconfig', { type: 'string', describe: 'Path to the kubeconfig file', group: GLOBAL_GROUP })
    .option('context', { type: 'string', describe: 'The kubeconfig context to use', group: GLOBAL_GROUP })
    .option('cluster', { type: 'string', describe: 'The kubeconfig cluster to use', group: GLOBAL_GROUP })
    .option('user', { type: 'string', describe: 'The kubeconfig user to use', group: GLOBAL_GROUP })
    .option('server', { alias: 's', type: 'string', describe: 'The address and port of the API server', group: GLOBAL_GROUP })
    .option('token', { type: 'string', describe: 'Bearer token for authentication', group: GLOBAL_GROUP })
    .option('as', { type: 'string', describe: 'Username to impersonate', group: GLOBAL_GROUP })
    .option('as-group', { type: 'string', array: true, describe: 'Group to impersonate (repeatable)', group: GLOBAL_GROUP })
    .option('certificate-authority', { type: 'string', describe: 'Path to a CA certificate file', group: GLOBAL_GROUP })
    .option('insecure-skip-tls-verify', { type: 'boolean', describe: 'Do not verify the server certificate', group: GLOBAL_GROUP })
    .option('request-timeout', { type: 'string', default: '0', describe: 'How long to wait for one request (0 = no limit; 30s, 1m)', group: GLOBAL_GROUP });
}

/** Runs the plugin with `argv` (without the program name); resolves with the exit code. */
export async function run(argv: string[], io: Io): Promise<number> {
  // kubectl's plugin completion protocol bypasses the parser.
  if (argv[0] === '__complete') {
    const session = new Session({}, io);
    await complete(session, argv.slice(1));
    session.close();
    return EXIT.ok;
  }
  let session: Session | undefined;
  let action: Promise<void> | undefined;
  const bind = <A>(cmd: Command<A>) => ({
    command: cmd.command,
    aliases: cmd.aliases ?? [],
    describe: cmd.describe,
    builder: cmd.builder,
    handler: (args: unknown) => {
      session = new Session(args as GlobalFlags, io);
      action = cmd.run(session, args as A);
    },
  });
  let usage: string | undefined;
  let helpShown = false;
  const parser = globalFlags(
    yargs(argv)
      .scriptName('kubectl nodedisks')
      .usage('kubectl nodedisks: list, inspect, reserve, release and wait for node-local disks (NodeDisks).\n\nUsage:\n  kubectl nodedisks <command> [flags]')
      .parserConfiguration({ 'boolean-negation': false })
      .help('help')
      .alias('help', 'h')
      .version(false)
      .strict()
      .wrap(Math.min(120, process.stdout.columns || 100))
      .exitProcess(false)
      .showHelpOnFail(false)
      .fail((msg, err) => {
        if (err) throw err;
        usage = msg;
      }),
  )
    .command(bind(listCommand))
    .command(bind(statusCommand))
    .command(bind(reserveCommand))
    .command(bind(releaseCommand))
    .command(bind(waitCommand))
    .command(bind(gitopsCommand))
    .command({
      command: 'completion <shell>',
      describe: 'Print a shell completion script (bash or zsh)',
      builder: (y: Argv) => y.positional('shell', { choices: ['bash', 'zsh'] as const }),
      handler: (args: { shell?: string }) => {
        io.out(completionScript(args.shell ?? 'bash'));
      },
    })
    .command({ command: 'version', describe: 'Print the plugin version', handler: () => io.out(`${versionLine()}\n`) })
    .demandCommand(1, 'name a command: list, status, reserve, release, wait, gitops, completion or version')
    .epilogue("Use 'kubectl nodedisks <command> --help' for more about a command.\nExit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 forbidden, 5 conflict, 6 timeout, 7 cluster unreachable.");

  try {
    await parser.parseAsync(argv, {}, (err, _argv, output) => {
      if (output) {
        helpShown = true;
        io.out(output.endsWith('\n') ? output : `${output}\n`);
      }
      if (err && !usage) usage = err.message;
    });
    if (usage) throw usageError(`${usage}\nSee 'kubectl nodedisks --help'.`);
    if (action) await action;
    return EXIT.ok;
  } catch (err) {
    if (helpShown && !usage) return EXIT.ok;
    const { message, exitCode } = describeError(err);
    io.err(`error: ${message}\n`);
    return exitCode;
  } finally {
    session?.close();
  }
}
