// Runs the real agent and controller as separate processes against a ControlPlane, each with its own
// identity (kubeconfig), as they run in a cluster. Used by the flow tests and by the demo (`npm start`).
import { mkdir, open, readFile, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { DEFAULT_DISK_DIR } from '../../api/constants.ts';
import { REPO_ROOT } from './paths.ts';
import { ServerProcess } from './process.ts';
import type { ControlPlane, Identity } from '../controlplane/controlplane.ts';

export const AGENT_MAIN = join(REPO_ROOT, 'agent/main.ts');
export const CONTROLLER_MAIN = join(REPO_ROOT, 'controller/main.ts');
export const CSI_MAIN = join(REPO_ROOT, 'csi/main.ts');

export class Program extends ServerProcess {
  readonly args: string[];
  private readonly main: string;
  constructor(name: string, logFile: string, main: string, args: string[]) {
    super(name, logFile);
    this.main = main;
    this.args = args;
  }
  launch(): this {
    this.start(process.execPath, [this.main, ...this.args]);
    return this;
  }
  /** The program's own process (it runs under lifeline.sh: one of lifeline's children, not the wrapper). */
  async programPid(): Promise<number | undefined> {
    const pid = this.pid;
    if (pid === undefined) return undefined;
    const children = (await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8').catch(() => '')).trim().split(/\s+/).filter(Boolean);
    for (const child of children) {
      const cmdline = await readFile(`/proc/${child}/cmdline`, 'utf8').catch(() => '');
      if (cmdline.includes(this.main)) return Number(child);
    }
    return undefined;
  }
  /** Sends a signal to the program itself (SIGSTOP/SIGCONT pause and resume it as a frozen VM or a GC pause would). */
  async signal(sig: NodeJS.Signals): Promise<void> {
    const pid = await this.programPid();
    if (pid === undefined) throw new Error(`${this.name} is not running`);
    process.kill(pid, sig);
  }
  /** SIGKILL: a crash, with no chance to clean up. */
  async crash(): Promise<number | null> {
    const pid = await this.programPid();
    if (pid !== undefined) process.kill(pid, 'SIGKILL');
    return await this.whenExited();
  }
}

/** Seeds `count` sparse disk images of `sizeBytes` (disk1.img …). */
export async function seedDisks(diskDir: string, count: number, sizeBytes: number): Promise<void> {
  await mkdir(diskDir, { recursive: true });
  for (let i = 1; i <= count; i++) {
    const file = join(diskDir, `disk${i}.img`);
    const fh = await open(file, 'a');
    await fh.close();
    await truncate(file, sizeBytes);
  }
}

export interface AgentLaunch {
  node: string;
  /** The directory the agent scans: this machine's stand-in for the node's disk dir. */
  diskDir: string;
  /**
   * The node's disk dir as the install configures it, written to spec.path (--host-disk-dir). The
   * admission policy admits only NodeDisks in the install's disk dir, as the DaemonSet mounts it: by default
   * DEFAULT_DISK_DIR, which the policies of kustomize/ name.
   */
  hostDiskDir?: string;
  logDir: string;
  heartbeat?: string;
  rescanInterval?: string;
  extraArgs?: string[];
  /** The agent's identity, if not the node's first (ControlPlane.agentOfMachine: a machine registered again). */
  identity?: Identity;
  /** The program's name in logs (default agent-<node>). */
  name?: string;
}

export async function startAgent(cp: ControlPlane, o: AgentLaunch): Promise<Program> {
  const identity = o.identity ?? (await cp.agent(o.node));
  await mkdir(o.logDir, { recursive: true });
  const name = o.name ?? `agent-${o.node}`;
  return new Program(name, join(o.logDir, `${name}.log`), AGENT_MAIN, [
    `--kubeconfig=${identity.kubeconfig}`,
    `--node-name=${o.node}`,
    `--disk-dir=${o.diskDir}`,
    `--host-disk-dir=${o.hostDiskDir ?? DEFAULT_DISK_DIR}`,
    '--http-address=127.0.0.1:0',
    `--heartbeat=${o.heartbeat ?? '60s'}`,
    `--rescan-interval=${o.rescanInterval ?? '60s'}`,
    ...(o.extraArgs ?? []),
  ]).launch();
}

export interface ControllerLaunch {
  logDir: string;
  identity?: string;
  /** Another kubeconfig of the controller's identity (one that points at a proxy, say). */
  kubeconfig?: string;
  extraArgs?: string[];
  /**
   * Watch Nodes (--node-lifecycle, ADR 35). Off unless asked for: most tests make NodeDisks of nodes that
   * have no Node object, which the lifecycle would judge gone. The demo's agents make their Nodes.
   */
  nodeLifecycle?: boolean;
}

export async function startController(cp: ControlPlane, o: ControllerLaunch): Promise<Program> {
  const identity = await cp.controller();
  await mkdir(o.logDir, { recursive: true });
  const id = o.identity ?? 'controller-0';
  return new Program(id, join(o.logDir, `${id}.log`), CONTROLLER_MAIN, [
    `--kubeconfig=${o.kubeconfig ?? identity.kubeconfig}`,
    '--http-address=127.0.0.1:0',
    `--identity=${id}`,
    `--node-lifecycle=${o.nodeLifecycle === true}`,
    ...(o.extraArgs ?? []),
  ]).launch();
}

/** The CSI driver's controller side, serving on the unix socket `csiAddress` with its own identity. */
export async function startCsiController(cp: ControlPlane, o: { logDir: string; csiAddress: string; name?: string; extraArgs?: string[] }): Promise<Program> {
  const identity = await cp.csiController();
  await mkdir(o.logDir, { recursive: true });
  const name = o.name ?? 'csi-controller';
  return new Program(name, join(o.logDir, `${name}.log`), CSI_MAIN, [
    'controller',
    `--kubeconfig=${identity.kubeconfig}`,
    `--csi-address=${o.csiAddress}`,
    '--http-address=127.0.0.1:0',
    `--identity=${name}`,
    ...(o.extraArgs ?? []),
  ]).launch();
}

/**
 * The CSI driver's node side for `node` (root: loop devices and mounts), serving on `csiAddress`; with no
 * registrationDir it registers with no kubelet (the caller dials the socket itself).
 */
export function startCsiNode(o: { logDir: string; csiAddress: string; node: string; diskDir: string; registrationDir?: string; name?: string; extraArgs?: string[] }): Program {
  const name = o.name ?? `csi-node-${o.node}`;
  return new Program(name, join(o.logDir, `${name}.log`), CSI_MAIN, [
    'node',
    `--csi-address=${o.csiAddress}`,
    `--registration-dir=${o.registrationDir ?? ''}`,
    `--node-name=${o.node}`,
    `--disk-dir=${o.diskDir}`,
    '--http-address=127.0.0.1:0',
    ...(o.extraArgs ?? []),
  ]).launch();
}
