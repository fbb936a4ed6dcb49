// Runs a command to completion and keeps what a test asserts on: the exit code (-1 when it was killed or
// could not start), stdout and stderr. Never rejects: a failing command is a result, not an exception.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT } from '../../hack/lib/paths.ts';

/** The plugin's single executable, as `npm run build` leaves it and krew ships it. */
export const PLUGIN_BIN = join(REPO_ROOT, 'dist', 'bin', 'kubectl-nodedisks');

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function execResult(file: string, args: readonly string[], o: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<ExecResult> {
  return new Promise((resolve) => {
    execFile(file, args, { env: { ...process.env, ...o.env }, timeout: o.timeoutMs ?? 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}
