// Teams' pods get NodeDisks through PVCs of StorageClass nodedisks on the local 3-node cluster (root only;
// `npm run test:e2e`), once per install (csi.test.ts: kustomize, csi-helm.test.ts: the chart): the real
// kube-scheduler with CSIStorageCapacity, the real csi-provisioner, the kubelets calling the driver's node
// side through the plugin watcher's registration. Every pod runs in a namespace that enforces the baseline
// Pod Security Standard. One cluster for the file; the tests run in order.
import test, { type ExecutionContext } from 'ava';
import { mkdirSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readFile } from 'node:fs/promises';
import { readSysctls, sh } from '../../hack/cluster/host.ts';
import { imageRef } from '../../hack/cluster/images.ts';
import { interruptAndCheckTornDown, nodeControl, onNode, until } from '../../hack/cluster/run.ts';
import { DISK_DIR, holderPid, NODE_NAMES, nodeSpec } from '../../hack/cluster/topology.ts';
import { ensureFaultyDisk, FaultyDisk } from '../../hack/faultydisk/faultydisk.ts';
import { pageFrames } from '../../hack/lib/page-frames.ts';
import { clusterForFile, MINUTES, NS, nodeDisksE2E, runPlugin } from './_nodedisks.ts';

const [M02, M03, M04] = NODE_NAMES as [string, string, string];
const TEAM = 'team-pv';
const SECOND = 'team-next';
const FAILING_TEAM = 'team-failing';

export async function csiSuite(INSTALL: 'kustomize' | 'helm'): Promise<void> {
  // Read before any test is declared: AVA takes declarations only until the file's first pause.
  const before = await readSysctls();
  const cluster = clusterForFile(test, INSTALL === 'helm' ? ['--install=helm'] : []);
  const { dataDir, env } = cluster;
  const { k, ndName } = nodeDisksE2E(dataDir, env, cluster.kubectl);
  const plugin = (args: string[]) => runPlugin(cluster.kubectl(), join(dataDir, 'kubeconfig'), args);

  async function apply(name: string, manifest: unknown): Promise<void> {
    const file = join(dataDir, `${name}.json`);
    writeFileSync(file, JSON.stringify(manifest, null, 2));
    await k(['apply', '-f', file]);
  }

  /** A container of an image every node has (never pulled) running a Node.js script, as a team's app would run. */
  function app(name: string, script: string, extra: Record<string, unknown> = {}) {
    return { name, image: imageRef('node-disks-agent'), imagePullPolicy: 'Never', command: ['/nodejs/bin/node', '-e', script], ...extra };
  }

  const pvc = (ns: string, name: string, size: string, mode: 'Filesystem' | 'Block' = 'Filesystem') => ({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name, namespace: ns },
    spec: { storageClassName: 'nodedisks', accessModes: ['ReadWriteOnce'], volumeMode: mode, resources: { requests: { storage: size } } },
  });

  /** A team's pod of `app()` running `script` with `claim` mounted at /data (or, with `block`, as /dev/xvda). */
  const pvcPod = (ns: string, name: string, claim: string, script: string, o: { node?: string; user?: boolean; block?: boolean } = {}) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns },
    spec: {
      ...(o.node ? { nodeSelector: { 'kubernetes.io/hostname': o.node } } : {}),
      terminationGracePeriodSeconds: 1,
      ...(o.user ? { securityContext: { runAsUser: 1000, fsGroup: 1000 } } : {}),
      containers: [app(name, script, o.block ? { volumeDevices: [{ name: 'd', devicePath: '/dev/xvda' }] } : { volumeMounts: [{ name: 'd', mountPath: '/data' }] })],
      volumes: [{ name: 'd', persistentVolumeClaim: { claimName: claim } }],
    },
  });
  const SLEEP = 'setInterval(() => {}, 1 << 30);';

  const podLine = (ns: string, pod: string) => k(['-n', ns, 'get', 'pod', pod, '-o', 'jsonpath={.status.phase} {.spec.nodeName} {.metadata.uid}']);
  const logs = (ns: string, pod: string) => k(['-n', ns, 'logs', pod]);
  const pvOf = (ns: string, claim: string) => k(['-n', ns, 'get', 'pvc', claim, '-o', 'jsonpath={.spec.volumeName}']);
  /** The NodeDisk a PV holds: its volume handle's first half (ADR 39). */
  const diskOf = async (pv: string) => (await k(['get', 'pv', pv, '-o', 'jsonpath={.spec.csi.volumeHandle}'])).split('/')[0] ?? '';

  async function running(ns: string, pod: string, minutes = 4): Promise<string[]> {
    const line = await until(
      `pod ${ns}/${pod} Running`,
      minutes * MINUTES,
      () => podLine(ns, pod),
      (l) => l.startsWith('Running '),
    );
    return line.split(' ');
  }

  /** The agent pod of a node and whether its two containers are ready: "<name> true true". */
  const agentOn = (node: string) =>
    k([
      '-n',
      NS,
      'get',
      'pods',
      '-l',
      'app.kubernetes.io/name=node-disks-agent',
      '--field-selector',
      `spec.nodeName=${node}`,
      '-o',
      'jsonpath={.items[0].metadata.name} {.items[0].status.containerStatuses[*].ready}',
    ]);

  /** The agent pod of a node (the agent and csi-node) deleted, and its successor ready. */
  async function restartAgentOn(node: string): Promise<void> {
    const [old = ''] = (await agentOn(node)).split(' ');
    await k(['-n', NS, 'delete', 'pod', old, '--wait=true']);
    await until(
      `a new agent pod on ${node} ready`,
      4 * MINUTES,
      () => agentOn(node),
      (l) => !l.startsWith(old) && l.endsWith('true true'),
    );
  }

  /** Each node's published CSIStorageCapacity, a line each: "<node> <capacity> <maximumVolumeSize>". */
  const capacities = () =>
    k([
      '-n',
      NS,
      'get',
      'csistoragecapacities',
      '-o',
      'jsonpath={range .items[*]}{.nodeTopology.matchLabels.topology\\.nodedisks\\.localtest\\.example\\.com/node} {.capacity} {.maximumVolumeSize}{"\\n"}{end}',
    ]);

  /** The events of a namespace that a field selector picks, a line each: "<type> <source component> <message>". */
  const events = (ns: string, selector: string) =>
    k(['-n', ns, 'get', 'events', '--field-selector', selector, '-o', 'jsonpath={range .items[*]}{.type} {.source.component} {.message}{"\\n"}{end}']);

  async function baselineNamespace(ns: string): Promise<void> {
    await k(['create', 'namespace', ns]);
    await k(['label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=baseline', 'pod-security.kubernetes.io/enforce-version=latest']);
  }

  async function gone(t: ExecutionContext, what: string, args: string[]): Promise<void> {
    await until(
      what,
      3 * MINUTES,
      () => k(['get', ...args, '--ignore-not-found', '-o', 'name']),
      (o) => o.trim() === '',
    );
    t.pass();
  }

  test.serial(`the driver is installed (${INSTALL}): CSIDriver, StorageClass nodedisks, every kubelet registered it with the node topology, and capacity is published per node`, async (t) => {
    t.timeout(6 * MINUTES);
    t.is(await k(['get', 'csidriver', 'nodedisks.localtest.example.com', '-o', 'jsonpath={.spec.attachRequired} {.spec.storageCapacity}']), 'false true');
    t.is(await k(['get', 'storageclass', 'nodedisks', '-o', 'jsonpath={.provisioner} {.volumeBindingMode} {.reclaimPolicy}']), 'nodedisks.localtest.example.com WaitForFirstConsumer Delete');
    for (const node of NODE_NAMES) {
      await until(
        `the kubelet of ${node} registered the driver`,
        3 * MINUTES,
        () => k(['get', 'csinode', node, '-o', 'jsonpath={.spec.drivers[?(@.name=="nodedisks.localtest.example.com")].nodeID}']),
        (id) => id === node,
      );
    }
    t.is(await k(['get', 'node', M02, '-o', 'jsonpath={.metadata.labels.topology\\.nodedisks\\.localtest\\.example\\.com/node}']), M02);
    // Three 64 MiB disks free on each node: the largest free disk is what the scheduler compares a PVC with.
    const caps = await until('CSIStorageCapacity for every node', 3 * MINUTES, capacities, (o) => NODE_NAMES.every((n) => o.includes(`${n} 192Mi 64Mi`)));
    t.log(caps);
  });

  /** The host PID of each container of a node's agent pod, by container name, from that node's containerd. */
  async function agentContainerPids(node: string): Promise<Map<string, number>> {
    const [pod = ''] = (await agentOn(node)).split(' ');
    const ids = await k(['-n', NS, 'get', 'pod', pod, '-o', 'jsonpath={range .status.containerStatuses[*]}{.name} {.containerID}{"\\n"}{end}']);
    const socket = join(nodeSpec(dataDir, node, NODE_NAMES.indexOf(node)).dir, 'run-containerd', 'containerd.sock');
    const tasks = await sh('ctr', ['--address', socket, '-n', 'k8s.io', 'tasks', 'ls']);
    const out = new Map<string, number>();
    for (const line of ids.split('\n').filter(Boolean)) {
      const [name = '', id = ''] = line.split(' ');
      const pid = Number(
        tasks
          .split('\n')
          .find((l) => l.startsWith(`${id.replace(/^containerd:\/\//, '')} `))
          ?.split(/\s+/)[1],
      );
      if (pid) out.set(name, pid);
    }
    return out;
  }

  test.serial(`on every node the agent and csi-node run one Node binary file, the runtime layer their images share (${INSTALL}): its pages are in memory once`, async (t) => {
    const seen: string[] = [];
    for (const node of NODE_NAMES) {
      const pids = await agentContainerPids(node);
      const [agent, csiNode] = [pids.get('agent'), pids.get('csi-node')];
      if (!agent || !csiNode) return t.fail(`${node}: no running agent and csi-node containers (${[...pids.keys()].join(', ') || 'none'})`);
      t.regex(await readFile(`/proc/${agent}/cmdline`, 'utf8'), /node-disks-agent\.mjs/);
      t.regex(await readFile(`/proc/${csiNode}/cmdline`, 'utf8'), /node-disks-csi\.mjs\0node/);
      // The physical pages each maps of its /nodejs/bin/node: one file in one page cache gives the same pages.
      const [a, c] = [await pageFrames(agent, undefined, '/nodejs/bin/node'), await pageFrames(csiNode, undefined, '/nodejs/bin/node')];
      const both = [...a].filter((f) => c.has(f)).length;
      seen.push(`${node}: agent ${a.size} pages, csi-node ${c.size}, ${both} the same`);
      t.true(both >= Math.min(a.size, c.size) / 2, `${node}: of the Node binary's pages, the agent maps ${a.size} and csi-node ${c.size}, and only ${both} are the same pages`);
    }
    t.log(seen.join('; '));
  });

  test.serial('a 3-replica StatefulSet lands one pod per node, each on its own disk; a pod deleted comes back on the same node and reads its data', async (t) => {
    t.timeout(12 * MINUTES);
    await baselineNamespace(TEAM);
    const script = `
const fs = require('fs');
const f = '/data/who';
if (fs.existsSync(f)) console.log('found ' + fs.readFileSync(f, 'utf8'));
else { fs.writeFileSync(f, process.env.HOSTNAME); console.log('wrote ' + process.env.HOSTNAME); }
setInterval(() => {}, 1 << 30);`;
    await apply('sts', {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: 'db', namespace: TEAM },
      spec: {
        serviceName: 'db',
        replicas: 3,
        selector: { matchLabels: { app: 'db' } },
        template: {
          metadata: { labels: { app: 'db' } },
          spec: {
            affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ labelSelector: { matchLabels: { app: 'db' } }, topologyKey: 'kubernetes.io/hostname' }] } },
            securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 },
            terminationGracePeriodSeconds: 1,
            containers: [app('db', script, { volumeMounts: [{ name: 'data', mountPath: '/data' }] })],
          },
        },
        volumeClaimTemplates: [{ metadata: { name: 'data' }, spec: pvc(TEAM, 'data', '32Mi').spec }],
      },
    });
    const nodes = new Set<string>();
    const disks = new Set<string>();
    for (const i of [0, 1, 2]) {
      const [, node = ''] = await running(TEAM, `db-${i}`, 8);
      nodes.add(node);
      t.is(await logs(TEAM, `db-${i}`), `wrote db-${i}\n`);
      const pv = await pvOf(TEAM, `data-db-${i}`);
      const disk = await diskOf(pv);
      disks.add(disk);
      // The NodeDisk is the PV's, on the pod's node, with its marker there (Reserved ⇔ marker).
      t.is(await k(['get', 'nodedisk', disk, '-o', 'jsonpath={.spec.nodeName} {.spec.desired.owner} {.status.node.phase}']), `${node} pv:${pv} Reserved`);
      const diskID = await k(['get', 'nodedisk', disk, '-o', 'jsonpath={.spec.diskID}']);
      t.is((await onNode(env, node, ['cat', `${DISK_DIR}/${diskID}.img.reserved`])).trim(), 'reserved');
    }
    t.is(nodes.size, 3, 'one pod per node');
    t.is(disks.size, 3);
    // The pod goes; the StatefulSet makes it again, on the node of its PV, with its data.
    const [, node0, uid0] = await running(TEAM, 'db-0');
    await k(['-n', TEAM, 'delete', 'pod', 'db-0', '--wait=true']);
    const [, node0again, uid0again] = (
      await until(
        'db-0 back',
        4 * MINUTES,
        () => podLine(TEAM, 'db-0'),
        (l) => l.startsWith('Running ') && !l.endsWith(uid0 ?? ''),
      )
    ).split(' ');
    t.is(node0again, node0);
    t.not(uid0again, uid0);
    t.is(await logs(TEAM, 'db-0'), 'found db-0\n');
  });

  test.serial('the agent and the node side restarted under a running pod keep its mount: the pod reads and writes on, and its volume is unmounted cleanly afterwards', async (t) => {
    t.timeout(8 * MINUTES);
    const [, node = ''] = await running(TEAM, 'db-1');
    await restartAgentOn(node);
    t.is(
      await k(['-n', TEAM, 'exec', 'db-1', '--', '/nodejs/bin/node', '-e', "const fs=require('fs');fs.writeFileSync('/data/after','x');console.log(fs.readFileSync('/data/who','utf8'))"]),
      'db-1\n',
    );
    // The new node side unpublishes and unstages what the old one set up.
    await k(['-n', TEAM, 'scale', 'statefulset', 'db', '--replicas=0']);
    await gone(t, 'the StatefulSet pods gone', ['-n', TEAM, 'pods', '-l', 'app=db']);
    const mounts = await onNode(env, node, ['cat', '/proc/self/mountinfo']);
    t.notRegex(mounts, /kubernetes\.io~csi|nodedisks\.localtest\.example\.com\/[0-9a-f]+\/globalmount/, 'nothing of the volume is mounted on the node');
  });

  test.serial('deleting a PVC while its pod runs waits for the pod; then the disk is wiped, and a second team gets it with none of the old bytes', async (t) => {
    t.timeout(10 * MINUTES);
    await k(['-n', TEAM, 'delete', 'statefulset', 'db', '--wait=true']);
    await k(['-n', TEAM, 'delete', 'pvc', '--all', '--wait=true', '--timeout=180s']);
    await gone(t, 'the StatefulSet PVs gone', ['pv', '-l', '!nothing']);
    await apply('one-pvc', pvc(TEAM, 'scratch', '32Mi'));
    const secret = 'team-pv wrote this';
    await apply(
      'one-pod',
      pvcPod(TEAM, 'writer', 'scratch', `require('fs').writeFileSync('/data/secret', ${JSON.stringify(secret.repeat(1000))}); console.log('written'); ${SLEEP}`, { node: M02, user: true }),
    );
    await running(TEAM, 'writer');
    const pv = await pvOf(TEAM, 'scratch');
    const disk = await diskOf(pv);
    const diskID = await k(['get', 'nodedisk', disk, '-o', 'jsonpath={.spec.diskID}']);
    const image = `${DISK_DIR}/${diskID}.img`;
    await onNode(env, M02, ['sync']);
    // The team's bytes are in the image now (else the check after the wipe would prove nothing).
    t.not((await onNode(env, M02, ['grep', '-c', 'team-pv wrote', image]).catch(() => '0\n')).trim(), '0', 'the written bytes reached the image');
    // pvc-protection: the PVC is Terminating while the pod uses it, and its disk stays the PV's.
    await k(['-n', TEAM, 'delete', 'pvc', 'scratch', '--wait=false']);
    await new Promise((r) => setTimeout(r, 5000));
    t.regex(await k(['-n', TEAM, 'get', 'pvc', 'scratch', '-o', 'jsonpath={.metadata.deletionTimestamp} {.metadata.finalizers}']), /\S+ .*kubernetes\.io\/pvc-protection/);
    t.is(await k(['get', 'nodedisk', disk, '-o', 'jsonpath={.spec.desired.owner}']), `pv:${pv}`);
    t.is((await running(TEAM, 'writer'))[0], 'Running');
    // The pod goes: the PVC, the PV and the reservation go, and the agent wipes the image first.
    await k(['-n', TEAM, 'delete', 'pod', 'writer', '--wait=true']);
    await gone(t, 'the PV gone', ['pv', pv]);
    const wiped = await until(
      `${disk} wiped and free`,
      4 * MINUTES,
      () => k(['get', 'nodedisk', disk, '-o', 'jsonpath={.spec.desired.state} {.spec.desired.wipe} {.status.node.wipedFor} {.status.node.phase}']),
      (l) => /^Available (pv-\S+) \1 Available$/.test(l),
    );
    t.log(wiped);
    t.is((await onNode(env, M02, ['grep', '-c', 'team-pv wrote', image]).catch(() => '0\n')).trim(), '0', 'the image holds none of the old bytes');
    // A second team's PVC on that node gets a disk with no trace of the first's.
    await baselineNamespace(SECOND);
    await apply('second-pvc', pvc(SECOND, 'fresh', '32Mi'));
    await apply(
      'second-pod',
      pvcPod(SECOND, 'reader', 'fresh', `console.log(JSON.stringify(require('fs').readdirSync('/data').filter((f) => f !== 'lost+found'))); ${SLEEP}`, { node: M02, user: true }),
    );
    await running(SECOND, 'reader');
    t.is(await logs(SECOND, 'reader'), '[]\n', 'a fresh filesystem');
    await k(['-n', SECOND, 'delete', 'pod', 'reader', '--wait=true']);
    await k(['-n', SECOND, 'delete', 'pvc', 'fresh', '--wait=true']);
  });

  test.serial('a Block PVC: the pod gets the raw device and reads back what it wrote', async (t) => {
    t.timeout(6 * MINUTES);
    await apply('block-pvc', pvc(TEAM, 'raw', '32Mi', 'Block'));
    const script = `
const fs = require('fs');
const fd = fs.openSync('/dev/xvda', 'r+');
const data = Buffer.from('block bytes at 1 MiB');
fs.writeSync(fd, data, 0, data.length, 1 << 20);
fs.fsyncSync(fd);
const back = Buffer.alloc(data.length);
fs.readSync(fd, back, 0, back.length, 1 << 20);
console.log(back.toString(), fs.fstatSync(fd).isBlockDevice());
${SLEEP}`;
    await apply('block-pod', pvcPod(TEAM, 'raw', 'raw', script, { block: true }));
    await running(TEAM, 'raw');
    t.is(
      await until(
        'the pod wrote and read',
        MINUTES,
        () => logs(TEAM, 'raw'),
        (l) => l !== '',
      ),
      'block bytes at 1 MiB true\n',
    );
    await k(['-n', TEAM, 'delete', 'pod', 'raw', '--wait=true']);
    await k(['-n', TEAM, 'delete', 'pvc', 'raw', '--wait=true']);
  });

  test.serial("a PVC larger than any disk leaves its pod Pending with the scheduler's capacity reason; reserve, the label and a claim never get a PV's disk", async (t) => {
    t.timeout(6 * MINUTES);
    await apply('big-pvc', pvc(TEAM, 'big', '1Gi'));
    await apply('big-pod', pvcPod(TEAM, 'big', 'big', SLEEP));
    const why = await until(
      'the scheduler says why',
      3 * MINUTES,
      () => k(['-n', TEAM, 'get', 'events', '--field-selector', 'involvedObject.name=big,reason=FailedScheduling', '-o', 'jsonpath={.items[*].message}']),
      (m) => m.includes('did not have enough free storage'),
    );
    t.regex(why, /0\/3 nodes are available: .*3 node\(s\) did not have enough free storage/);
    t.is(await k(['-n', TEAM, 'get', 'pod', 'big', '-o', 'jsonpath={.status.phase}']), 'Pending');
    await k(['-n', TEAM, 'delete', 'pod', 'big', '--wait=true']);
    await k(['-n', TEAM, 'delete', 'pvc', 'big', '--wait=true']);

    // A PV's disk, then everyone else's attempts at it.
    await apply('held-pvc', pvc(TEAM, 'held', '32Mi'));
    await apply('held-pod', pvcPod(TEAM, 'held', 'held', SLEEP));
    await running(TEAM, 'held');
    const pv = await pvOf(TEAM, 'held');
    const disk = await diskOf(pv);
    const reserve = await plugin(['reserve', disk, '--owner', 'alice']);
    t.not(reserve.code, 0);
    t.regex(reserve.stderr, /reserved/);
    await k(['label', 'nodedisk', disk, 'localtest.example.com/auto-reserve=true']);
    await until(
      'the label refused',
      2 * MINUTES,
      () => k(['get', 'nodedisk', disk, '-o', 'jsonpath={.status.conditions[?(@.type=="Accepted")].reason}']),
      (r) => r === 'ReservedByOther',
    );
    await k(['label', 'nodedisk', disk, 'localtest.example.com/auto-reserve-']);
    await apply('claim', { apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDiskClaim', metadata: { name: 'wants', namespace: TEAM }, spec: { diskName: disk } });
    await until(
      'the claim Pending',
      2 * MINUTES,
      () => k(['-n', TEAM, 'get', 'ndc', 'wants', '-o', 'jsonpath={.status.phase}']),
      (p) => p === 'Pending',
    );
    t.is(await k(['get', 'nodedisk', disk, '-o', 'jsonpath={.spec.desired.owner}']), `pv:${pv}`);
    await k(['-n', TEAM, 'delete', 'ndc', 'wants', '--wait=true']);
    await k(['-n', TEAM, 'delete', 'pod', 'held', '--wait=true']);
    await k(['-n', TEAM, 'delete', 'pvc', 'held', '--wait=true']);
  });

  if (INSTALL === 'kustomize') {
    test.serial(
      'under running PVC pods (Filesystem and Block), a kubelet restarted leaves them running and a new pod of the PVC starts; a node rebooted (its processes, mounts and loop devices gone) brings them back on it, reading what they wrote',
      async (t) => {
        t.timeout(15 * MINUTES);
        const fsScript = `
const fs = require('fs');
if (fs.existsSync('/data/who')) console.log('found ' + fs.readFileSync('/data/who', 'utf8'));
else { fs.writeFileSync('/data/who', 'before the reboot'); fs.fsyncSync(fs.openSync('/data/who', 'r')); console.log('wrote'); }
${SLEEP}`;
        const blockScript = `
const fs = require('fs');
const fd = fs.openSync('/dev/xvda', 'r+');
const mark = Buffer.from('block before the reboot');
const back = Buffer.alloc(mark.length);
fs.readSync(fd, back, 0, back.length, 1 << 20);
if (back.equals(mark)) console.log('found ' + back.toString());
else { fs.writeSync(fd, mark, 0, mark.length, 1 << 20); fs.fsyncSync(fd); console.log('wrote'); }
${SLEEP}`;
        await apply('reboot-fs', pvc(TEAM, 'reboot-fs', '32Mi'));
        await apply('reboot-fs-pod', pvcPod(TEAM, 'reboot-fs', 'reboot-fs', fsScript, { node: M04, user: true }));
        await apply('reboot-block', pvc(TEAM, 'reboot-block', '32Mi', 'Block'));
        await apply('reboot-block-pod', pvcPod(TEAM, 'reboot-block', 'reboot-block', blockScript, { node: M04, block: true }));
        for (const pod of ['reboot-fs', 'reboot-block']) {
          await running(TEAM, pod);
          t.is(
            await until(
              `${pod} wrote`,
              MINUTES,
              () => logs(TEAM, pod),
              (l) => l !== '',
            ),
            'wrote\n',
          );
        }
        // The kubelet restarted alone (systemctl restart kubelet): the pods run on in the same containers,
        // reading and writing, and a new pod of the Filesystem PVC starts beside them on that node.
        const containers = async () => Promise.all(['reboot-fs', 'reboot-block'].map((pod) => k(['-n', TEAM, 'get', 'pod', pod, '-o', 'jsonpath={.status.containerStatuses[0].containerID}'])));
        const containersBefore = await containers();
        await nodeControl(env, M04, 'restart-kubelet');
        // A new kubelet knows its pods again after its first sync: until then it refuses an exec of them.
        const execUntil = (pod: string, script: string, want: string) =>
          until(
            `an exec in ${pod} after the kubelet's restart`,
            2 * MINUTES,
            () => k(['-n', TEAM, 'exec', pod, '--', '/nodejs/bin/node', '-e', script]).catch((e: Error) => e.message),
            (o) => o === want,
          );
        t.is(
          await execUntil('reboot-fs', "const fs=require('fs');fs.writeFileSync('/data/after-kubelet','x');console.log(fs.readFileSync('/data/who','utf8'))", 'before the reboot\n'),
          'before the reboot\n',
        );
        t.is(
          await execUntil(
            'reboot-block',
            "const fs=require('fs');const fd=fs.openSync('/dev/xvda','r');const b=Buffer.alloc(23);fs.readSync(fd,b,0,23,1<<20);console.log(b.toString())",
            'block before the reboot\n',
          ),
          'block before the reboot\n',
        );
        await apply('reboot-fs-second', pvcPod(TEAM, 'reboot-fs-second', 'reboot-fs', fsScript, { node: M04, user: true }));
        await running(TEAM, 'reboot-fs-second');
        t.is(
          await until(
            'the second pod read',
            MINUTES,
            () => logs(TEAM, 'reboot-fs-second'),
            (l) => l !== '',
          ),
          'found before the reboot\n',
        );
        await k(['-n', TEAM, 'delete', 'pod', 'reboot-fs-second', '--wait=true']);
        t.deepEqual(await containers(), containersBefore, 'a container was restarted with the kubelet');

        const stagedBefore = (await onNode(env, M04, ['sh', '-c', `cat ${DISK_DIR}/*.img.staged`])).trim().split('\n');
        t.is(stagedBefore.length, 2, 'two volumes staged on m04');
        const devices = stagedBefore.map((l) => (JSON.parse(l) as { device: string }).device);

        await nodeControl(env, M04, 'stop');
        const attached = (await onNode(env, M03, ['losetup', '--list', '--noheadings', '--output', 'NAME'])).split('\n').map((l) => l.trim());
        t.deepEqual(
          devices.filter((d) => attached.includes(d)),
          [],
          "m04's loop devices outlived its reboot",
        );
        await nodeControl(env, M04, 'start');

        for (const pod of ['reboot-fs', 'reboot-block']) {
          const found = await until(
            `${pod} back on m04, reading what it wrote`,
            8 * MINUTES,
            async () => `${await podLine(TEAM, pod)} | ${await logs(TEAM, pod).catch(() => '')}`,
            (l) => l.startsWith(`Running ${M04} `) && l.includes('| found '),
          );
          t.log(found);
        }
        for (const pod of ['reboot-fs', 'reboot-block']) {
          await k(['-n', TEAM, 'delete', 'pod', pod, '--wait=true']);
          await k(['-n', TEAM, 'delete', 'pvc', pod, '--wait=true']);
        }
      },
    );
  }

  if (INSTALL === 'kustomize') {
    test.serial(
      "pods deleted (gracefully, and forced) while their node's kubelet is down are cleaned up when it returns: volumes unmounted and unstaged, disks wiped once their PVCs go",
      async (t) => {
        t.timeout(12 * MINUTES);
        await apply('kd-fs', pvc(TEAM, 'kd-fs', '32Mi'));
        await apply('kd-fs-pod', pvcPod(TEAM, 'kd-fs', 'kd-fs', `require('fs').writeFileSync('/data/x', 'x'); ${SLEEP}`, { node: M04, user: true }));
        await apply('kd-block', pvc(TEAM, 'kd-block', '32Mi', 'Block'));
        await apply('kd-block-pod', pvcPod(TEAM, 'kd-block', 'kd-block', SLEEP, { node: M04, block: true }));
        await running(TEAM, 'kd-fs');
        await running(TEAM, 'kd-block');
        const pvs = [await pvOf(TEAM, 'kd-fs'), await pvOf(TEAM, 'kd-block')];
        const disks = await Promise.all(pvs.map(diskOf));
        const diskIDs = await Promise.all(disks.map((d) => k(['get', 'nodedisk', d, '-o', 'jsonpath={.spec.diskID}'])));
        const leftOnNode = async () => {
          const mounts = (await onNode(env, M04, ['cat', '/proc/self/mountinfo'])).split('\n').filter((l) => pvs.some((pv) => l.includes(pv)));
          const staged = (await onNode(env, M04, ['ls', DISK_DIR])).split('\n').filter((f) => diskIDs.some((id) => f === `${id}.img.staged`));
          return [...mounts, ...staged];
        };
        t.not((await leftOnNode()).length, 0, 'nothing of the volumes on the node to begin with (what this test stands for)');

        await nodeControl(env, M04, 'stop-kubelet');
        try {
          await k(['-n', TEAM, 'delete', 'pod', 'kd-fs', '--wait=false']);
          await k(['-n', TEAM, 'delete', 'pod', 'kd-block', '--grace-period=0', '--force']);
        } finally {
          await nodeControl(env, M04, 'start-kubelet');
        }
        await gone(t, 'the gracefully deleted pod gone', ['-n', TEAM, 'pod', 'kd-fs']);
        const left = await until('the volumes unmounted and unstaged on m04', 4 * MINUTES, leftOnNode, (l) => l.length === 0);
        t.deepEqual(left, []);
        await k(['-n', TEAM, 'delete', 'pvc', 'kd-fs', 'kd-block', '--wait=true']);
        for (const disk of disks) {
          await until(
            `${disk} wiped and free`,
            2 * MINUTES,
            () => k(['get', 'nodedisk', disk, '-o', 'jsonpath={.spec.desired.state} {.spec.desired.wipe} {.status.node.wipedFor} {.status.node.phase}']),
            (l) => /^Available (pv-\S+) \1 Available$/.test(l.trim()),
          );
        }
      },
    );
  }

  // The nodes of this cluster share one kernel and each has its own disk1.img at the same path: the case
  // where a path says nothing of whose device it is (the node side and the agent match by inode and by the
  // stage's record). Run with one install: it is the node side's, the same under both.
  if (INSTALL === 'kustomize') {
    test.serial("one node's volume on its disk1 is untouched when another node's volume on its own disk1 goes: that disk is wiped and free within a minute, this pod reads on", async (t) => {
      t.timeout(10 * MINUTES);
      await until(
        'every disk free and wiped',
        4 * MINUTES,
        () => k(['get', 'nodedisks', '-o', 'jsonpath={range .items[*]}{.spec.desired.state} {.status.node.phase}{"\\n"}{end}']),
        (o) =>
          o
            .trim()
            .split('\n')
            .every((l) => l === ' Available' || l === 'Available Available'),
      );
      const written = 'm03 block bytes';
      const blockScript = `
const fs = require('fs');
const fd = fs.openSync('/dev/xvda', 'r+');
fs.writeSync(fd, Buffer.from(${JSON.stringify(written)}), 0, ${written.length}, 1 << 20);
fs.fsyncSync(fd);
console.log('written');
${SLEEP}`;
      await apply('shared-kernel-block', pvc(TEAM, 'on-m03', '32Mi', 'Block'));
      await apply('shared-kernel-block-pod', pvcPod(TEAM, 'on-m03', 'on-m03', blockScript, { node: M03, block: true }));
      await apply('shared-kernel-fs', pvc(TEAM, 'on-m04', '32Mi'));
      await apply('shared-kernel-fs-pod', pvcPod(TEAM, 'on-m04', 'on-m04', `require('fs').writeFileSync('/data/x', 'm04'); ${SLEEP}`, { node: M04, user: true }));
      await running(TEAM, 'on-m03');
      await running(TEAM, 'on-m04');
      const diskM03 = await diskOf(await pvOf(TEAM, 'on-m03'));
      const diskM04 = await diskOf(await pvOf(TEAM, 'on-m04'));
      t.deepEqual(
        [await k(['get', 'nodedisk', diskM03, '-o', 'jsonpath={.spec.diskID}']), await k(['get', 'nodedisk', diskM04, '-o', 'jsonpath={.spec.diskID}'])],
        ['disk1', 'disk1'],
        'the two volumes are not on disks of the same ID (what this test stands for)',
      );
      // m03's device, by the stage's record on m03, and its state as the kernel has it.
      const deviceM03 = (JSON.parse(await onNode(env, M03, ['cat', `${DISK_DIR}/disk1.img.staged`])) as { device: string }).device;
      const autoclear = async () =>
        (JSON.parse(await onNode(env, M03, ['losetup', '--list', '--json', '--output', 'NAME,AUTOCLEAR', deviceM03])) as { loopdevices: { autoclear: boolean }[] }).loopdevices[0]?.autoclear;
      t.is(await autoclear(), false);

      const pvM04 = await pvOf(TEAM, 'on-m04');
      await k(['-n', TEAM, 'delete', 'pod', 'on-m04', '--wait=true']);
      await k(['-n', TEAM, 'delete', 'pvc', 'on-m04', '--wait=false']);
      await gone(t, 'the m04 PV gone', ['pv', pvM04]);
      const deleted = Date.now();
      const freed = await until(
        `${diskM04} wiped and free`,
        2 * MINUTES,
        () => k(['get', 'nodedisk', diskM04, '-o', 'jsonpath={.spec.desired.state} {.spec.desired.wipe} {.status.node.wipedFor} {.status.node.phase} {.status.node.holdsData}']),
        (l) => /^Available (pv-\S+) \1 Available( false)?$/.test(l.trim()),
      );
      const took = Date.now() - deleted;
      t.log(`${diskM04} free ${took} ms after its PV went: ${freed}`);
      t.true(took <= 60_000, `${diskM04} was free again ${took} ms after its PV's deletion`);
      t.is(await autoclear(), false, "m04's unstage asked the kernel to detach m03's device");
      const read = await k([
        '-n',
        TEAM,
        'exec',
        'on-m03',
        '--',
        '/nodejs/bin/node',
        '-e',
        `const fs=require('fs');const fd=fs.openSync('/dev/xvda','r');const b=Buffer.alloc(${written.length});fs.readSync(fd,b,0,b.length,1<<20);console.log(b.toString())`,
      ]);
      t.is(read.trim(), written, "m03's pod no longer reads its device");
      // Left running, with a Filesystem pod beside it: the teardown below must leave nothing of either
      // (the kubelet's reference device of a Block volume among them).
      await apply('shared-kernel-fs-again', pvc(TEAM, 'on-m04-again', '32Mi'));
      await apply('shared-kernel-fs-again-pod', pvcPod(TEAM, 'on-m04-again', 'on-m04-again', SLEEP, { node: M04, user: true }));
      await running(TEAM, 'on-m04-again');
    });
  }

  if (INSTALL === 'kustomize') {
    test.serial(
      "a disk failing under a running pod: the kubelet tells the pod (VolumeConditionAbnormal, with what the kernel saw), the NodeDisk turns Healthy=False and the PVC's team is told",
      async (t) => {
        t.timeout(15 * MINUTES);
        // A disk image on M02 whose writes fail on command: a FUSE file (hack/faultydisk) served inside the
        // node's mount namespace, bound over <disk dir>/failing.img there. 80 MiB, the only disk a 70Mi PVC fits.
        const node = M02;
        const spec = nodeSpec(dataDir, node, NODE_NAMES.indexOf(node));
        const dir = join(dataDir, 'faulty');
        mkdirSync(join(dir, 'mnt'), { recursive: true });
        const backing = join(dir, 'backing');
        writeFileSync(backing, '');
        truncateSync(backing, 80 * 2 ** 20);
        const image = `${DISK_DIR}/failing.img`;
        const disk = await FaultyDisk.serve(await ensureFaultyDisk(), backing, join(dir, 'mnt'), 'disk.img', ['nsenter', '-t', String(holderPid(spec)), '--mount', '--']);
        const failingDisk = ndName(node, 'failing');
        try {
          await baselineNamespace(FAILING_TEAM);
          await onNode(env, node, ['sh', '-c', `touch ${image} && mount --bind ${join(dir, 'mnt', 'disk.img')} ${image}`]);
          // A container sees the mounts under a hostPath as they were when it started: the agent and
          // csi-node start again to see the failing file, not the empty one under it.
          await restartAgentOn(node);
          await until(
            `${failingDisk} Available`,
            3 * MINUTES,
            () => k(['get', 'nodedisk', failingDisk, '-o', 'jsonpath={.status.node.phase} {.status.node.capacityBytes}', '--ignore-not-found']),
            (l) => l === `Available ${80 * 2 ** 20}`,
          );

          // The scheduler places the pod by the capacity the provisioner published from GetCapacity (polled each minute).
          await until(`CSIStorageCapacity of ${node} with the 80 MiB disk as its largest`, 3 * MINUTES, capacities, (o) => new RegExp(`^${node} \\S+ 80Mi$`, 'm').test(o));
          await apply('failing-pvc', pvc(FAILING_TEAM, 'failing', '70Mi'));
          // A new file each half second, written and synced, as a database makes its segments: its inode and
          // directory entry are the filesystem's own writes, which the journal must commit.
          const writer = `const fs = require('fs');
let i = 0;
setInterval(() => {
  try { const fd = fs.openSync('/data/seg-' + i++, 'w'); fs.writeSync(fd, Buffer.alloc(65536, 120)); fs.fsyncSync(fd); fs.closeSync(fd); }
  catch (e) { console.log(e.code); }
}, 500);`;
          await apply('failing-pod', pvcPod(FAILING_TEAM, 'on-failing', 'failing', writer, { node, user: true }));
          await running(FAILING_TEAM, 'on-failing');
          const pv = await pvOf(FAILING_TEAM, 'failing');
          t.is(await diskOf(pv), failingDisk, 'the PVC got the failing disk (what this test stands for)');

          await disk.set('fail writes');
          // What the driver and the kubelet say of the volume, should the event not come.
          const diagnose = async () => {
            const [agentPod = ''] = (await agentOn(node)).split(' ');
            const metrics = await k(['get', '--raw', `/api/v1/namespaces/${NS}/pods/${agentPod}:8083/proxy/metrics`]).catch((err: Error) => err.message);
            t.log(
              metrics
                .split('\n')
                .filter((l) => l.includes('NodeGetVolumeStats') && l.includes('_count'))
                .join('\n'),
            );
            const summary = await k(['get', '--raw', `/api/v1/nodes/${node}/proxy/stats/summary`]).catch((err: Error) => err.message);
            t.log(
              JSON.stringify(
                (JSON.parse(summary) as { pods?: { podRef: { name: string }; volume?: unknown }[] }).pods?.find((p) => p.podRef.name === 'on-failing')?.volume ?? summary.slice(0, 500),
              ),
            );
          };
          // The kubelet asks the node side for the volume's stats at its own period (a minute, jittered).
          const told = await until(
            'the kubelet tells the pod its volume is abnormal',
            6 * MINUTES,
            () => events(FAILING_TEAM, 'involvedObject.name=on-failing,reason=VolumeConditionAbnormal'),
            (o) => o.trim() !== '',
          ).catch(async (err: unknown) => {
            await diagnose().catch((e: Error) => t.log(`no diagnosis: ${e.message}`));
            throw err;
          });
          t.log(told.trim());
          t.regex(told, /^Warning kubelet Volume d: the ext4 filesystem on this volume \(loop\d+\) went read-only after IO errors; /m);
          const healthy = await until(
            `${failingDisk} Healthy=False`,
            3 * MINUTES,
            () => k(['get', 'nodedisk', failingDisk, '-o', 'jsonpath={.status.conditions[?(@.type=="Healthy")].status} {.status.conditions[?(@.type=="Healthy")].reason}']),
            (l) => l.startsWith('False '),
          );
          t.is(healthy, 'False FilesystemErrors');
          const team = await until(
            "a DiskFailing Warning on the team's PVC",
            3 * MINUTES,
            () => events(FAILING_TEAM, 'involvedObject.kind=PersistentVolumeClaim,involvedObject.name=failing,reason=DiskFailing'),
            (o) => o.trim() !== '',
          );
          t.regex(team, /^Warning /);
          t.log(team.trim());

          // The team lets go: the volume is unstaged, the image wiped once it can be written again.
          await disk.set('heal');
          await k(['-n', FAILING_TEAM, 'delete', 'pod', 'on-failing', '--wait=true']);
          await k(['-n', FAILING_TEAM, 'delete', 'pvc', 'failing', '--wait=true']);
          await gone(t, 'the failing PV gone', ['pv', pv]);
          await until(
            `${failingDisk} wiped`,
            4 * MINUTES,
            () => k(['get', 'nodedisk', failingDisk, '-o', 'jsonpath={.spec.desired.wipe} {.status.node.wipedFor}']),
            (l) => /^(\S+) \1$/.test(l),
          );
        } finally {
          // Nothing of the FUSE file may outlive the test: not the volume on it, not the bind on the node, not a container's copy of it.
          await disk.set('heal').catch(() => undefined);
          await k(['-n', FAILING_TEAM, 'delete', 'pod', 'on-failing', '--ignore-not-found', '--wait=true']).catch(() => undefined);
          await k(['-n', FAILING_TEAM, 'delete', 'pvc', 'failing', '--ignore-not-found', '--wait=true', '--timeout=180s']).catch(() => undefined);
          await onNode(env, node, ['sh', '-c', `umount ${image}; rm -f ${image}`]).catch(() => undefined);
          await restartAgentOn(node).catch((err: Error) => t.log(`the agent pod was not restarted: ${err.message}`));
          await disk.close().catch((err: Error) => t.log(err.message));
        }
      },
    );
  }

  test.serial('Ctrl-C tears the cluster down: no loop device, mount, namespace or cgroup left', async (t) => {
    t.timeout(5 * MINUTES);
    const run = cluster.run();
    if (!run) return t.fail('no cluster');
    await interruptAndCheckTornDown(t, run, before);
  });
}
