// `npm run cluster` driven from a program, as the e2e tests and bench/cluster.ts drive it: started as a
// child process with its own data dir, its output watched, kubectl and cluster:ssh against it, polling
// with generous deadlines (the machine is loaded), and the check that a teardown left the host exactly
// as found.
import type { NodeAction } from './control.ts';
import type { ExecutionContext } from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, renameSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../lib/paths.ts';
import { readSysctls, sh, sleep } from './host.ts';
import { leftovers } from './state.ts';
import { NODE_NAMES } from './topology.ts';

const MAIN = join(REPO_ROOT, 'hack', 'cluster', 'main.ts');
const SSH = join(REPO_ROOT, 'hack', 'cluster', 'ssh.ts');
const NODE = join(REPO_ROOT, 'hack', 'cluster', 'node.ts');
export const UP = 'Ctrl-C here stops it';
export const TORN_DOWN = /torn down: no namespace, cgroup, mount, loop device or changed kernel setting left\./;

export interface Run {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

export function clusterEnv(): { dataDir: string; env: NodeJS.ProcessEnv } {
  const dataDir = mkdtempSync(join(tmpdir(), 'nodedisks-cluster-e2e-'));
  return { dataDir, env: { ...process.env, NODEDISKS_CLUSTER_DIR: dataDir } };
}

/** `npm run cluster -- <args…>` (e.g. --install=none) with its own data dir (clusterEnv). */
export function startCluster(env: NodeJS.ProcessEnv, args: string[] = []): Run {
  let out = '';
  // stdin a pipe we never write: if this test process dies, the cluster sees EOF and tears down.
  const child = spawn(process.execPath, [MAIN, ...args], { env: { ...env, NODEDISKS_CLUSTER_STOP_ON_EOF: '1' }, stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => out, exited };
}

export async function waitForOutput(run: Run, text: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void run.exited.then(() => (exited = true));
  while (!run.output().includes(text)) {
    if (exited || Date.now() > deadline) throw new Error(`no "${text}" in the output:\n${run.output()}`);
    await sleep(500);
  }
}

/** Polls `probe` every second until it returns a value `ok` accepts; fails naming what it last saw. */
export async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | string = '(nothing yet)';
  for (;;) {
    try {
      const v = await probe();
      if (ok(v)) return v;
      last = v;
    } catch (err) {
      last = `error: ${(err as Error).message}`;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting until ${what}; last seen: ${JSON.stringify(last)}`);
    await sleep(1000);
  }
}

/**
 * Replaces the seeded disk images of every node with sparse ones of `sizes` (bytes, one disk each), named
 * after their node (`<node>b<i>.img`): a report or a log names a disk no other node has.
 */
export function seedNodeUniqueDisks(dataDir: string, sizes: readonly number[]): void {
  for (const node of NODE_NAMES) {
    const short = node.slice(node.lastIndexOf('-') + 1);
    const dir = join(dataDir, 'nodes', short, 'node-disks-manager', 'disks');
    for (const f of readdirSync(dir)) if (f.endsWith('.img')) rmSync(join(dir, f));
    for (const [i, bytes] of sizes.entries()) {
      const file = join(dir, `${short}b${i + 1}.img`);
      writeFileSync(file, '');
      truncateSync(file, bytes);
    }
  }
}

/** `npm run cluster:ssh -- <node> <command…>`, as a person would type it. */
export function onNode(env: NodeJS.ProcessEnv, node: string, command: string[]): Promise<string> {
  return sh(process.execPath, [SSH, node, ...command], { env });
}

/** `npm run cluster:node -- <node> <action>` (hack/cluster/control.ts NODE_ACTIONS). */
export function nodeControl(env: NodeJS.ProcessEnv, node: string, action: NodeAction): Promise<string> {
  return sh(process.execPath, [NODE, node, action], { env, timeoutMs: 600_000 });
}

/** Ctrl-C to a test's cluster: it must exit 0, say it tore everything down, and leave the host as found. */
export async function interruptAndCheckTornDown(t: ExecutionContext, run: Run, before: Record<string, string>): Promise<void> {
  run.child.kill('SIGINT');
  t.is(await run.exited, 0);
  t.regex(run.output(), TORN_DOWN);
  await assertNothingLeft(t, before);
}

/** `dataDir`, when given, finds the loop devices of its node dirs by their files too (loops.ts). */
export async function assertNothingLeft(t: ExecutionContext, before: Record<string, string>, dataDir?: string): Promise<void> {
  t.deepEqual(await leftovers(before, dataDir), []);
  t.deepEqual(await readSysctls(), before);
  // A shim killed with its cluster lingers a moment as a zombie until its new parent reaps it: poll, and
  // fail only if a matching process is still there after a generous wait.
  // Only the containers' processes (/app/… in the image): other work on this machine may run the programs
  // as host processes (npm start, integration tests), which are not ours to judge.
  const ours = /^\/nodejs\/bin\/node \/app\/node-disks-(agent|operator)\.mjs|containerd-shim|^\/pause$/m;
  let ps = await sh('ps', ['-eo', 'args']);
  for (const deadline = Date.now() + 60_000; ours.test(ps) && Date.now() < deadline; ps = await sh('ps', ['-eo', 'args'])) {
    await sleep(1000);
  }
  t.notRegex(ps, ours);
}

/** Copies each node's pod logs into the data dir's logs, which the cluster's teardown keeps. */
export function collectPodLogs(dataDir: string): void {
  const nodes = join(dataDir, 'nodes');
  if (!existsSync(nodes)) return;
  for (const node of readdirSync(nodes)) {
    const pods = join(nodes, node, 'log-pods');
    if (existsSync(pods)) cpSync(pods, join(dataDir, 'logs', `pods-${node}`), { recursive: true, dereference: false });
  }
}

/** Moves a failed run's logs (`label`: the test file or bench) to a dir of their own in the temp dir and says where. */
export function keepLogs(dataDir: string, label: string): void {
  const logs = join(dataDir, 'logs');
  if (!existsSync(logs)) return;
  const kept = mkdtempSync(join(tmpdir(), `nodedisks-failed-${label}-`));
  renameSync(logs, join(kept, 'logs'));
  console.error(`the cluster's logs of this run are kept in ${kept}/logs (remove the dir when done)`);
}
