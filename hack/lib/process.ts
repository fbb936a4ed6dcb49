// A server process of the control plane: started under lifeline.sh (so it dies with us), with its
// output kept in a log file for the failure report, and stopped with SIGTERM then SIGKILL.

import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync, readFileSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const LIFELINE = fileURLToPath(new URL('./lifeline.sh', import.meta.url));

export class ServerProcess {
  readonly name: string;
  readonly logFile: string;
  private child: ChildProcess | undefined;
  private exited: Promise<number | null> | undefined;
  private exitCode: number | null | undefined;
  /** Where this run's output starts in the log file (the file is appended to across restarts). */
  private logStart = 0;

  constructor(name: string, logFile: string) {
    this.name = name;
    this.logFile = logFile;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== undefined && this.exitCode === undefined;
  }

  start(binary: string, args: string[], env: NodeJS.ProcessEnv = process.env): void {
    this.exitCode = undefined;
    const out = openSync(this.logFile, 'a');
    this.logStart = statSync(this.logFile).size;
    try {
      // stdin is a pipe we never write: when this process exits, lifeline.sh sees EOF and stops the server.
      this.child = spawn(LIFELINE, [binary, ...args], { stdio: ['pipe', out, out], env });
    } finally {
      closeSync(out);
    }
    this.exited = new Promise((resolve) => {
      this.child!.on('exit', (code) => {
        this.exitCode = code;
        resolve(code);
      });
      this.child!.on('error', () => {
        this.exitCode = -1;
        resolve(-1);
      });
    });
  }

  /** The last `maxBytes` of the process's output. */
  logs(maxBytes = 64 * 1024): string {
    try {
      const text = readFileSync(this.logFile, 'utf8');
      return text.length > maxBytes ? `…${text.slice(-maxBytes)}` : text;
    } catch {
      return '';
    }
  }

  /** The output of the current (or last) run only. */
  logsOfThisRun(): string {
    try {
      return readFileSync(this.logFile).subarray(this.logStart).toString('utf8');
    } catch {
      return '';
    }
  }

  async stop(timeoutMs = 10_000): Promise<void> {
    if (!this.child || !this.exited) return;
    if (this.exitCode === undefined) {
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child?.kill('SIGKILL'), timeoutMs);
      await this.exited;
      clearTimeout(timer);
    }
    this.child.stdin?.destroy();
  }

  /** Resolves with the exit code when the process ends (for readiness loops that must notice a crash). */
  whenExited(): Promise<number | null> {
    return this.exited ?? Promise.resolve(null);
  }
}
