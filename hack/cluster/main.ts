// `npm run cluster`: a real three-node Kubernetes on this machine running NodeDisks as pods from images
// built from this checkout (see cluster.ts and docs/adr/0016-local-cluster.md). Stays in the
// foreground; Ctrl-C tears down everything it made and checks that nothing is left.
// `--install=kustomize` (the default) applies kustomize/overlays/local-cluster, `--install=helm` installs
// the chart with the pinned helm, `--install=none` leaves the nodes with the images imported and the
// disks seeded, for whoever installs NodeDisks next (test/e2e/helm.test.ts).
import { existsSync } from 'node:fs';
import { mkdir, open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULT_SYSTEM_NAMESPACE } from '../../api/constants.ts';
import { ensureHelm, helm } from '../helm/helm.ts';
import { IMAGES } from '../lib/image-spec.ts';
import { REPO_ROOT } from '../lib/paths.ts';
import { Cluster } from './cluster.ts';
import { serveControl } from './control.ts';
import { sh } from './host.ts';
import { IMAGE_TAG } from './images.ts';
import { DISK_DIR, NODE_NAMES } from './topology.ts';
import { isAlive, leftovers, readState, undo } from './state.ts';

const say = (line: string) => console.log(line);
const dataDir = process.env.NODEDISKS_CLUSTER_DIR || join(REPO_ROOT, '.nodedisks-cluster');
const OVERLAY = join(REPO_ROOT, 'kustomize', 'overlays', 'local-cluster');
const CHART = join(REPO_ROOT, 'charts', 'node-disks-manager');
const INSTALLS = ['none', 'kustomize', 'helm'] as const;
type Install = (typeof INSTALLS)[number];
const USAGE = `usage: npm run cluster [-- --install=${INSTALLS.join('|')}]   (default kustomize)`;
const DISKS_PER_NODE = 3;
const DISK_BYTES = 64 * 1024 * 1024;

/** The Debian packages the nodes need, and a file each one installs. */
const PACKAGES: [pkg: string, file: string][] = [
  ['containerd', '/usr/bin/containerd'],
  ['runc', '/usr/sbin/runc'],
  ['containernetworking-plugins', '/usr/lib/cni/bridge'],
];

async function ensurePackages(): Promise<void> {
  const missing = PACKAGES.filter(([, f]) => !existsSync(f)).map(([p]) => p);
  if (missing.length === 0) return;
  if (!existsSync('/usr/bin/apt-get')) throw new Error(`install ${missing.join(', ')} (their Debian names), then run again`);
  say(`installing ${missing.join(' ')} with apt-get …`);
  await sh('apt-get', ['install', '-y', '--no-install-recommends', ...missing], { timeoutMs: 600_000, env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
}

/** The --install choice, or a usage error (exit 2) naming the choices. */
function parseInstall(argv: string[]): Install | undefined {
  try {
    const { values } = parseArgs({ args: argv, options: { install: { type: 'string', default: 'kustomize' } }, strict: true, allowPositionals: false });
    const v = values.install;
    if ((INSTALLS as readonly string[]).includes(v)) return v as Install;
    console.error(`error: --install=${v}: the choices are ${INSTALLS.join(', ')}\n${USAGE}`);
  } catch (err) {
    console.error(`error: ${(err as Error).message}\n${USAGE}`);
  }
  return undefined;
}

/** The seed's `make helm-install` command line, pointed at the images this cluster imported, plus the local-cluster values. */
function helmInstallArgs(): string[] {
  const set = (role: 'controller' | 'agent', name: string) => ['--set', `${role}.image.repository=${name}`, '--set', `${role}.image.tag=${IMAGE_TAG}`];
  const image = (target: string) => IMAGES.find((i) => i.target === target)!.name;
  return [
    'upgrade',
    '--install',
    'node-disks-manager',
    CHART,
    '-n',
    DEFAULT_SYSTEM_NAMESPACE,
    '--create-namespace',
    ...set('controller', image('operator')),
    ...set('agent', image('agent')),
    '-f',
    join(CHART, 'ci', 'local-cluster-values.yaml'),
  ];
}

async function main(): Promise<number> {
  const install = parseInstall(process.argv.slice(2));
  if (!install) return 2;
  if (process.getuid?.() !== 0) {
    console.error('error: npm run cluster must run as root: it makes network namespaces, cgroups and mounts for its nodes (sudo npm run cluster)');
    return 1;
  }
  const previous = readState();
  if (previous && isAlive(previous)) {
    console.error(
      `error: a local cluster is already running (pid ${previous.pid}, kubeconfig ${join(previous.dataDir, 'kubeconfig')}); stop it with Ctrl-C in its terminal, or kill -INT ${previous.pid}`,
    );
    return 1;
  }
  if (previous) {
    say(`cleaning up after a local cluster that did not stop (pid ${previous.pid}) …`);
    const problems = await undo(previous, say);
    if (problems.length) {
      console.error(`error: could not clean up: ${problems.join('; ')}`);
      return 1;
    }
  }
  await ensurePackages();
  // Built (once, cached) before anything is made: a cold helm build must not run while the nodes wait.
  const helmBin = install === 'helm' ? await ensureHelm(say) : '';
  // A fresh start: nothing of an earlier run (its etcd above all) may leak into this one.
  for (const entry of ['logs', 'etcd', 'nodes', 'images', 'pki', 'kubeconfig', 'apiserver.sock', 'control.sock']) await rm(join(dataDir, entry), { recursive: true, force: true });
  await mkdir(dataDir, { recursive: true });
  say('building the programs (npm run build) …');
  await sh(process.execPath, [join(REPO_ROOT, 'hack', 'build.ts')], { timeoutMs: 300_000 });

  const cluster = await Cluster.create({ dataDir, log: say });
  let stopping: Promise<void> | undefined;
  const teardown = async (): Promise<void> => {
    stopping ??= (async () => {
      say('\ntearing down the local cluster …');
      await cluster.stopProcesses();
      const problems = await undo(cluster.state, say);
      for (const p of problems) console.error(`error: ${p}`);
      const left = await leftovers(cluster.state.sysctls, cluster.state.dataDir);
      if (left.length) console.error(`error: left behind:\n  ${left.join('\n  ')}`);
      else say('torn down: no namespace, cgroup, mount, loop device or changed kernel setting left.');
    })();
    await stopping;
  };
  let signalled = false;
  const stop = () => {
    signalled = true;
    void teardown().then(() => process.exit(0));
  };
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, stop);
  // Started by a test (NODEDISKS_CLUSTER_STOP_ON_EOF=1, stdin a pipe from it): when that process dies,
  // however (a SIGKILLed test worker), stdin ends, and the cluster tears down as on Ctrl-C.
  if (process.env.NODEDISKS_CLUSTER_STOP_ON_EOF === '1') {
    process.stdin.on('end', stop);
    process.stdin.resume();
  }

  try {
    const t0 = Date.now();
    await cluster.up();
    say(`3 nodes Ready ${cluster.figures.nodesReadySeconds} s after the kubelets started (control plane ${cluster.figures.controlPlaneSeconds} s)`);
    for (const n of cluster.nodes) {
      for (let i = 1; i <= DISKS_PER_NODE; i++) {
        const f = await open(join(n.dir, 'node-disks-manager', 'disks', `disk${i}.img`), 'w');
        await f.truncate(DISK_BYTES); // sparse
        await f.close();
      }
    }
    const tw = Date.now();
    if (install === 'none') {
      say(`no NodeDisks install (--install=none): images imported, ${DISKS_PER_NODE} disks seeded on each node`);
    } else {
      if (install === 'kustomize') {
        await cluster.until(
          'the overlay applies',
          120_000,
          async () =>
            await cluster.kubectl(['apply', '--server-side', '-k', OVERLAY]).then(
              () => true,
              (e: Error) => (say(e.message.split('\n')[0] ?? ''), false),
            ),
        );
      } else {
        say(`helm ${helmInstallArgs().join(' ')}`);
        say((await helm(helmBin, helmInstallArgs(), { env: { KUBECONFIG: cluster.kubeconfig } })).trim());
      }
      await cluster.until('the agent DaemonSet is ready on 3 nodes', 300_000, async () => {
        const out = await cluster
          .kubectl(['-n', DEFAULT_SYSTEM_NAMESPACE, 'get', 'daemonset/node-disks-agent', '-o', 'jsonpath={.status.numberReady}/{.status.desiredNumberScheduled}'])
          .catch(() => '');
        return out === '3/3';
      });
      await cluster.until('the controller Deployment is available', 300_000, async () => {
        const out = await cluster
          .kubectl(['-n', DEFAULT_SYSTEM_NAMESPACE, 'get', 'deployment/node-disks-operator', '-o', 'jsonpath={.status.availableReplicas}/{.spec.replicas}'])
          .catch(() => '');
        const [a, b] = out.split('/');
        return a !== '' && a === b;
      });
      const expected = NODE_NAMES.length * DISKS_PER_NODE;
      await cluster.until(`${expected} NodeDisks are reported`, 120_000, async () => {
        const out = await cluster.kubectl(['get', 'nodedisks', '-o', 'jsonpath={range .items[*]}{.status.node.phase}{"\\n"}{end}']).catch(() => '');
        return out.split('\n').filter(Boolean).length === expected;
      });
      say(`NodeDisks (${install}) running as pods ${((Date.now() - tw) / 1000).toFixed(1)} s after the nodes were Ready; ${((Date.now() - t0) / 1000).toFixed(1)} s in all`);
    }
    const control = await serveControl(dataDir, {
      node: (action, node) =>
        ({
          stop: () => cluster.stopNode(node),
          start: () => cluster.startStoppedNode(node),
          'restart-kubelet': () => cluster.restartKubelet(node),
          'stop-kubelet': () => cluster.stopKubelet(node),
          'start-kubelet': () => cluster.startKubelet(node),
        })[action](),
      images: () => cluster.reloadImages(),
    });
    process.once('exit', () => control.close());
    say(await cluster.kubectl(['get', 'nodes,pods', '-A', '-o', 'wide']));
    say(`
The local cluster is up: ${NODE_NAMES.join(', ')}, disks in ${DISK_DIR} on each.

  export KUBECONFIG=${cluster.kubeconfig}
  kubectl get nodedisks
  npm run cluster:ssh -- node-disks-dev-m02 ls -l ${DISK_DIR}
  npm run cluster:node -- node-disks-dev-m04 stop    (then start: a node reboot)
  npm run cluster:node -- node-disks-dev-m04 restart-kubelet    (or stop-kubelet, then start-kubelet)

Ctrl-C here stops it and removes everything it made.`);
    await new Promise(() => {});
    return 0;
  } catch (err) {
    // Ctrl-C during the start makes the start fail ("stopping"): finish the teardown before exiting.
    if (signalled) {
      await teardown();
      return 0;
    }
    console.error(`error: ${(err as Error).message}`);
    console.error(`logs: ${join(dataDir, 'logs')}`);
    await teardown();
    return 1;
  }
}

process.exit(await main());
