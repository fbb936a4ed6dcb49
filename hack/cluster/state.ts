// The record of everything a running local cluster changed on the host, written BEFORE each change, so
// that teardown (or the next start, after a crash) can undo exactly that and nothing else.

import { existsSync, readFileSync } from 'node:fs';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { deleteNetns, killAndRemoveCgroup, readSysctls, removeCreatedDirs, restoreSysctls, sh } from './host.ts';

/** Fixed: there is one local cluster per machine (its namespace and cgroup names are fixed). */
export const STATE_FILE = '/run/nodedisks-cluster.json';

export interface ClusterState {
  /** The `npm run cluster` process. */
  pid: number;
  /** Its start time (field 22 of /proc/<pid>/stat), so a reused PID is not taken for it. */
  pidStart: string;
  dataDir: string;
  /** Kernel settings as found, restored as soon as the nodes are Ready and again at teardown. */
  sysctls: Record<string, string>;
  netns: string[];
  cgroups: string[];
  createdDirs: string[];
}

export function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

export function readState(): ClusterState | undefined {
  if (!existsSync(STATE_FILE)) return undefined;
  return JSON.parse(readFileSync(STATE_FILE, 'utf8')) as ClusterState;
}

export async function saveState(state: ClusterState): Promise<void> {
  await writeFile(STATE_FILE, `${JSON.stringify(state, null, 2)}\n`);
}

/** True when the recorded cluster process is still running. */
export function isAlive(state: ClusterState): boolean {
  return processStart(state.pid) === state.pidStart;
}

/**
 * Undoes everything the state records: every process in our cgroups (nodes first, then the control
 * plane), the cgroups, the network namespaces (their links go with them), the directories we created,
 * the kernel settings. Each step goes on when an earlier one failed; returns what could not be undone.
 */
export async function undo(state: ClusterState, log: (line: string) => void): Promise<string[]> {
  const problems: string[] = [];
  const attempt = async (what: string, fn: () => Promise<void>) => {
    try {
      await fn();
    } catch (err) {
      problems.push(`${what}: ${(err as Error).message}`);
    }
  };
  for (const cg of [...state.cgroups].reverse()) await attempt(`cgroup /${cg}`, () => killAndRemoveCgroup(cg, log));
  for (const ns of [...state.netns].reverse()) await attempt(`netns ${ns}`, () => deleteNetns(ns));
  await attempt('directories', () => removeCreatedDirs(state.createdDirs, log));
  await attempt('kernel settings', async () => {
    const changed = await restoreSysctls(state.sysctls);
    if (changed.length) log(`restored ${changed.join(', ')}`);
  });
  // Everything in the data dir but the logs (kept for a look after the fact): node dirs, etcd, images, pki.
  await attempt('data', async () => {
    for (const entry of await readdir(state.dataDir).catch(() => [] as string[])) {
      if (entry !== 'logs') await rm(join(state.dataDir, entry), { recursive: true, force: true });
    }
  });
  if (problems.length === 0) await rm(STATE_FILE, { force: true });
  return problems;
}

/** What is left of a cluster on this host: namespaces, cgroups, mounts, changed kernel settings. */
export async function leftovers(saved: Record<string, string>): Promise<string[]> {
  const left: string[] = [];
  const netns = (await sh('ip', ['netns', 'list'])).split('\n').filter((l) => l.startsWith('ndc-'));
  left.push(...netns.map((n) => `netns ${n}`));
  for (const h of await readdir('/sys/fs/cgroup')) {
    for (const d of await readdir(join('/sys/fs/cgroup', h)).catch(() => [] as string[])) if (d.startsWith('ndc-')) left.push(`cgroup ${h}/${d}`);
  }
  const mounts = (await readFile('/proc/self/mounts', 'utf8')).split('\n').filter((l) => l.includes('nodedisks-cluster') || l.includes('/run/netns/ndc-'));
  left.push(...mounts.map((m) => `mount ${m}`));
  const now = await readSysctls();
  for (const [k, v] of Object.entries(saved)) if (now[k] !== v) left.push(`${k.replaceAll('/', '.')} is ${now[k]}, was ${v}`);
  return left;
}
