// Instructions a command executes, counted by valgrind (callgrind, all threads, children followed): the one
// figure of a start-up that a shared machine's load does not move. A Go program (kubectl) is not worth
// counting this way; these benches count Node processes run directly.
import { execFile, execFileSync } from 'node:child_process';

/** Whether valgrind is on PATH. */
export function haveValgrind(): boolean {
  try {
    execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Instructions one run of `cmd args` executes, in millions (every process and thread of the run). */
export function instructions(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const valgrind = ['--tool=callgrind', '--callgrind-out-file=/dev/null', '--smc-check=all-non-file', '--trace-children=yes', cmd, ...args];
  return new Promise((resolve, reject) => {
    execFile('valgrind', valgrind, { env, maxBuffer: 256 * 1024 * 1024 }, (err, _out, stderr) => {
      if (err) return reject(new Error(`valgrind ${cmd} ${args.join(' ')}: ${stderr.slice(-2000)}`));
      const refs = [...stderr.matchAll(/I\s+refs:\s+([\d,]+)/g)].map((m) => Number(m[1]!.replaceAll(',', '')));
      if (refs.length === 0) return reject(new Error(`valgrind printed no instruction count: ${stderr.slice(-2000)}`));
      resolve(refs.reduce((a, b) => a + b, 0) / 1e6);
    });
  });
}
