// A disk that fails on command, for the tests of disk health: nodedisks-faultydisk (main.go beside this
// file, github.com/hanwen/go-fuse) serves an image over FUSE and refuses reads, writes or both with EIO
// when told to, so a loop device attached over the served file returns real IO errors to whatever reads or
// writes it: the kernel, a filesystem, a pod. Built once from the pinned go.mod/go.sum into the cache.
// Root only (it mounts FUSE itself: the machines that run it have no fusermount).
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { ensureGoTool } from '../lib/gobuild.ts';

const moduleDir = fileURLToPath(new URL('.', import.meta.url));

/** The path of nodedisks-faultydisk, built first if the cache does not have it. */
export function ensureFaultyDisk(log?: (line: string) => void): Promise<string> {
  return ensureGoTool({ name: 'faultydisk', what: 'a FUSE file that fails on command (github.com/hanwen/go-fuse)', moduleDir, ...(log ? { log } : {}) });
}

export type FaultMode = 'fail reads' | 'fail writes' | 'fail all' | 'heal';

/** One served file; `path` is what a loop device is attached over. */
export class FaultyDisk {
  private readonly answers: string[] = [];
  private readonly waiting: ((line: string | undefined) => void)[] = [];
  private readonly exited: Promise<number | null>;
  private stderr = '';

  private readonly child: ChildProcessWithoutNullStreams;
  readonly path: string;

  private constructor(child: ChildProcessWithoutNullStreams, path: string) {
    this.child = child;
    this.path = path;
    child.stderr.on('data', (d: Buffer) => {
      this.stderr += d.toString();
    });
    createInterface({ input: child.stdout }).on('line', (line) => {
      const w = this.waiting.shift();
      if (w) w(line);
      else this.answers.push(line);
    });
    this.exited = new Promise((resolve) => child.once('close', (code) => resolve(code)));
    void this.exited.then(() => {
      for (const w of this.waiting.splice(0)) w(undefined);
    });
  }

  /**
   * Serves `image` as `<mountpoint>/<name>` (mountpoint: an empty dir) and resolves once it is served.
   * `enter` runs it through a command that execs it elsewhere (nsenter into a local cluster node's mount
   * namespace), so that the mount is that namespace's and the process spawned is still the server.
   */
  static async serve(bin: string, image: string, mountpoint: string, name = 'disk.img', enter: string[] = []): Promise<FaultyDisk> {
    const command = [...enter, bin, '--image', image, '--mountpoint', mountpoint, '--name', name];
    const child = spawn(command[0]!, command.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
    const disk = new FaultyDisk(child, `${mountpoint}/${name}`);
    const first = await disk.nextLine(30_000);
    if (first !== 'ready') {
      child.kill('SIGKILL');
      throw new Error(`nodedisks-faultydisk did not start: ${disk.stderr.trim() || first || 'no output'}`);
    }
    return disk;
  }

  /** Sets what fails from the next request on; resolves with the program's answer. */
  async set(mode: FaultMode): Promise<string> {
    this.child.stdin.write(`${mode}\n`);
    const answer = await this.nextLine(10_000);
    if (!answer?.startsWith('ok ')) throw new Error(`nodedisks-faultydisk refused "${mode}": ${answer ?? this.stderr.trim()}`);
    return answer;
  }

  /** Unmounts and waits for the program to exit. A loop device still attached over the file keeps the mount busy: detach it first. */
  async close(): Promise<void> {
    this.child.stdin.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    const code = await this.exited;
    clearTimeout(timer);
    if (code !== 0) throw new Error(`nodedisks-faultydisk exited with ${String(code)}: ${this.stderr.trim()}`);
  }

  private nextLine(timeoutMs: number): Promise<string | undefined> {
    const ready = this.answers.shift();
    if (ready !== undefined) return Promise.resolve(ready);
    if (this.child.exitCode !== null) return Promise.resolve(undefined);
    return new Promise((resolve, reject) => {
      const answered = (line: string | undefined) => {
        clearTimeout(timer);
        resolve(line);
      };
      // A late answer must not be taken for the next command's.
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(answered), 1);
        reject(new Error(`nodedisks-faultydisk gave no answer in ${timeoutMs / 1000} s: ${this.stderr.trim()}`));
      }, timeoutMs);
      this.waiting.push(answered);
    });
  }
}
