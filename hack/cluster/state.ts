// The record of everything a running local cluster changed on the host, written BEFORE each change, so
// that teardown (or the next start, after a crash) can undo exactly that and nothing else.

import { existsSync, readFileSync } from 'node:fs';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { deleteNetns, killAndRemoveCgroup, readSysctls, removeCreatedDirs, restoreSysctls, sh } from './host.ts';
import { describe, listLoops, loopsIn, mountsIn, releaseDevicesIn } from './loops.ts';

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

/** The nodes' own dirs: their disk images, which the CSI node plugin attaches to loop devices. */
export const nodesDir = (dataDir: string) => join(dataDir, 'nodes');

/**
 * Undoes everything the state records: every process in our cgroups (nodes first, then the control
 * plane), the cgroups, the network namespaces (their links go with them), the mounts and loop devices
 * of the node dirs, the directories we created, the kernel settings. Each step goes on when an earlier
 * one failed; returns what could not be undone.
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
  // After the processes: their mount namespaces are gone, so no mount holds a loop device open any more.
  let devicesReleased = true;
  await attempt('node devices', async () => {
    try {
      await releaseDevicesIn([nodesDir(state.dataDir)], log);
    } catch (err) {
      devicesReleased = false;
      throw err;
    }
  });
  await attempt('directories', () => removeCreatedDirs(state.createdDirs, log));
  await attempt('kernel settings', async () => {
    const changed = await restoreSysctls(state.sysctls);
    if (changed.length) log(`restored ${changed.join(', ')}`);
  });
  // Everything in the data dir but the logs (kept for a look after the fact): node dirs, etcd, images, pki.
  await attempt('data', async () => {
    for (const entry of await readdir(state.dataDir).catch(() => [] as string[])) {
      // The node dirs stay while a loop device is backed there: the next cleanup finds it by them.
      if (entry === 'nodes' && !devicesReleased) {
        log(`kept ${nodesDir(state.dataDir)}: loop devices are backed by files in it`);
        continue;
      }
      if (entry !== 'logs') await rm(join(state.dataDir, entry), { recursive: true, force: true });
    }
  });
  if (problems.length === 0) await rm(STATE_FILE, { force: true });
  return problems;
}

/**
 * What is left of a cluster on this host: namespaces, cgroups, mounts, loop devices, changed kernel
 * settings. Mounts and loop devices are found by name (a path with "nodedisks-cluster", the default data
 * dir's and the e2e tests' ones) and, given the data dir, by the node dirs' files (loops.ts).
 */
export async function leftovers(saved: Record<string, string>, dataDir?: string): Promise<string[]> {
  const left: string[] = [];
  const netns = (await sh('ip', ['netns', 'list'])).split('\n').filter((l) => l.startsWith('ndc-'));
  left.push(...netns.map((n) => `netns ${n}`));
  for (const h of await readdir('/sys/fs/cgroup')) {
    for (const d of await readdir(join('/sys/fs/cgroup', h)).catch(() => [] as string[])) if (d.startsWith('ndc-')) left.push(`cgroup ${h}/${d}`);
  }
  const mounts = (await readFile('/proc/self/mounts', 'utf8')).split('\n').filter((l) => l.includes('nodedisks-cluster') || l.includes('/run/netns/ndc-'));
  left.push(...mounts.map((m) => `mount ${m}`));
  const nodes = dataDir ? [nodesDir(dataDir)] : [];
  for (const m of await mountsIn(nodes)) if (!mounts.some((l) => l.split(' ')[1] === m)) left.push(`mount ${m}`);
  const loops = [...(await loopsIn(nodes)), ...(await listLoops()).filter((d) => d.backFile.includes('nodedisks-cluster'))];
  left.push(...[...new Map(loops.map((d) => [d.name, d])).values()].map((d) => `loop device ${describe(d)}`));
  const now = await readSysctls();
  for (const [k, v] of Object.entries(saved)) if (now[k] !== v) left.push(`${k.replaceAll('/', '.')} is ${now[k]}, was ${v}`);
  return left;
}
