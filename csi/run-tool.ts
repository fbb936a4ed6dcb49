// Runs one of the node's storage tools (util-linux, e2fsprogs): an argument array, never a shell, with a
// time limit, and messages in C so that what a tool says reads the same on every node. A tool that fails
// becomes an internal NodeVolumeError naming the command and what it printed.
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { NodeVolumeError } from './node-errors.ts';

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

export function runTool(file: string, args: string[], o: ToolOptions): Promise<ToolResult> {
  const ok = new Set([0, ...(o.okExitCodes ?? [])]);
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      { timeout: o.timeoutMs, killSignal: 'SIGKILL', env: { ...process.env, PATH: toolPath(), LC_ALL: 'C' }, maxBuffer: 4 * 1024 * 1024, encoding: 'utf8' },
      (err, stdout, stderr) => {
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
      },
    );
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
