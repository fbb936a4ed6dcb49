// Runs one of the node's storage tools (util-linux, e2fsprogs): an argument array, never a shell, with a
// time limit, and messages in C so that what a tool says reads the same on every node. A tool that fails
// becomes an internal NodeVolumeError naming the command and what it printed. Started by this process, or,
// once useToolRunner is given one, by nodedisks-toolrunner (./tool-runner.ts, docs/adr/0048), with the same
// results and errors either way.
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { NodeVolumeError } from './node-errors.ts';
import { ToolRunner } from './tool-runner.ts';

/** The tools live in sbin, which a container's PATH may lack. */
const SBIN = ['/usr/local/sbin', '/usr/sbin', '/sbin'];

function toolPath(): string {
  const dirs = (process.env.PATH ?? '').split(delimiter).filter(Boolean);
  for (const d of SBIN) if (!dirs.includes(d)) dirs.push(d);
  return dirs.join(delimiter);
}

export interface ToolResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

export interface ToolOptions {
  timeoutMs: number;
  /** Exit codes that are answers rather than failures (blkid's 2: nothing found). */
  okExitCodes?: number[];
}

export function commandLine(file: string, args: string[]): string {
  return [file, ...args].map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : JSON.stringify(a))).join(' ');
}

const toolEnv = () => ({ ...process.env, PATH: toolPath(), LC_ALL: 'C' });
let runner: ToolRunner | undefined;

/** From now on the tools run as children of the runner at `bin` ('' or undefined: of this process again). */
export async function useToolRunner(bin: string | undefined): Promise<void> {
  const before = runner;
  runner = bin ? new ToolRunner(bin, toolEnv()) : undefined;
  await before?.close();
}

async function runByRunner(r: ToolRunner, file: string, args: string[], o: ToolOptions): Promise<ToolResult> {
  const ok = new Set([0, ...(o.okExitCodes ?? [])]);
  const cmd = commandLine(file, args);
  let a: Awaited<ReturnType<ToolRunner['run']>>;
  try {
    a = await r.run(file, args, o.timeoutMs);
  } catch (err) {
    throw new NodeVolumeError('internal', `cannot run ${cmd}: ${(err as Error).message}`, { cause: err });
  }
  if (a.notFound) throw new NodeVolumeError('internal', `${file} is not installed on this node (needed for: ${cmd})`);
  if (a.timedOut) throw new NodeVolumeError('internal', `${cmd} did not finish within ${Math.round(o.timeoutMs / 1000)} s (stopped with ${a.signal ?? 'SIGKILL'})`);
  if (a.error && a.code === -1) throw new NodeVolumeError('internal', `cannot run ${cmd}: ${a.error}`);
  if (a.truncated) throw new NodeVolumeError('internal', `${cmd} printed more than the 4 MiB kept of its output`);
  if (a.signal) throw new NodeVolumeError('internal', `${cmd} was ended by ${a.signal}${(a.stderr || a.stdout).trim() ? `: ${(a.stderr || a.stdout).trim()}` : ''}`);
  if (ok.has(a.code)) return { stdout: a.stdout, stderr: a.stderr, exitCode: a.code };
  const said = (a.stderr || a.stdout).trim();
  throw new NodeVolumeError('internal', `${cmd} failed (exit ${a.code})${said ? `: ${said}` : ''}`);
}

export function runTool(file: string, args: string[], o: ToolOptions): Promise<ToolResult> {
  if (runner) return runByRunner(runner, file, args, o);
  const ok = new Set([0, ...(o.okExitCodes ?? [])]);
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout: o.timeoutMs, killSignal: 'SIGKILL', env: toolEnv(), maxBuffer: 4 * 1024 * 1024, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (!err) return resolve({ stdout, stderr, exitCode: 0 });
      const e = err as NodeJS.ErrnoException & { code?: number | string; killed?: boolean; signal?: string | null };
      const cmd = commandLine(file, args);
      if (e.code === 'ENOENT') return reject(new NodeVolumeError('internal', `${file} is not installed on this node (needed for: ${cmd})`, { cause: err }));
      if (e.killed || e.signal) {
        return reject(new NodeVolumeError('internal', `${cmd} did not finish within ${Math.round(o.timeoutMs / 1000)} s (stopped with ${e.signal ?? 'SIGKILL'})`, { cause: err }));
      }
      if (typeof e.code === 'number' && ok.has(e.code)) return resolve({ stdout, stderr, exitCode: e.code });
      const said = (stderr || stdout).trim();
      reject(new NodeVolumeError('internal', `${cmd} failed (exit ${String(e.code)})${said ? `: ${said}` : ''}`, { cause: err }));
    });
  });
}

/** Whether an executable of this name is on the tools' PATH (mkfs.xfs is optional). */
export async function hasTool(name: string): Promise<boolean> {
  for (const dir of toolPath().split(delimiter)) {
    try {
      await access(join(dir, name), constants.X_OK);
      return true;
    } catch {}
  }
  return false;
}
