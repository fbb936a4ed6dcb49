// What the local cluster changes on the host, each with its undo: kernel settings the kubelet writes,
// network namespaces, cgroups, and mount-point directories. Every undo is idempotent and safe to run
// after a crash, from the state file alone (see state.ts). Nothing here touches the host's own network
// namespace, routes, iptables or cgroup mounts: links are created with `ip -n <our netns>`.

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs a command, returns stdout; the error names the command and carries its stderr. */
export async function sh(cmd: string, args: string[], opts: { timeoutMs?: number; env?: NodeJS.ProcessEnv } = {}): Promise<string> {
  try {
    const { stdout } = await execFileP(cmd, args, { timeout: opts.timeoutMs ?? 60_000, maxBuffer: 64 * 1024 * 1024, env: opts.env ?? process.env });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(' ')} failed: ${(e.stderr ?? '').trim() || e.message}`, { cause: err });
  }
}

// ---- kernel settings ----------------------------------------------------------------------------
// The kubelet writes these at start (container_manager_linux.go setupKernelTunables) and refuses to
// start with protectKernelDefaults when they differ; they are global, not per network namespace.
export const KUBELET_SYSCTLS = ['kernel/panic', 'kernel/panic_on_oops', 'vm/overcommit_memory', 'vm/panic_on_oom', 'kernel/keys/root_maxkeys', 'kernel/keys/root_maxbytes'] as const;

export async function readSysctls(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const key of KUBELET_SYSCTLS) out[key] = (await readFile(`/proc/sys/${key}`, 'utf8')).trim();
  return out;
}

/** Writes back the saved values where they differ; returns what it changed ("key: now -> saved"). */
export async function restoreSysctls(saved: Record<string, string>): Promise<string[]> {
  const changed: string[] = [];
  for (const [key, value] of Object.entries(saved)) {
    const now = (await readFile(`/proc/sys/${key}`, 'utf8')).trim();
    if (now !== value) {
      await writeFile(`/proc/sys/${key}`, value);
      changed.push(`${key.replaceAll('/', '.')}: ${now} -> ${value}`);
    }
  }
  return changed;
}

// ---- network namespaces -------------------------------------------------------------------------

export async function netnsExists(name: string): Promise<boolean> {
  return existsSync(`/run/netns/${name}`);
}

/** Deletes a network namespace we made; its links (veths, the bridge) go with it. */
export async function deleteNetns(name: string): Promise<void> {
  if (await netnsExists(name)) await sh('ip', ['netns', 'delete', name]);
}

// ---- cgroups (v1 hierarchies, and the v2 "unified" one of a hybrid host) --------------------------

const CGROUP_FS = '/sys/fs/cgroup';

async function hierarchies(): Promise<string[]> {
  const entries = await readdir(CGROUP_FS, { withFileTypes: true });
  return entries.filter((e) => e.isDirectory()).map((e) => join(CGROUP_FS, e.name));
}

/** Creates /<name> in every hierarchy; cpuset needs its cpus and mems copied from the parent first. */
export async function createCgroup(name: string): Promise<void> {
  for (const h of await hierarchies()) {
    const dir = join(h, name);
    await mkdir(dir, { recursive: true });
    if (h.endsWith('/cpuset')) {
      for (const f of ['cpuset.cpus', 'cpuset.mems']) {
        if ((await readFile(join(dir, f), 'utf8')).trim() === '') await writeFile(join(dir, f), await readFile(join(h, f), 'utf8'));
      }
    }
  }
}

async function subtree(dir: string): Promise<string[]> {
  if (!existsSync(dir)) return [];
  const out = [dir];
  for (const e of await readdir(dir, { withFileTypes: true })) if (e.isDirectory()) out.push(...(await subtree(join(dir, e.name))));
  return out;
}

async function pidsIn(name: string): Promise<number[]> {
  const pids = new Set<number>();
  for (const h of await hierarchies()) {
    for (const dir of await subtree(join(h, name))) {
      const text = await readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => '');
      for (const line of text.split('\n')) if (line.trim()) pids.add(Number(line));
    }
  }
  return [...pids];
}

/**
 * SIGKILLs the processes in cgroup /<name> and its subtree that `which` selects (all, by default) until
 * none is left: all of them descend from processes the cluster started and moved there (containerd, its
 * shims, containers, kubelet).
 */
export async function killCgroupProcesses(name: string, which: (pid: number) => boolean = () => true): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (let pids = (await pidsIn(name)).filter(which); pids.length > 0; pids = (await pidsIn(name)).filter(which)) {
    if (Date.now() > deadline) throw new Error(`processes ${pids.join(' ')} in cgroup /${name} did not end`);
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await sleep(200);
  }
}

/** Ends every process in cgroup /<name>, then removes the cgroup tree, deepest first. */
export async function killAndRemoveCgroup(name: string, log: (line: string) => void): Promise<void> {
  await killCgroupProcesses(name);
  for (const h of await hierarchies()) {
    for (const dir of (await subtree(join(h, name))).reverse()) {
      for (let i = 0; ; i++) {
        try {
          await rmdir(dir);
          break;
        } catch (err) {
          // A cgroup whose last task just died is briefly busy.
          if (i > 50 || (err as NodeJS.ErrnoException).code === 'ENOENT') {
            if ((err as NodeJS.ErrnoException).code !== 'ENOENT') log(`could not remove cgroup ${dir}: ${(err as Error).message}`);
            break;
          }
          await sleep(100);
        }
      }
    }
  }
}

// ---- directories ---------------------------------------------------------------------------------

/** mkdir -p that returns the directories it created, outermost first, so teardown can remove exactly those. */
export async function mkdirRecorded(path: string): Promise<string[]> {
  const created: string[] = [];
  const parts = path.split('/').filter(Boolean);
  let cur = '';
  for (const p of parts) {
    cur += `/${p}`;
    if (!existsSync(cur)) {
      await mkdir(cur);
      created.push(cur);
    }
  }
  return created;
}

/** Removes directories we created, innermost first, only when empty (never a host file). */
export async function removeCreatedDirs(dirs: string[], log: (line: string) => void): Promise<void> {
  for (const d of [...dirs].sort((a, b) => b.length - a.length)) {
    try {
      await rmdir(d);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT') log(`left ${d}: ${code === 'ENOTEMPTY' ? 'not empty' : (err as Error).message}`);
    }
  }
}
