// `npm start` (hack/demo.ts) as a test starts it: the real demo, its state in a directory of the test's
// (NODEDISKS_DEV_DIR), its output kept, stopped with Ctrl-C's signal.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { eventually } from '../../hack/lib/wait.ts';

const DEMO = join(REPO_ROOT, 'hack', 'demo.ts');
/** What the demo prints once everything is up. */
export const DEMO_UP = 'NodeDisks is running';

export interface Demo {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** Starts a demo whose state lives in `work` (what `.nodedisks-dev/` is for `npm start`). */
export function startDemo(work: string): Demo {
  let output = '';
  const child = spawn(process.execPath, [DEMO], { env: { ...process.env, NODEDISKS_DEV_DIR: work }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.on('data', (d: Buffer) => void (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => void (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

/** Waits until the demo says it is up (a loaded machine may take a few minutes to start a control plane). */
export async function demoUp(d: Demo, timeoutMs = 180_000): Promise<void> {
  await eventually('the demo to be up', async () => d.output().includes(DEMO_UP), timeoutMs, 250);
}

/** Stops the demo as Ctrl-C does; its exit code. */
export async function stopDemo(d: Demo): Promise<number | null> {
  if (d.child.exitCode !== null) return d.child.exitCode;
  d.child.kill('SIGINT');
  return await d.exited;
}
