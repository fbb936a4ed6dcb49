// The local cluster: a real Kubernetes (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// three kubelets with containerd and runc) on this machine, without Docker, VMs or any change to the
// host's own network. Design and every workaround: docs/adr/0016-local-cluster.md.
//
//   switch netns  ndc-sw: bridge ndcbr0 10.213.0.1/24; etcd, kube-apiserver (:6443), kcm, scheduler
//   node netns    ndc-m02..m04: eth0 10.213.0.12..14/24 (veth to the bridge); a holder process owns
//                 the node's mount namespace, where per-node dirs are bind-mounted over the paths the
//                 kubelet and containerd hard-code; containerd and kubelet run in both namespaces
//   host          a unix-socket relay: kubectl on the host talks to 127.0.0.1:<port>
// Every process goes into a cgroup we made (ndc-cp, ndc-m0N), so teardown ends them all, containers
// included, and only them.
//
// This file starts and supervises the processes and brings the cluster up in order; what it starts is
// described beside it: topology.ts (names, addresses, the per-node mounts), network.ts (namespaces,
// bridge, veths), pki.ts (certificates, kubeconfigs), controlplane-args.ts (the control plane's command
// lines), node-config.ts (containerd's and the kubelet's configuration), images.ts (the images).

import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { createConnection, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBinaries, ensureNodeBinaries, type ControlPlaneBinaries, type NodeBinaries } from '../controlplane/binaries.ts';
import { ensureCsiProvisioner } from '../csi/tools.ts';
import { ServerProcess } from '../lib/process.ts';
import { createCgroup, killCgroupProcesses, mkdirRecorded, readSysctls, restoreSysctls, sh, sleep } from './host.ts';
import { buildCsiImages, buildImages } from './images.ts';
import { holderCommand, SHARED_PATHS } from './holder.ts';
import { buildNetwork } from './network.ts';
import { apiserverArgs, controllerManagerArgs, etcdArgs, schedulerArgs } from './controlplane-args.ts';
import { releaseDevicesIn, unmountVolumesOf } from './loops.ts';
import { containerdConfig, kubeletConfig, podNetworkConfig } from './node-config.ts';
import { writeArchive } from './oci.ts';
import { makePki, writeKubeconfig } from './pki.ts';
import { splice } from './splice.ts';
import { processStart, saveState, type ClusterState } from './state.ts';
import { API_ADDRESS, API_PORT, CP_CGROUP, holderPid, KUBELET_PLUGIN_DIRS, NODE_MOUNTS, NODE_NAMES, type NodeSpec, nodeSpec, SWITCH_NS, systemCgroup } from './topology.ts';

const ENTER = fileURLToPath(new URL('./enter.sh', import.meta.url));
const RELAY = fileURLToPath(new URL('./relay.ts', import.meta.url));

export interface ClusterOptions {
  dataDir: string;
  log: (line: string) => void;
}

export class Cluster {
  readonly dataDir: string;
  readonly state: ClusterState;
  readonly nodes: NodeSpec[];
  private readonly log: (line: string) => void;
  private readonly procs: ServerProcess[] = [];
  private stopping = false;
  private relayServer: Server | undefined;
  private adminToken = '';
  cp!: ControlPlaneBinaries;
  nb!: NodeBinaries;
  /** The csi-provisioner binary its image is built from. */
  csiProvisioner = '';
  kubeconfig = '';
  server = '';
  figures: Record<string, string> = {};

  constructor(opts: ClusterOptions, sysctls: Record<string, string>) {
    this.dataDir = opts.dataDir;
    this.log = opts.log;
    this.state = { pid: process.pid, pidStart: processStart(process.pid) ?? '', dataDir: opts.dataDir, sysctls, netns: [], cgroups: [], createdDirs: [] };
    this.nodes = NODE_NAMES.map((n, i) => nodeSpec(opts.dataDir, n, i));
  }

  static async create(opts: ClusterOptions): Promise<Cluster> {
    const c = new Cluster(opts, await readSysctls());
    await mkdir(join(c.dataDir, 'logs'), { recursive: true });
    await saveState(c.state);
    return c;
  }

  private async record(change: (s: ClusterState) => void): Promise<void> {
    change(this.state);
    await saveState(this.state);
  }

  // ---- network ---------------------------------------------------------------------------------

  /** After Ctrl-C, nothing new may be made while teardown runs. */
  private checkNotStopping(): void {
    if (this.stopping) throw new Error('stopping');
  }

  private async addNetns(name: string): Promise<void> {
    this.checkNotStopping();
    await this.record((s) => s.netns.push(name));
    await sh('ip', ['netns', 'add', name]);
    await sh('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
  }

  async network(): Promise<void> {
    await buildNetwork(this.nodes, (name) => this.addNetns(name));
  }

  // ---- processes -------------------------------------------------------------------------------

  private async addCgroup(name: string): Promise<void> {
    this.checkNotStopping();
    await this.record((s) => s.cgroups.push(name));
    await createCgroup(name);
  }

  private start(name: string, cgroup: string, target: string, argv: string[], supervise = false): ServerProcess {
    this.checkNotStopping();
    const proc = new ServerProcess(name, join(this.dataDir, 'logs', `${name}.log`));
    const launch = () => proc.start(ENTER, [cgroup, target, ...argv]);
    launch();
    this.procs.push(proc);
    if (supervise) {
      // kube-controller-manager and kube-scheduler exit when the API server is away ~30 s; a real
      // cluster's kubelet restarts them, here we do.
      const watch = (): void => {
        void proc.whenExited().then(async (code) => {
          if (this.stopping) return;
          this.log(`${name} exited (${code}); restarting it`);
          await sleep(1000);
          if (this.stopping) return;
          launch();
          watch();
        });
      };
      watch();
    }
    return proc;
  }

  // ---- control plane ---------------------------------------------------------------------------

  async controlPlane(): Promise<void> {
    await mkdir(join(this.dataDir, 'logs'), { recursive: true });
    const { ca, dir } = await makePki(this.dataDir);
    this.adminToken = randomBytes(24).toString('hex');
    const lines = [`${this.adminToken},nodedisks-admin,uid-admin,"system:masters"`];
    const nodeTokens = new Map<string, string>();
    for (const n of this.nodes) {
      const t = randomBytes(24).toString('hex');
      nodeTokens.set(n.name, t);
      // A node's own identity, so the Node authorizer and NodeRestriction judge the kubelet as in production.
      lines.push(`${t},system:node:${n.name},uid-${n.name},"system:nodes"`);
    }
    await writeFile(join(dir, 'tokens.csv'), `${lines.join('\n')}\n`, { mode: 0o600 });
    const internal = await writeKubeconfig(join(dir, 'admin-internal.yaml'), `https://127.0.0.1:${API_PORT}`, ca, 'admin', this.adminToken);
    for (const n of this.nodes) {
      await writeKubeconfig(join(dir, `kubelet-${n.short}.yaml`), `https://${API_ADDRESS}:${API_PORT}`, ca, `system:node:${n.name}`, nodeTokens.get(n.name)!);
    }

    await this.addCgroup(CP_CGROUP);
    const sw = `netns:${SWITCH_NS}`;
    this.start('etcd', CP_CGROUP, sw, etcdArgs(this.cp.etcd, this.dataDir));
    this.start('kube-apiserver', CP_CGROUP, sw, apiserverArgs(this.cp.kubeApiserver, dir, ca));
    // The relay: host 127.0.0.1:<free port> -> unix socket -> (switch netns) 127.0.0.1:6443.
    const socket = join(this.dataDir, 'apiserver.sock');
    this.start('relay', CP_CGROUP, sw, [process.execPath, RELAY, socket, '127.0.0.1', String(API_PORT)]);
    this.relayServer = createServer((client) => splice(client, createConnection(socket)));
    const port = await new Promise<number>((resolve) => {
      this.relayServer!.listen(0, '127.0.0.1', () => resolve((this.relayServer!.address() as { port: number }).port));
    });
    this.server = `https://127.0.0.1:${port}`;
    this.kubeconfig = await writeKubeconfig(join(this.dataDir, 'kubeconfig'), this.server, ca, 'admin', this.adminToken);
    await this.until('the API server is ready', 120_000, async () => (await this.kubectl(['get', '--raw', '/readyz']).catch(() => '')) === 'ok');

    this.start('kube-controller-manager', CP_CGROUP, sw, controllerManagerArgs(this.nb.kubeControllerManager, internal, dir, ca), true);
    this.start('kube-scheduler', CP_CGROUP, sw, schedulerArgs(this.nb.kubeScheduler, internal), true);
  }

  async kubectl(args: string[], timeoutMs = 60_000): Promise<string> {
    return await sh(this.cp.kubectl, [`--kubeconfig=${this.kubeconfig}`, ...args], { timeoutMs });
  }

  /** Polls `ok` until it holds; `what` may be a function, to name in the error what was last seen. */
  async until(what: string | (() => string), timeoutMs: number, ok: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await ok())) {
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting until ${typeof what === 'string' ? what : what()}`);
      if (this.stopping) throw new Error('stopping');
      await sleep(500);
    }
  }

  // ---- nodes -----------------------------------------------------------------------------------

  async startNode(n: NodeSpec): Promise<void> {
    for (const sub of ['cni', 'volume-plugins', 'cert', ...NODE_MOUNTS.map(([, s]) => s), ...KUBELET_PLUGIN_DIRS]) await mkdir(join(n.dir, sub), { recursive: true });
    await mkdir(join(n.dir, 'node-disks-manager', 'disks'), { recursive: true });
    // Where a test names the node's stand-in drives (test/e2e/drives.test.ts): the nodes share /dev.
    await mkdir(join(n.dir, 'node-disks-manager', 'by-id'), { recursive: true });
    await writeFile(join(n.dir, 'cni', '10-nodedisks-pods.conflist'), podNetworkConfig(n));
    await writeFile(join(n.dir, 'containerd.toml'), containerdConfig(n));
    await writeFile(join(n.dir, 'kubelet.yaml'), kubeletConfig(n));
    for (const [host] of NODE_MOUNTS) {
      const created = await mkdirRecorded(host);
      if (created.length) await this.record((s) => s.createdDirs.push(...created));
    }
    await this.addCgroup(n.cgroup);
    // The node's daemons (containerd, its shims, the kubelet) in one group beside kubepods, as systemd puts
    // them in system.slice: as tasks of the node's own cgroup each thread would weigh as much as all the
    // pods together (cgroup v1), and the pods, our node side among them, would starve under load. Removed
    // with the node's cgroup, whose subtree teardown takes.
    await createCgroup(systemCgroup(n));
    // The holder: the node's mount namespace (private: nothing propagates to the host) with its own
    // dirs over the hard-coded paths, the kubelet's shared within it (holder.ts); every node process
    // enters it with nsenter.
    const pidFile = join(n.dir, 'holder.pid');
    const mounts = NODE_MOUNTS.map(([host, sub]): [string, string] => [host, join(n.dir, sub)]);
    this.start(`holder-${n.short}`, n.cgroup, `netns:${n.netns}`, holderCommand(mounts, SHARED_PATHS, pidFile));
    await this.until(`the holder of ${n.name} is up`, 20_000, async () => existsSync(pidFile));
    await this.startDaemons(n);
  }

  /** containerd, then the kubelet, of a node whose holder (its mount namespace) runs. */
  private async startDaemons(n: NodeSpec): Promise<void> {
    const target = `pid:${holderPid(n)}`;
    this.start(`containerd-${n.short}`, systemCgroup(n), target, ['containerd', '--config', join(n.dir, 'containerd.toml')]);
    const address = join(n.dir, 'run-containerd', 'containerd.sock');
    await this.until(
      `containerd of ${n.name} answers`,
      60_000,
      async () =>
        await sh('ctr', ['--address', address, 'version']).then(
          () => true,
          () => false,
        ),
    );
    this.runKubelet(n);
  }

  private runKubelet(n: NodeSpec): void {
    this.start(`kubelet-${n.short}`, systemCgroup(n), `pid:${holderPid(n)}`, [
      this.nb.kubelet,
      `--config=${join(n.dir, 'kubelet.yaml')}`,
      `--kubeconfig=${join(this.dataDir, 'pki', `kubelet-${n.short}.yaml`)}`,
      `--hostname-override=${n.name}`,
      `--node-ip=${n.ip}`,
      `--cert-dir=${join(n.dir, 'cert')}`,
      '--v=1',
    ]);
  }

  private node(name: string): NodeSpec {
    const n = this.nodes.find((x) => x.name === name || x.short === name);
    if (!n) throw new Error(`no node ${name} in the local cluster; the nodes are ${NODE_NAMES.join(', ')}`);
    return n;
  }

  /**
   * "Power off" one node, keeping its disks: its kubelet and containerd stop, then every other process
   * of the node (shims, containers) is killed, as a reboot would. The holder stays: it is the machine's
   * file system view (its disk dir), not a process the node runs.
   */
  async stopNode(name: string): Promise<void> {
    const n = this.node(name);
    for (const prefix of ['kubelet', 'containerd']) {
      const proc = this.procs.find((p) => p.name === `${prefix}-${n.short}` && p.running);
      await proc?.stop(10_000);
    }
    const holder = holderPid(n);
    await killCgroupProcesses(n.cgroup, (pid) => pid !== holder);
    // What a reboot takes with it besides the processes: the volumes' mounts in the node's namespace (the
    // kubelet's staging and publish dirs) and the loop devices of its disks, the kubelet's among them.
    const unmounted = await unmountVolumesOf(holder);
    await releaseDevicesIn([join(n.dir, 'node-disks-manager')], (line) => this.log(`node ${n.name}: ${line}`));
    this.log(`node ${n.name} stopped (kubelet, containerd and its containers${unmounted ? `, ${unmounted} volume mounts` : ''}, its loop devices)`);
  }

  /**
   * Stops one node's kubelet alone, as `systemctl stop kubelet` would: containerd, the containers and
   * every mount stay.
   */
  async stopKubelet(name: string): Promise<void> {
    const n = this.node(name);
    const proc = this.procs.find((p) => p.name === `kubelet-${n.short}` && p.running);
    if (!proc) throw new Error(`the kubelet of ${n.name} is not running`);
    await proc.stop(10_000);
    this.log(`the kubelet of ${n.name} stopped`);
  }

  /** Starts a node's kubelet stopped alone again; returns once it has renewed the Node's status. */
  async startKubelet(name: string): Promise<void> {
    const n = this.node(name);
    if (this.procs.some((p) => p.name === `kubelet-${n.short}` && p.running)) throw new Error(`the kubelet of ${n.name} is running`);
    const startedAt = Math.floor(Date.now() / 1000) * 1000;
    this.runKubelet(n);
    await this.until(`the kubelet of ${n.name} reports again`, 120_000, async () => {
      const hb = await this.kubectl(['get', 'node', n.name, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}']).catch(() => '');
      return Date.parse(hb) >= startedAt;
    });
    const changed = await restoreSysctls(this.state.sysctls);
    if (changed.length) this.log(`restored kernel settings the kubelet changed: ${changed.join(', ')}`);
    this.log(`the kubelet of ${n.name} started`);
  }

  /** Restarts one node's kubelet alone, as `systemctl restart kubelet` would. */
  async restartKubelet(name: string): Promise<void> {
    await this.stopKubelet(name);
    await this.startKubelet(name);
  }

  /** Starts a stopped node's containerd and kubelet again; returns once the Node is Ready. */
  async startStoppedNode(name: string): Promise<void> {
    const n = this.node(name);
    if (this.procs.some((p) => (p.name === `kubelet-${n.short}` || p.name === `containerd-${n.short}`) && p.running)) {
      throw new Error(`node ${n.name} is running; stop it first`);
    }
    const t0 = Date.now();
    await this.startDaemons(n);
    let seen = 'no Node yet';
    await this.until(
      () => `${n.name} is Ready again (last seen: ${seen})`,
      300_000,
      async () => {
        const c = '.status.conditions[?(@.type=="Ready")]';
        const out = await this.kubectl(['get', 'node', n.name, '-o', `jsonpath={${c}.status} {${c}.reason}: {${c}.message}`]).catch(() => '');
        if (out) seen = out;
        return out.startsWith('True ');
      },
    );
    // The kubelet set kernel.panic & co. again when it started.
    const changed = await restoreSysctls(this.state.sysctls);
    if (changed.length) this.log(`restored kernel settings the kubelet changed: ${changed.join(', ')}`);
    this.log(`node ${n.name} Ready again ${((Date.now() - t0) / 1000).toFixed(1)} s after its start`);
  }

  async importImages(files: string[]): Promise<void> {
    await Promise.all(
      this.nodes.map(async (n) => {
        for (const f of files) await sh('ctr', ['--address', join(n.dir, 'run-containerd', 'containerd.sock'), '-n', 'k8s.io', 'images', 'import', '--no-unpack', f], { timeoutMs: 300_000 });
      }),
    );
  }

  async readyNodes(): Promise<number> {
    const out = await this.kubectl(['get', 'nodes', '-o', 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}']).catch(() => '');
    return out.split('\n').filter((s) => s === 'True').length;
  }

  /** name@digest of each image the last build wrote. */
  private lastImages: string[] = [];

  /** Builds the images into files (their buffers, large, are garbage once this returns). */
  private async writeImages(): Promise<string[]> {
    const imageDir = join(this.dataDir, 'images');
    await mkdir(imageDir, { recursive: true });
    const files: string[] = [];
    this.lastImages = [];
    // Two batches, so that only one batch's buffers are held at a time.
    for (const batch of [() => buildImages(this.nb.pause), () => buildCsiImages(this.csiProvisioner)]) {
      for (const img of await batch()) {
        const f = join(imageDir, `${img.name.replace(/[/:]/g, '_')}.tar`);
        await writeArchive(img, f);
        files.push(f);
        this.lastImages.push(`${img.name}@${img.digest}`);
        this.log(`image ${img.name} ${img.digest} (${(img.layerBytes / 1024 / 1024).toFixed(1)} MiB uncompressed)`);
      }
    }
    return files;
  }

  /**
   * Builds the images again (from dist/ as it is now) and imports them into every node under the same
   * names: what `make images-load` does for this cluster. Pods already running keep their old image
   * until they are restarted. Returns one line per image.
   */
  async reloadImages(): Promise<string> {
    const files = await this.writeImages();
    await this.importImages(files);
    return this.lastImages.join(', ');
  }

  /** Brings the whole cluster up. */
  async up(): Promise<void> {
    const t0 = Date.now();
    [this.cp, this.nb] = [await ensureBinaries(this.log), await ensureNodeBinaries(this.log)];
    this.csiProvisioner = await ensureCsiProvisioner(this.log);
    await this.network();
    const files = await this.writeImages();
    const tcp = Date.now();
    await this.controlPlane();
    this.figures.controlPlaneSeconds = ((Date.now() - tcp) / 1000).toFixed(1);
    const tn = Date.now();
    for (const n of this.nodes) await this.startNode(n);
    await this.importImages(files);
    await this.until('3 nodes are Ready', 180_000, async () => (await this.readyNodes()) === 3);
    this.figures.nodesReadySeconds = ((Date.now() - tn) / 1000).toFixed(1);
    // The kubelet set kernel.panic & co. at start: put them back now that it no longer needs to.
    const changed = await restoreSysctls(this.state.sysctls);
    if (changed.length) this.log(`restored kernel settings the kubelet changed: ${changed.join(', ')}`);
    this.figures.totalSeconds = ((Date.now() - t0) / 1000).toFixed(1);
  }

  /** Stops our processes (the caller then runs state.undo for everything else). */
  async stopProcesses(): Promise<void> {
    this.stopping = true;
    this.relayServer?.close();
    // kubelets first (they would restart containers), then containerd, then the control plane.
    const order = (p: ServerProcess) => (p.name.startsWith('kubelet') ? 0 : p.name.startsWith('containerd') ? 1 : p.name.startsWith('holder') ? 2 : 3);
    const sorted = [...this.procs].sort((a, b) => order(a) - order(b));
    for (const p of sorted) await p.stop(5_000).catch(() => {});
  }
}
