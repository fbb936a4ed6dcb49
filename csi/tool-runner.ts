// csi-node's side of nodedisks-toolrunner (./toolrunner): the tools run as that small process's children,
// so that their forks are its own and never hold csi-node's main thread (docs/adr/0048). One runner process,
// started at the first run and again after it ends; requests and answers are JSON lines on its pipes,
// matched by id. A run whose runner goes away is failed with that reason (its caller is retried by the
// kubelet, as for any failed call); a runner that does not answer in time is given up on the same way.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface RunnerAnswer {
  code: number;
  signal?: string;
  stdout: string;
  stderr: string;
  timedOut?: boolean;
  notFound?: boolean;
  truncated?: boolean;
  error?: string;
}

interface Pending {
  resolve: (a: RunnerAnswer) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

/** How long past a run's own time limit the runner may take to answer before it is given up on. */
const ANSWER_GRACE_MS = 10_000;

export class ToolRunner {
  private child: ChildProcessWithoutNullStreams | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private stderrTail = '';
  private readonly bin: string;
  private readonly env: NodeJS.ProcessEnv;

  /** `bin`: the runner's path; `env`: its environment, which the tools it starts inherit (PATH, LC_ALL). */
  constructor(bin: string, env: NodeJS.ProcessEnv) {
    this.bin = bin;
    this.env = env;
  }

  run(file: string, args: string[], timeoutMs: number): Promise<RunnerAnswer> {
    const child = this.started();
    const id = ++this.nextId;
    return new Promise<RunnerAnswer>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`the tool runner ${this.bin} did not answer within ${Math.round((timeoutMs + ANSWER_GRACE_MS) / 1000)} s`));
      }, timeoutMs + ANSWER_GRACE_MS);
      this.pending.set(id, { resolve, reject, timer });
      child.stdin.write(`${JSON.stringify({ id, file, args, timeoutMs })}\n`);
    });
  }

  /** Ends the runner (it finishes the runs under way first) and waits for it. */
  async close(): Promise<void> {
    const child = this.child;
    if (!child) return;
    const closed = new Promise((resolve) => child.once('close', resolve));
    child.stdin.end();
    await closed;
  }

  private started(): ChildProcessWithoutNullStreams {
    if (this.child) return this.child;
    const child = spawn(this.bin, [], { stdio: ['pipe', 'pipe', 'pipe'], env: this.env });
    this.child = child;
    this.stderrTail = '';
    child.stderr.on('data', (d: Buffer) => {
      this.stderrTail = (this.stderrTail + d.toString()).slice(-2000);
    });
    createInterface({ input: child.stdout }).on('line', (line) => this.answered(line));
    // A failed start (no such file) and a runner that ended both end here: what waits on it fails with why.
    const gone = (why: string) => {
      if (this.child !== child) return;
      this.child = undefined;
      const err = new Error(`the tool runner ${this.bin} ${why}${this.stderrTail.trim() ? `: ${this.stderrTail.trim()}` : ''}`);
      for (const [id, p] of this.pending) {
        clearTimeout(p.timer);
        this.pending.delete(id);
        p.reject(err);
      }
    };
    child.on('error', (err) => gone(`could not be started (${err.message})`));
    child.on('close', (code, signal) => gone(`exited (${signal ?? `code ${code}`})`));
    child.stdin.on('error', () => undefined);
    return child;
  }

  private answered(line: string): void {
    let a: RunnerAnswer & { id?: number };
    try {
      a = JSON.parse(line) as RunnerAnswer & { id?: number };
    } catch {
      return;
    }
    const p = this.pending.get(a.id ?? -1);
    if (!p) return;
    this.pending.delete(a.id ?? -1);
    clearTimeout(p.timer);
    p.resolve(a);
  }
}
