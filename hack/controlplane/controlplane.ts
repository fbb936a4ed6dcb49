// A real Kubernetes control plane for tests and the demo: etcd + kube-apiserver on free loopback
// ports, RBAC on, with the identities the programs have in production:
//   admin       static token, group system:masters
//   nobody      static token, no bindings at all
//   controller  a token of ServiceAccount <namespace>/node-disks-operator (TokenRequest)
//   csiController  a token of ServiceAccount <namespace>/node-disks-csi-controller (the CSI driver's controller side)
//   agent(node) a token of ServiceAccount <namespace>/node-disks-agent bound to a Node object,
//               so it carries authentication.kubernetes.io/node-name like a projected token on that node
//   namespacedUser(ns, sa)  a token of ServiceAccount <ns>/<sa> bound to a ClusterRole (edit) in <ns> only
// Each identity gets its own kubeconfig file; kubectl and @kubernetes/client-node use them as they are.

import { execFile } from 'node:child_process';
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dump } from 'js-yaml';
import { API_VERSION, CRD_NAME, DEFAULT_DISK_DIR, DEFAULT_SYSTEM_NAMESPACE, GROUP, KIND } from '../../api/constants.ts';
import { ensureBinaries, type ControlPlaneBinaries } from './binaries.ts';
import { ServerProcess } from '../lib/process.ts';

import { REPO_ROOT } from '../lib/paths.ts';
export { REPO_ROOT };
/** The install's namespace, where the control plane applies kustomize/default unless told otherwise. */
export const SYSTEM_NAMESPACE = DEFAULT_SYSTEM_NAMESPACE;

export interface Identity {
  name: string;
  token: string;
  kubeconfig: string;
}

export interface StartOptions {
  /** Keep state here instead of a fresh temp dir (the demo uses .nodedisks-dev/). */
  dir?: string;
  /** Install kustomize/crd, the namespace and kustomize/rbac after start (default true). */
  install?: boolean;
  /**
   * Install this kustomization (a directory, for example an overlay of kustomize/default) instead of
   * kustomize/{crd,namespace,rbac,policies}; with `namespace` when it installs into another namespace.
   */
  kustomization?: string;
  /** The namespace the install's ServiceAccounts live in, where tokens are requested (default node-disks-system). */
  namespace?: string;
  /** The kustomization's namePrefix and nameSuffix: the install's objects (ServiceAccounts, policies) carry them. */
  names?: { prefix?: string; suffix?: string };
  log?: (line: string) => void;
  /** Keep an audit log of every write (see auditedWrites), for tests that must know who wrote what, when. */
  auditWrites?: boolean;
  /** Picks a free loopback port (tests inject one that hands out a taken port). */
  pickPort?: () => Promise<number>;
  /** More kube-apiserver flags (`--feature-gates=WatchList=false`, say, for a server without watch-list). */
  apiserverFlags?: string[];
}

/** One write request as the API server's audit log records it (Metadata level, stage ResponseComplete). */
export interface AuditedWrite {
  verb: string;
  requestURI: string;
  userAgent: string;
  user: { username: string };
  objectRef?: { resource?: string; subresource?: string; name?: string; namespace?: string };
  responseStatus?: { code?: number };
  /** RFC 3339 with microseconds, as the API server writes it; comparable as strings. */
  requestReceivedTimestamp: string;
}

/** The kernel's range for ephemeral ports (bind to port 0, and the source port of every outgoing connection). */
export function ephemeralPortRange(text = readProcText('/proc/sys/net/ipv4/ip_local_port_range')): { low: number; high: number } {
  const [low, high] = (text ?? '').trim().split(/\s+/).map(Number);
  return low && high ? { low, high } : { low: 32768, high: 60999 };
}

function readProcText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

const canListen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });

/**
 * A port free right now, below the kernel's ephemeral range: a restarted API server binds its port again,
 * and an ephemeral port may meanwhile have become the source port of some outgoing connection or another
 * process's bind to port 0. Below that range only another explicit pick can take it, which boot retries.
 */
export async function freePort(range = ephemeralPortRange()): Promise<number> {
  const low = 10_000;
  const high = range.low - 1;
  if (high - low >= 1000) {
    for (let i = 0; i < 50; i++) {
      const port = low + Math.floor(Math.random() * (high - low + 1));
      if (await canListen(port)) return port;
    }
  }
  return await new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Starts tried before giving up when a picked port turns out to be taken. */
const BOOT_ATTEMPTS = 5;

class PortTakenError extends Error {}

export class ControlPlane {
  readonly dir: string;
  readonly binaries: ControlPlaneBinaries;
  readonly etcd: ServerProcess;
  readonly apiserver: ServerProcess;
  /** The namespace of the install's ServiceAccounts (StartOptions.namespace). */
  readonly namespace: string;
  server = '';
  caFile = '';
  private adminToken = '';
  private nobodyToken = '';
  private readonly ownsDir: boolean;
  private apiserverArgs: string[] = [];
  /** An identity's promise settles once its kubeconfig is complete on disk, so a concurrent caller waits for
   * the first caller's token and file instead of reading a file still being written or issuing another. */
  private readonly identities = new Map<string, Promise<Identity>>();
  private adminIdentity: Identity | undefined;

  private readonly kustomization: string | undefined;
  private extraApiserverFlags: string[] = [];
  private readonly saNames: { prefix?: string; suffix?: string };

  private constructor(dir: string, ownsDir: boolean, binaries: ControlPlaneBinaries, namespace: string, kustomization: string | undefined, saNames: { prefix?: string; suffix?: string } = {}) {
    this.dir = dir;
    this.namespace = namespace;
    this.kustomization = kustomization;
    this.saNames = saNames;
    this.ownsDir = ownsDir;
    this.binaries = binaries;
    this.etcd = new ServerProcess('etcd', join(dir, 'etcd.log'));
    this.apiserver = new ServerProcess('kube-apiserver', join(dir, 'kube-apiserver.log'));
  }

  static async start(opts: StartOptions = {}): Promise<ControlPlane> {
    const binaries = await ensureBinaries(opts.log);
    const dir = opts.dir ?? (await mkdtemp(join(tmpdir(), 'nodedisks-cp-')));
    await mkdir(dir, { recursive: true });
    const cp = new ControlPlane(dir, opts.dir === undefined, binaries, opts.namespace ?? SYSTEM_NAMESPACE, opts.kustomization, opts.names);
    cp.extraApiserverFlags = opts.apiserverFlags ?? [];
    try {
      await cp.boot(opts.auditWrites === true, opts.pickPort ?? freePort);
      if (opts.install !== false) await cp.installBase();
    } catch (err) {
      const logs = cp.logs();
      await cp.stop();
      throw new Error(`${(err as Error).message}\n${logs}`, { cause: err });
    }
    return cp;
  }

  /**
   * A port picked free can be taken by another process before etcd or kube-apiserver binds it (the
   * picker must let go of it first). Such a start fails with "address already in use": stop what
   * started, pick new ports and start again, a few times.
   */
  private async boot(auditWrites: boolean, pickPort: () => Promise<number>): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.bootOnce(auditWrites, pickPort);
      } catch (err) {
        if (!(err instanceof PortTakenError) || attempt >= BOOT_ATTEMPTS) throw err;
        await this.apiserver.stop();
        await this.etcd.stop();
        await rm(join(this.dir, 'etcd-data'), { recursive: true, force: true });
      }
    }
  }

  private async bootOnce(auditWrites: boolean, pickPort: () => Promise<number>): Promise<void> {
    const pki = join(this.dir, 'pki');
    await mkdir(pki, { recursive: true });
    const [etcdPort, peerPort, apiPort] = [await pickPort(), await pickPort(), await pickPort()];

    // etcd: one throwaway member; fsync off because test data is disposable.
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    const peerUrl = `http://127.0.0.1:${peerPort}`;
    this.etcd.start(this.binaries.etcd, [
      `--name=default`,
      `--data-dir=${join(this.dir, 'etcd-data')}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=default=${peerUrl}`,
      '--unsafe-no-fsync=true',
      '--log-level=warn',
    ]);
    await this.waitFor(this.etcd, 30_000, async () => {
      // Bounded: whatever holds a taken port may accept and never answer.
      const res = await fetch(`${etcdUrl}/health`, { signal: AbortSignal.timeout(2000) }).catch(() => undefined);
      return res?.ok === true;
    });

    // Static tokens for the people; RSA keys for ServiceAccount tokens. The serving certificate is the
    // API server's own self-signed one (written to --cert-dir), which clients trust as the CA.
    this.adminToken = randomBytes(24).toString('hex');
    this.nobodyToken = randomBytes(24).toString('hex');
    const tokens = join(pki, 'tokens.csv');
    await writeFile(tokens, `${this.adminToken},nodedisks-admin,uid-admin,"system:masters"\n${this.nobodyToken},nodedisks-nobody,uid-nobody\n`, { mode: 0o600 });
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    await writeFile(join(pki, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    await writeFile(join(pki, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));

    this.server = `https://127.0.0.1:${apiPort}`;
    this.caFile = join(pki, 'apiserver.crt');
    this.apiserverArgs = [
      `--etcd-servers=${etcdUrl}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${apiPort}`,
      `--cert-dir=${pki}`,
      `--token-auth-file=${tokens}`,
      '--authorization-mode=RBAC',
      `--service-account-issuer=${this.server}`,
      `--service-account-key-file=${join(pki, 'sa.pub')}`,
      `--service-account-signing-key-file=${join(pki, 'sa.key')}`,
      '--service-cluster-ip-range=10.0.0.0/24',
      // No controller-manager runs, so nothing would create default ServiceAccounts for pods.
      '--disable-admission-plugins=ServiceAccount',
      '--allow-privileged=true',
    ];
    if (auditWrites) {
      const policy = join(this.dir, 'audit-policy.yaml');
      const rules = { apiVersion: 'audit.k8s.io/v1', kind: 'Policy', omitStages: ['RequestReceived'], rules: [{ level: 'None', verbs: ['get', 'list', 'watch'] }, { level: 'Metadata' }] };
      await writeFile(policy, dump(rules));
      this.apiserverArgs.push(`--audit-policy-file=${policy}`, `--audit-log-path=${this.auditLog}`, '--audit-log-format=json', '--audit-log-mode=blocking');
    }
    this.apiserverArgs.push(...this.extraApiserverFlags);
    this.apiserver.start(this.binaries.kubeApiserver, this.apiserverArgs);
    await this.waitFor(this.apiserver, 90_000, async () => (await this.getAsAdmin('/readyz').catch(() => 0)) === 200);
    this.adminIdentity = await this.persist('admin', this.adminToken);
  }

  private async waitFor(proc: ServerProcess, timeoutMs: number, ready: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let exited = false;
    void proc.whenExited().then(() => (exited = true));
    while (Date.now() < deadline) {
      if (exited) {
        const out = proc.logsOfThisRun();
        if (/address already in use/.test(out)) throw new PortTakenError(`${proc.name} could not bind its port: ${/.*address already in use.*/.exec(out)?.[0]}`);
        throw new Error(`${proc.name} exited before it was ready`);
      }
      if (await ready()) return;
      await sleep(100);
    }
    throw new Error(`${proc.name} was not ready within ${timeoutMs / 1000} s`);
  }

  private async getAsAdmin(path: string): Promise<number> {
    const ca = await readFile(this.caFile);
    return await new Promise((resolve, reject) => {
      const req = request(`${this.server}${path}`, { ca, headers: { Authorization: `Bearer ${this.adminToken}` }, timeout: 5000 }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', reject);
      req.end();
    });
  }

  /**
   * Installs the CRD, the namespace, RBAC and the admission policies from kustomize/ (or the kustomization
   * of StartOptions) with the real kubectl, as a user would.
   */
  async installBase(): Promise<void> {
    const dirs = this.kustomization !== undefined ? [this.kustomization] : ['crd', 'namespace', 'rbac', 'policies'].map((d) => join(REPO_ROOT, 'kustomize', d));
    for (const dir of dirs) {
      await this.kubectl(this.admin(), ['apply', '--server-side', '-k', dir]);
    }
    // The install's CRDs: NodeDisks always, NodeDiskClaims where the kustomization has them.
    const crds = (await this.kubectl(this.admin(), ['get', 'crd', '-o', 'name'])).split('\n').filter((n) => n.endsWith(`.${GROUP}`));
    await this.kubectl(this.admin(), [
      'wait',
      '--for=condition=Established',
      '--timeout=60s',
      `crd/${CRD_NAME}`,
      ...crds.filter((n) => n !== `customresourcedefinition.apiextensions.k8s.io/${CRD_NAME}`),
    ]);
    // Established comes before the resource's storage is serving ("storage is (re)initializing", 429):
    // wait until a list answers, as a client of a freshly installed CRD must.
    const deadline = Date.now() + 30_000;
    for (const crd of crds) {
      const resource = crd.slice(crd.indexOf('/') + 1);
      for (;;) {
        try {
          await this.kubectl(this.admin(), ['get', resource, '-A', '-o', 'name']);
          break;
        } catch (err) {
          if (Date.now() > deadline) throw err;
          await sleep(100);
        }
      }
    }
    await this.waitForPolicies();
  }

  /**
   * A ValidatingAdmissionPolicy is in force only once the API server has loaded and compiled it, a moment
   * after it is stored: until then the writes it forbids go through. Waits until each installed policy
   * refuses a dry-run write of the identity it governs (impersonated with system:masters, so that RBAC lets
   * the request reach admission).
   */
  private async waitForPolicies(): Promise<void> {
    const installed = (await this.kubectl(this.admin(), ['get', 'validatingadmissionpolicybindings', '-o', 'name'])).split('\n');
    const ns = this.namespace;
    const nodeDisk = {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name: 'node-disk-policy-probe-disk1' },
      spec: { nodeName: 'policy-probe', diskID: 'disk1', path: `${DEFAULT_DISK_DIR}/disk1.img` },
    };
    const claimProbe = { ...nodeDisk, spec: { ...nodeDisk.spec, desired: { state: 'Reserved', owner: 'claim:policy-probe/probe' } } };
    const pvProbe = { ...nodeDisk, spec: { ...nodeDisk.spec, desired: { state: 'Reserved', owner: 'pv:pvc-policy-probe', ownerUID: 'policy-probe' } } };
    const lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'node-disks-agent-policy-probe', namespace: ns }, spec: { holderIdentity: 'policy-probe' } };
    const probes = [
      { policy: 'nodedisks-agent.localtest.example.com', sa: 'node-disks-agent', object: nodeDisk },
      { policy: 'nodedisks-agent-heartbeat.localtest.example.com', sa: 'node-disks-agent', object: lease },
      { policy: 'nodedisks-controller.localtest.example.com', sa: 'node-disks-operator', object: nodeDisk },
      { policy: 'nodedisks-controller-leases.localtest.example.com', sa: 'node-disks-operator', object: lease },
      { policy: 'nodedisks-csi-controller.localtest.example.com', sa: 'node-disks-csi-controller', object: nodeDisk },
      { policy: 'nodedisks-csi-controller-leases.localtest.example.com', sa: 'node-disks-csi-controller', object: lease },
    ]
      .map(({ policy, sa, object }) => ({ policy: this.objectName(policy), user: `system:serviceaccount:${ns}:${this.objectName(sa)}`, object }))
      // The claims policy governs everyone but the controller: a person reserving a disk for a claim; the PV
      // policy everyone but the CSI controller: a person reserving a disk for a PersistentVolume.
      .concat([
        { policy: this.objectName('nodedisks-claims.localtest.example.com'), user: 'nodedisks-policy-probe', object: claimProbe },
        { policy: this.objectName('nodedisks-pv.localtest.example.com'), user: 'nodedisks-policy-probe', object: pvProbe },
      ])
      .filter((p) => installed.includes(`validatingadmissionpolicybinding.admissionregistration.k8s.io/${p.policy}`));
    const deadline = Date.now() + 30_000;
    for (const probe of probes) {
      for (;;) {
        const args = ['--as', probe.user, '--as-group', 'system:masters', 'create', '--dry-run=server', '-f', '-'];
        const refusal = await this.kubectl(this.admin(), args, JSON.stringify(probe.object)).then(
          () => '',
          (err: Error) => err.message,
        );
        // A binding whose parameter (the ServiceAccount, ADR 28) is not yet found or synced refuses every
        // request as well, legitimate ones too: that is not the policy in force yet.
        if (refusal.includes(probe.policy) && !refusal.includes('failed to configure binding')) break;
        if (refusal !== '' && !/denied the request|forbidden/i.test(refusal)) throw new Error(`probing admission policy ${probe.policy}: ${refusal}`);
        if (Date.now() > deadline) throw new Error(`admission policy ${probe.policy} is not in force 30 s after it was installed`);
        await sleep(100);
      }
    }
  }

  /** The one identity called `name`: the first caller issues its token and writes its kubeconfig. */
  private identity(name: string, token: () => Promise<string>, namespace?: string): Promise<Identity> {
    const known = this.identities.get(name);
    if (known) return known;
    const made = token().then((t) => this.persist(name, t, namespace));
    this.identities.set(name, made);
    // A failed attempt is not remembered: the next caller tries again.
    made.catch(() => {
      if (this.identities.get(name) === made) this.identities.delete(name);
    });
    return made;
  }

  /** `namespace` becomes the context's namespace, where kubectl and the plugin act without `-n`. */
  private async persist(name: string, token: string, namespace?: string): Promise<Identity> {
    // A node name may be longer than a file name may be: keep the file name short and still unique.
    const fileName = name.length <= 100 ? name : `${name.slice(0, 80)}-${createHash('sha256').update(name).digest('hex').slice(0, 12)}`;
    const kubeconfig = join(this.dir, `kubeconfig-${fileName}.yaml`);
    const config = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'nodedisks-test', cluster: { server: this.server, 'certificate-authority': this.caFile } }],
      users: [{ name, user: { token } }],
      contexts: [{ name, context: { cluster: 'nodedisks-test', user: name, ...(namespace ? { namespace } : {}) } }],
      'current-context': name,
    };
    // Written aside and renamed, so that nobody (kubectl in another process, say) reads half a file.
    const partial = `${kubeconfig}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    await writeFile(partial, dump(config), { mode: 0o600 });
    await rename(partial, kubeconfig);
    return { name, token, kubeconfig };
  }

  /** The cluster admin (system:masters). Its kubeconfig is written at start. */
  admin(): Identity {
    if (!this.adminIdentity) throw new Error('the control plane has not started');
    return this.adminIdentity;
  }

  /** A user with no RBAC bindings at all. */
  async nobody(): Promise<Identity> {
    return await this.identity('nobody', async () => this.nobodyToken);
  }

  /** The name kustomize's namePrefix/nameSuffix give an object of the install. */
  private objectName(name: string): string {
    return `${this.saNames.prefix ?? ''}${name}${this.saNames.suffix ?? ''}`;
  }

  /** A ServiceAccount token from the TokenRequest API, optionally bound to an object. */
  private async serviceAccountToken(sa: string, boundObjectRef?: { kind: string; apiVersion: string; name: string; uid: string }, namespace = this.namespace): Promise<string> {
    const body = {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { audiences: [this.server], expirationSeconds: 24 * 3600, ...(boundObjectRef ? { boundObjectRef } : {}) },
    };
    // The install's ServiceAccounts carry its name prefix and suffix; a team's own one does not.
    const name = namespace === this.namespace ? this.objectName(sa) : sa;
    const path = `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`;
    const out = await this.kubectl(this.admin(), ['create', '--raw', path, '-f', '-'], JSON.stringify(body));
    const token = (JSON.parse(out) as { status?: { token?: string } }).status?.token;
    if (!token) throw new Error(`TokenRequest for ${sa} returned no token: ${out}`);
    return token;
  }

  /** The controller's ServiceAccount identity. */
  async controller(): Promise<Identity> {
    return await this.identity('controller', () => this.serviceAccountToken('node-disks-operator'));
  }

  /** The CSI driver's controller side: its ServiceAccount identity (both of its pod's containers use it). */
  async csiController(): Promise<Identity> {
    return await this.identity('csi-controller', () => this.serviceAccountToken('node-disks-csi-controller'));
  }

  /**
   * A user with rights in one namespace only, as an application team has: ServiceAccount `namespace/sa`
   * (the namespace and account are created if needed), bound there by a RoleBinding to `clusterRole`
   * (default the built-in `edit`). Its kubeconfig's context has that namespace.
   */
  async namespacedUser(namespace: string, sa: string, clusterRole = 'edit'): Promise<Identity> {
    return await this.identity(
      `${namespace}-${sa}`,
      async () => {
        const objects = [
          { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } },
          { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: sa, namespace } },
          {
            apiVersion: 'rbac.authorization.k8s.io/v1',
            kind: 'RoleBinding',
            metadata: { name: `${sa}-${clusterRole}`, namespace },
            roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: clusterRole },
            subjects: [{ kind: 'ServiceAccount', name: sa, namespace }],
          },
        ];
        const list = { apiVersion: 'v1', kind: 'List', items: objects };
        await this.kubectl(this.admin(), ['apply', '--server-side', '-f', '-'], JSON.stringify(list));
        await this.aggregate(clusterRole);
        return await this.serviceAccountToken(sa, undefined, namespace);
      },
      namespace,
    );
  }

  /**
   * No kube-controller-manager runs here, so nothing fills an aggregated ClusterRole (`edit`, `view`) with
   * the rules of the roles it selects, the install's claims roles among them: do that controller's work for
   * this role once, as things are now.
   */
  private async aggregate(clusterRole: string): Promise<void> {
    type Role = { rules?: unknown[]; aggregationRule?: { clusterRoleSelectors?: { matchLabels?: Record<string, string> }[] } };
    const role = JSON.parse(await this.kubectl(this.admin(), ['get', 'clusterrole', clusterRole, '-o', 'json'])) as Role;
    const selectors = role.aggregationRule?.clusterRoleSelectors ?? [];
    if (selectors.length === 0) return;
    const rules: unknown[] = [];
    for (const selector of selectors) {
      const labels = Object.entries(selector.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
      if (labels.length === 0) continue;
      const out = await this.kubectl(this.admin(), ['get', 'clusterroles', '-l', labels.join(','), '-o', 'json']);
      for (const item of (JSON.parse(out) as { items: Role[] }).items) rules.push(...(item.rules ?? []));
    }
    await this.kubectl(this.admin(), ['patch', 'clusterrole', clusterRole, '--type=merge', '-p', JSON.stringify({ rules })]);
  }

  /** Creates the Node object if needed and returns the agent identity bound to it. */
  async agent(nodeName: string): Promise<Identity> {
    return await this.identity(`agent-${nodeName}`, async () => {
      const node = await this.ensureNode(nodeName);
      return await this.serviceAccountToken('node-disks-agent', { kind: 'Node', apiVersion: 'v1', name: nodeName, uid: node.uid });
    });
  }

  /**
   * The agent identity of another machine registered under `nodeName`: a token bound to the Node as it is
   * now (its UID), cached as `machine`'s. A Node deleted and created again has another UID, and the
   * tokens bound to the old one no longer authenticate.
   */
  async agentOfMachine(nodeName: string, machine: string): Promise<Identity> {
    return await this.identity(`agent-${nodeName}-${machine}`, async () => {
      const node = await this.ensureNode(nodeName);
      return await this.serviceAccountToken('node-disks-agent', { kind: 'Node', apiVersion: 'v1', name: nodeName, uid: node.uid });
    });
  }

  /** A Node object (no kubelet runs; the object is what tokens bind to and what the demo lists). */
  async ensureNode(nodeName: string): Promise<{ uid: string }> {
    // A node name may be longer than a label value (63): such a Node simply has no hostname label here.
    const labels = nodeName.length <= 63 ? { 'kubernetes.io/hostname': nodeName } : {};
    const manifest = { apiVersion: 'v1', kind: 'Node', metadata: { name: nodeName, labels } };
    const out = await this.kubectl(this.admin(), ['apply', '--server-side', '-o', 'json', '-f', '-'], JSON.stringify(manifest));
    return { uid: (JSON.parse(out) as { metadata: { uid: string } }).metadata.uid };
  }

  /** Runs the control plane's own kubectl (or `bin`) as an identity; rejects with stderr on failure. */
  async kubectl(identity: Identity, args: string[], stdin?: string, bin = this.binaries.kubectl): Promise<string> {
    return await runKubectl(bin, ['--kubeconfig', identity.kubeconfig, ...args], stdin);
  }

  /** Stops kube-apiserver (etcd keeps the data), waits `downMs`, and starts it again on the same port. */
  async restartApiserver(downMs = 0): Promise<void> {
    await this.apiserver.stop();
    await sleep(downMs);
    this.apiserver.start(this.binaries.kubeApiserver, this.apiserverArgs);
    await this.waitFor(this.apiserver, 90_000, async () => (await this.getAsAdmin('/readyz').catch(() => 0)) === 200);
  }

  private get auditLog(): string {
    return join(this.dir, 'audit.log');
  }

  /** Every write the API server has answered so far (start with auditWrites), oldest first. */
  async auditedWrites(): Promise<AuditedWrite[]> {
    const text = await readFile(this.auditLog, 'utf8');
    return text
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as AuditedWrite)
      .sort((a, b) => a.requestReceivedTimestamp.localeCompare(b.requestReceivedTimestamp));
  }

  /** Both processes' recent logs, for a failing test's report. */
  logs(maxBytesEach = 32 * 1024): string {
    return [this.etcd, this.apiserver].map((p) => `----- ${p.name} (${p.logFile}) -----\n${p.logs(maxBytesEach)}`).join('\n');
  }

  async stop(): Promise<void> {
    await this.apiserver.stop();
    await this.etcd.stop();
    if (this.ownsDir) await rm(this.dir, { recursive: true, force: true });
  }
}

export class KubectlError extends Error {
  readonly exitCode: number;
  readonly stderr: string;
  readonly stdout: string;
  constructor(args: string[], exitCode: number, stdout: string, stderr: string) {
    super(`kubectl ${args.join(' ')} exited ${exitCode}: ${stderr.trim()}`);
    this.exitCode = exitCode;
    this.stdout = stdout;
    this.stderr = stderr;
  }
}

export async function runKubectl(bin: string, args: string[], stdin?: string): Promise<string> {
  return await new Promise((resolve, reject) => {
    const child = execFile(bin, args, { maxBuffer: 64 * 1024 * 1024, timeout: 120_000 }, (err, stdout, stderr) => {
      if (err) {
        const code = typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1;
        reject(new KubectlError(args, code, stdout, stderr));
      } else resolve(stdout);
    });
    child.stdin?.end(stdin ?? '');
  });
}
