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

import { randomBytes, generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { createConnection, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { dump } from 'js-yaml';
import { ensureBinaries, ensureNodeBinaries, type ControlPlaneBinaries, type NodeBinaries } from '../controlplane/binaries.ts';
import { ServerProcess } from '../lib/process.ts';
import { createCgroup, killCgroupProcesses, mkdirRecorded, readSysctls, restoreSysctls, sh, sleep } from './host.ts';
import { buildImages } from './images.ts';
import { writeArchive } from './oci.ts';
import { splice } from './splice.ts';
import { processStart, saveState, type ClusterState } from './state.ts';

const ENTER = fileURLToPath(new URL('./enter.sh', import.meta.url));
const RELAY = fileURLToPath(new URL('./relay.ts', import.meta.url));

export const SWITCH_NS = 'ndc-sw';
export const BRIDGE = 'ndcbr0';
export const SUBNET_PREFIX = '10.213.0';
export const API_ADDRESS = `${SUBNET_PREFIX}.1`;
export const API_PORT = 6443;
export const CP_CGROUP = 'ndc-cp';
export const NODE_NAMES = ['node-disks-dev-m02', 'node-disks-dev-m03', 'node-disks-dev-m04'];
export const DISK_DIR = '/var/lib/node-disks-manager/disks';

export interface NodeSpec {
  name: string;
  short: string; // m02
  netns: string; // ndc-m02
  cgroup: string; // ndc-m02
  ip: string;
  dir: string;
}

export function nodeSpec(dataDir: string, name: string, index: number): NodeSpec {
  const short = name.slice(name.lastIndexOf('-') + 1);
  return { name, short, netns: `ndc-${short}`, cgroup: `ndc-${short}`, ip: `${SUBNET_PREFIX}.${12 + index}`, dir: join(dataDir, 'nodes', short) };
}

/**
 * The host paths the kubelet and containerd use that cannot be configured away, and what each node
 * sees there instead (a dir of its own, bind-mounted in its mount namespace).
 */
export const NODE_MOUNTS: [hostPath: string, nodeSubdir: string][] = [
  ['/var/lib/kubelet', 'kubelet'],
  ['/var/lib/containerd', 'containerd'],
  ['/run/containerd', 'run-containerd'],
  ['/var/log/containers', 'log-containers'],
  ['/var/log/pods', 'log-pods'],
  ['/var/lib/node-disks-manager', 'node-disks-manager'],
];

export function holderPid(node: NodeSpec): number {
  return Number(readFileSync(join(node.dir, 'holder.pid'), 'utf8').trim());
}

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
    await this.addNetns(SWITCH_NS);
    await sh('ip', ['-n', SWITCH_NS, 'link', 'add', BRIDGE, 'type', 'bridge']);
    await sh('ip', ['-n', SWITCH_NS, 'addr', 'add', `${API_ADDRESS}/24`, 'dev', BRIDGE]);
    await sh('ip', ['-n', SWITCH_NS, 'link', 'set', BRIDGE, 'up']);
    for (const n of this.nodes) {
      await this.addNetns(n.netns);
      const veth = `ndcv-${n.short}`;
      // Both ends are created in our namespaces (-n): the host's namespace never sees a link.
      await sh('ip', ['-n', SWITCH_NS, 'link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', n.netns]);
      await sh('ip', ['-n', SWITCH_NS, 'link', 'set', veth, 'master', BRIDGE, 'up']);
      await sh('ip', ['-n', n.netns, 'addr', 'add', `${n.ip}/24`, 'dev', 'eth0']);
      await sh('ip', ['-n', n.netns, 'link', 'set', 'eth0', 'up']);
      await sh('ip', ['-n', n.netns, 'route', 'add', 'default', 'via', API_ADDRESS]);
    }
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

  private async pki(): Promise<{ ca: string; dir: string }> {
    const dir = join(this.dataDir, 'pki');
    await mkdir(dir, { recursive: true });
    const ca = join(dir, 'ca.crt');
    if (!existsSync(ca)) {
      await sh('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'ca.key'), '-out', ca, '-days', '3650', '-subj', '/CN=nodedisks-local-cluster-ca']);
    }
    const ext = join(dir, 'apiserver.ext');
    await writeFile(
      ext,
      `subjectAltName=IP:127.0.0.1,IP:${API_ADDRESS},IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n` +
        'extendedKeyUsage=serverAuth\n',
    );
    await sh('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'apiserver.key'), '-out', join(dir, 'apiserver.csr'), '-subj', '/CN=kube-apiserver']);
    await sh('openssl', [
      'x509',
      '-req',
      '-in',
      join(dir, 'apiserver.csr'),
      '-CA',
      ca,
      '-CAkey',
      join(dir, 'ca.key'),
      '-CAcreateserial',
      '-out',
      join(dir, 'apiserver.crt'),
      '-days',
      '3650',
      '-extfile',
      ext,
    ]);
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    await writeFile(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    await writeFile(join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
    return { ca, dir };
  }

  private async writeKubeconfig(file: string, server: string, ca: string, user: string, token: string): Promise<string> {
    const cfg = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'nodedisks-local', cluster: { server, 'certificate-authority': ca } }],
      users: [{ name: user, user: { token } }],
      contexts: [{ name: 'nodedisks-local', context: { cluster: 'nodedisks-local', user } }],
      'current-context': 'nodedisks-local',
    };
    await writeFile(file, dump(cfg), { mode: 0o600 });
    return file;
  }

  async controlPlane(): Promise<void> {
    await mkdir(join(this.dataDir, 'logs'), { recursive: true });
    const { ca, dir } = await this.pki();
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
    const internal = await this.writeKubeconfig(join(dir, 'admin-internal.yaml'), `https://127.0.0.1:${API_PORT}`, ca, 'admin', this.adminToken);
    for (const n of this.nodes) {
      await this.writeKubeconfig(join(dir, `kubelet-${n.short}.yaml`), `https://${API_ADDRESS}:${API_PORT}`, ca, `system:node:${n.name}`, nodeTokens.get(n.name)!);
    }

    await this.addCgroup(CP_CGROUP);
    const sw = `netns:${SWITCH_NS}`;
    this.start('etcd', CP_CGROUP, sw, [
      this.cp.etcd,
      '--name=default',
      `--data-dir=${join(this.dataDir, 'etcd')}`,
      '--listen-client-urls=http://127.0.0.1:2379',
      '--advertise-client-urls=http://127.0.0.1:2379',
      '--listen-peer-urls=http://127.0.0.1:2380',
      '--initial-advertise-peer-urls=http://127.0.0.1:2380',
      '--initial-cluster=default=http://127.0.0.1:2380',
      '--unsafe-no-fsync=true',
      '--log-level=warn',
    ]);
    this.start('kube-apiserver', CP_CGROUP, sw, [
      this.cp.kubeApiserver,
      '--etcd-servers=http://127.0.0.1:2379',
      '--bind-address=0.0.0.0',
      `--advertise-address=${API_ADDRESS}`,
      `--secure-port=${API_PORT}`,
      `--tls-cert-file=${join(dir, 'apiserver.crt')}`,
      `--tls-private-key-file=${join(dir, 'apiserver.key')}`,
      `--client-ca-file=${ca}`,
      `--token-auth-file=${join(dir, 'tokens.csv')}`,
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NodeRestriction',
      '--service-account-issuer=https://kubernetes.default.svc',
      `--service-account-key-file=${join(dir, 'sa.pub')}`,
      `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
      '--service-cluster-ip-range=10.0.0.0/24',
      '--allow-privileged=true',
      // The kubelets' hostnames resolve nowhere: reach them by their InternalIP (kubectl logs/exec).
      '--kubelet-preferred-address-types=InternalIP',
    ]);
    // The relay: host 127.0.0.1:<free port> -> unix socket -> (switch netns) 127.0.0.1:6443.
    const socket = join(this.dataDir, 'apiserver.sock');
    this.start('relay', CP_CGROUP, sw, [process.execPath, RELAY, socket, '127.0.0.1', String(API_PORT)]);
    this.relayServer = createServer((client) => splice(client, createConnection(socket)));
    const port = await new Promise<number>((resolve) => {
      this.relayServer!.listen(0, '127.0.0.1', () => resolve((this.relayServer!.address() as { port: number }).port));
    });
    this.server = `https://127.0.0.1:${port}`;
    this.kubeconfig = await this.writeKubeconfig(join(this.dataDir, 'kubeconfig'), this.server, ca, 'admin', this.adminToken);
    await this.until('the API server is ready', 120_000, async () => (await this.kubectl(['get', '--raw', '/readyz']).catch(() => '')) === 'ok');

    this.start(
      'kube-controller-manager',
      CP_CGROUP,
      sw,
      [
        this.nb.kubeControllerManager,
        `--kubeconfig=${internal}`,
        `--root-ca-file=${ca}`,
        `--service-account-private-key-file=${join(dir, 'sa.key')}`,
        '--leader-elect=false',
        '--bind-address=127.0.0.1',
      ],
      true,
    );
    this.start('kube-scheduler', CP_CGROUP, sw, [this.nb.kubeScheduler, `--kubeconfig=${internal}`, '--leader-elect=false', '--bind-address=127.0.0.1'], true);
  }

  async kubectl(args: string[], timeoutMs = 60_000): Promise<string> {
    return await sh(this.cp.kubectl, [`--kubeconfig=${this.kubeconfig}`, ...args], { timeoutMs });
  }

  async until(what: string, timeoutMs: number, ok: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await ok())) {
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting until ${what}`);
      if (this.stopping) throw new Error('stopping');
      await sleep(500);
    }
  }

  // ---- nodes -----------------------------------------------------------------------------------

  private containerdConfig(n: NodeSpec): string {
    return `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/nodedisks-pause:1"
  # runc cannot write oom_score_adj below its parent's without CAP_SYS_RESOURCE, which root lacks here
  # ("can't get final child's PID from pipe: EOF"): keep the container's score at least the parent's.
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${join(n.dir, 'cni')}"
`;
  }

  private kubeletConfig(n: NodeSpec): string {
    return dump({
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      // This machine has cgroup v1, which kubelet 1.35 refuses unless told.
      failCgroupV1: false,
      cgroupDriver: 'cgroupfs',
      // Each node its own cgroup subtree (ours), so three kubelets do not fight over /kubepods.
      cgroupRoot: `/${n.cgroup}`,
      address: n.ip,
      healthzBindAddress: '127.0.0.1',
      readOnlyPort: 0,
      // Reachable only inside the switch namespace: the API server (kubectl logs/exec) needs no client certificate.
      authentication: { anonymous: { enabled: true }, webhook: { enabled: false } },
      authorization: { mode: 'AlwaysAllow' },
      containerRuntimeEndpoint: 'unix:///run/containerd/containerd.sock',
      volumePluginDir: join(n.dir, 'volume-plugins'),
      failSwapOn: false,
      makeIPTablesUtilChains: false,
      protectKernelDefaults: false,
      // A shared dev machine's disk is often fuller than eviction's defaults allow.
      evictionHard: { 'memory.available': '50Mi', 'nodefs.available': '1%', 'imagefs.available': '1%', 'nodefs.inodesFree': '1%' },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      resolvConf: '/etc/resolv.conf',
      serializeImagePulls: false,
      localStorageCapacityIsolation: true,
    });
  }

  async startNode(n: NodeSpec): Promise<void> {
    for (const sub of ['cni', 'volume-plugins', 'cert', ...NODE_MOUNTS.map(([, s]) => s)]) await mkdir(join(n.dir, sub), { recursive: true });
    await mkdir(join(n.dir, 'node-disks-manager', 'disks'), { recursive: true });
    await writeFile(join(n.dir, 'cni', '10-loopback.conflist'), JSON.stringify({ cniVersion: '1.0.0', name: 'loopback', plugins: [{ type: 'loopback' }] }));
    await writeFile(join(n.dir, 'containerd.toml'), this.containerdConfig(n));
    await writeFile(join(n.dir, 'kubelet.yaml'), this.kubeletConfig(n));
    for (const [host] of NODE_MOUNTS) {
      const created = await mkdirRecorded(host);
      if (created.length) await this.record((s) => s.createdDirs.push(...created));
    }
    await this.addCgroup(n.cgroup);
    // The holder: the node's mount namespace (private: nothing propagates to the host) with its own
    // dirs over the hard-coded paths; every node process enters it with nsenter.
    const binds = NODE_MOUNTS.map(([host, sub]) => `mount --bind '${join(n.dir, sub)}' '${host}'`).join(' && ');
    const pidFile = join(n.dir, 'holder.pid');
    this.start(`holder-${n.short}`, n.cgroup, `netns:${n.netns}`, [
      'unshare',
      '--mount',
      '--propagation',
      'private',
      '--',
      'sh',
      '-c',
      `${binds} && echo $$ > '${pidFile}' && exec sleep infinity`,
    ]);
    await this.until(`the holder of ${n.name} is up`, 20_000, async () => existsSync(pidFile));
    await this.startDaemons(n);
  }

  /** containerd, then the kubelet, of a node whose holder (its mount namespace) runs. */
  private async startDaemons(n: NodeSpec): Promise<void> {
    const target = `pid:${holderPid(n)}`;
    this.start(`containerd-${n.short}`, n.cgroup, target, ['containerd', '--config', join(n.dir, 'containerd.toml')]);
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
    this.start(`kubelet-${n.short}`, n.cgroup, target, [
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
    this.log(`node ${n.name} stopped (kubelet, containerd and its containers)`);
  }

  /** Starts a stopped node's containerd and kubelet again; returns once the Node is Ready. */
  async startStoppedNode(name: string): Promise<void> {
    const n = this.node(name);
    if (this.procs.some((p) => (p.name === `kubelet-${n.short}` || p.name === `containerd-${n.short}`) && p.running)) {
      throw new Error(`node ${n.name} is running; stop it first`);
    }
    const t0 = Date.now();
    await this.startDaemons(n);
    await this.until(`${n.name} is Ready again`, 300_000, async () => {
      const out = await this.kubectl(['get', 'node', n.name, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}']).catch(() => '');
      return out === 'True';
    });
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

  /** Builds the images into files (their buffers, large, are garbage once this returns). */
  private async writeImages(): Promise<string[]> {
    const imageDir = join(this.dataDir, 'images');
    await mkdir(imageDir, { recursive: true });
    const files: string[] = [];
    for (const img of await buildImages(this.nb.pause)) {
      const f = join(imageDir, `${img.name.replace(/[/:]/g, '_')}.tar`);
      await writeArchive(img, f);
      files.push(f);
      this.log(`image ${img.name} ${img.digest} (${(img.layerBytes / 1024 / 1024).toFixed(1)} MiB uncompressed)`);
    }
    return files;
  }

  /** Brings the whole cluster up. */
  async up(): Promise<void> {
    const t0 = Date.now();
    [this.cp, this.nb] = [await ensureBinaries(this.log), await ensureNodeBinaries(this.log)];
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
