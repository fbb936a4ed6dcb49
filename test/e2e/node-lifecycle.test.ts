// Nodes go and come back on the local 3-node cluster (root only; `npm run test:e2e`), with the install as
// deployed there and the controller's node-gone grace shortened for the test through its Deployment's
// NODE_GONE_GRACE (restored at the end): a Node deleted with kubectl makes its NodeDisks Ready False
// NodeGone at once, the kubelet does not bring it back by itself, and after the grace the unreserved ones
// are deleted while the reserved one stays; a new machine (blank disks) then registers under the same name,
// with a new Node UID: it inherits no reservation (no old marker on its disk, the reserved NodeDisk is
// NodeReplaced), its own disks are reported afresh, the agent pod runs there again; `kubectl nodedisks
// prune` lists the held one and, naming its owner, removes it. One cluster for the file; the tests run in
// order, each building on the last.
import test from 'ava';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { readSysctls } from '../../hack/cluster/host.ts';
import { interruptAndCheckTornDown, nodeControl, onNode, until } from '../../hack/cluster/run.ts';
import { DISK_DIR, NODE_NAMES } from '../../hack/cluster/topology.ts';
import { clusterForFile, MINUTES, NS, nodeDisksE2E, runPlugin } from './_nodedisks.ts';

const [M02, M03, M04] = NODE_NAMES as [string, string, string];
const GRACE_S = 30;
const OWNER = 'team-db';
const DEPLOYMENT = 'deployment/node-disks-operator';

// Read before any test is declared: AVA takes declarations only until the file's first pause.
const before = await readSysctls();
const cluster = clusterForFile(test);
const { dataDir, env } = cluster;
const kubeconfig = join(dataDir, 'kubeconfig');
const { k, ndName, seedLine, markers, allMarkers, pods } = nodeDisksE2E(dataDir, env, cluster.kubectl);
const [HELD, FREE2, FREE3] = ['disk1', 'disk2', 'disk3'].map((d) => ndName(M04, d)) as [string, string, string];

/** `kubectl nodedisks …` as a person types it, KUBECONFIG set. */
const plugin = (args: string[]) => runPlugin(cluster.kubectl(), kubeconfig, args);

const q = (name: string) => `nodedisk.localtest.example.com/${name}`;
const controllerEnv = () => k(['-n', NS, 'get', DEPLOYMENT, '-o', 'jsonpath={.spec.template.spec.containers[0].env}']);
const nodeUID = () => k(['get', 'node', M04, '-o', 'jsonpath={.metadata.uid}']);
/** "<Ready status> <reason>|<message>" of a NodeDisk, or "absent". */
const readyOf = async (nd: string) => {
  const out = await k([
    'get',
    'nodedisk',
    nd,
    '--ignore-not-found',
    '-o',
    'jsonpath={.metadata.name}|{.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].reason}|{.status.conditions[?(@.type=="Ready")].message}',
  ]);
  if (out === '') return { present: false, ready: '', message: '' };
  const [, ready = '', message = ''] = out.split('|');
  return { present: true, ready, message };
};
/** The agent's report on a NodeDisk: "<phase> <capacity> <node UID>". */
const reportOf = (nd: string) => k(['get', 'nodedisk', nd, '-o', 'jsonpath={.status.node.phase} {.status.node.capacityBytes} {.status.node.nodeUID}']);

let envBefore = '';
let oldUID = '';
let deletedAt = 0;

test.serial('a deleted Node: its NodeDisks are NodeGone at once, the kubelet does not re-create it, and after the grace the unreserved ones are deleted and the reserved one stays', async (t) => {
  t.timeout(10 * MINUTES);
  envBefore = await controllerEnv();
  t.notRegex(envBefore, /NODE_GONE_GRACE/);
  await k(['-n', NS, 'set', 'env', DEPLOYMENT, `NODE_GONE_GRACE=${GRACE_S}s`]);
  await k(['-n', NS, 'rollout', 'status', DEPLOYMENT, '--timeout=300s'], 6 * MINUTES);
  const reserved = await plugin(['reserve', HELD, '--owner', OWNER]);
  t.is(reserved.code, 0, reserved.stderr);
  await until(
    `${HELD} is reserved for ${OWNER}`,
    2 * MINUTES,
    () => seedLine(HELD),
    (l) => l === `Reserved ${OWNER} Reserved 67108864`,
  );
  await until(
    'its marker is on m04',
    2 * MINUTES,
    () => markers(M04),
    (m) => m.join() === 'disk1.img.reserved',
  );
  oldUID = await nodeUID();
  t.is((await reportOf(FREE2)).split(' ')[2], oldUID, 'the agent reports the UID of its Node');

  const kubeletLog = join(dataDir, 'logs', 'kubelet-m04.log');
  const logFrom = statSync(kubeletLog).size;
  // Taken before the request: the controller may see the deletion before kubectl returns.
  deletedAt = Date.now();
  await k(['delete', 'node', M04]);
  const gone = await until(
    'the three NodeDisks of m04 are Ready False NodeGone',
    GRACE_S * 1000,
    () => Promise.all([HELD, FREE2, FREE3].map(readyOf)),
    (r) => r.every((x) => x.ready === 'False NodeGone'),
  );
  t.log(`NodeGone on all three ${((Date.now() - deletedAt) / 1000).toFixed(1)} s after the delete`);
  t.regex(gone[0]!.message, new RegExp(`^node ${M04} is gone: no Node object of that name \\(noticed at \\S+\\); it is reserved by ${OWNER}: it stays until a person releases it`));
  t.regex(gone[1]!.message, new RegExp(`^node ${M04} is gone: .*; not reserved, it is deleted after the grace period of ${GRACE_S}s, at `));
  // The kubelet registers its Node once, at its start: it goes on failing its status updates instead.
  await until(
    'the kubelet of m04 has failed a status update since',
    2 * MINUTES,
    async () => readFileSync(kubeletLog, 'utf8').slice(logFrom),
    (log) => log.includes('Unable to update node status'),
  );
  t.is(await k(['get', 'node', M04, '--ignore-not-found', '-o', 'name']), '', 'the running kubelet did not re-create its Node');

  // The machine is switched off for good (before the grace ends: its agent's pod-bound token stays valid
  // until the pod is collected, and an agent still running would report its deleted disks again).
  await nodeControl(env, M04, 'stop');
  const deleted = await until(
    'the unreserved NodeDisks of m04 are deleted',
    3 * MINUTES,
    () => Promise.all([FREE2, FREE3].map(readyOf)),
    (r) => r.every((x) => !x.present),
  );
  t.is(deleted.length, 2);
  const after = Date.now() - deletedAt;
  t.log(`deleted ${(after / 1000).toFixed(1)} s after the Node (grace ${GRACE_S} s)`);
  t.true(after >= GRACE_S * 1000, `deleted ${after} ms after its Node, before the grace of ${GRACE_S} s`);
  const held = await readyOf(HELD);
  t.is(held.ready, 'False NodeGone');
  t.regex(held.message, /it is reserved by team-db: it stays until a person releases it/);
  t.is(await seedLine(HELD), `Reserved ${OWNER} Reserved 67108864`);
  // The other nodes' disks are none of this.
  for (const n of [M02, M03]) for (const d of ['disk1', 'disk2', 'disk3']) t.is((await readyOf(ndName(n, d))).ready, 'True PhaseMatchesDesired', ndName(n, d));
});

test.serial(
  'a new machine registers under the same name: it inherits no reservation, writes no old marker, reports its own disks afresh, runs the agent pod again; prune lists the held NodeDisk and removes it with --reserved-by',
  async (t) => {
    t.timeout(12 * MINUTES);
    // The new machine's disks are blank: no marker of anyone on them.
    await onNode(env, M04, ['sh', '-c', `rm -f ${DISK_DIR}/* && for i in 1 2 3; do truncate -s 64M ${DISK_DIR}/disk$i.img; done`]);
    t.deepEqual(await markers(M04), []);
    const startedAt = Math.floor(Date.now() / 1000) * 1000;
    await nodeControl(env, M04, 'start');
    const newUID = await nodeUID();
    t.not(newUID, oldUID, 'a Node registered again has a new UID');

    const [agent] = await until(
      'an agent pod runs on m04 again, started after the machine',
      5 * MINUTES,
      async () => {
        const mine = (await pods('node-disks-agent')).filter((p) => p.node === M04 && p.ready === 'True');
        const started = mine[0] ? await k(['-n', NS, 'get', 'pod', mine[0].name, '-o', 'jsonpath={.status.containerStatuses[0].state.running.startedAt}']) : '';
        return Date.parse(started) >= startedAt - 1000 ? mine : [];
      },
      (p) => p.length === 1,
    );
    t.is(await k(['-n', NS, 'get', 'daemonset/node-disks-agent', '-o', 'jsonpath={.status.numberReady}']), '3');
    // The new agent has judged the reserved NodeDisk another machine's (its log says so) ...
    await until(
      'the new agent says why it leaves the reserved NodeDisk alone',
      2 * MINUTES,
      () => k(['-n', NS, 'logs', agent!.name]),
      (log) => log.includes(`NodeDisk ${HELD} is reserved by ${OWNER} on another machine named ${M04} (Node UID ${oldUID}; this one is ${newUID})`),
    );
    // ... and reported its two free disks afresh, under its own UID.
    for (const nd of [FREE2, FREE3]) {
      await until(
        `${nd} is reported afresh by the new machine`,
        2 * MINUTES,
        async () => [await reportOf(nd), (await readyOf(nd)).ready],
        ([r, ready]) => r === `Available 67108864 ${newUID}` && ready === 'True PhaseMatchesDesired',
      );
    }
    const replaced = await until(
      `${HELD} is NodeReplaced`,
      2 * MINUTES,
      () => readyOf(HELD),
      (r) => r.ready === 'False NodeReplaced',
    );
    t.regex(
      replaced.message,
      new RegExp(`^node ${M04} is another machine now \\(Node UID ${newUID}\\); this disk was found on the one before \\(Node UID ${oldUID}\\); it is reserved by ${OWNER}: it stays`),
    );
    t.is(await k(['get', 'nodedisk', HELD, '-o', 'jsonpath={.spec.desired.state} {.spec.desired.owner} {.status.node.nodeUID}']), `Reserved ${OWNER} ${oldUID}`);
    t.deepEqual(await markers(M04), [], "the old reservation's marker is not written on the new machine's disk");

    const listed = await plugin(['prune']);
    t.is(listed.code, 0, listed.stderr);
    t.is(listed.stdout, '');
    t.regex(listed.stderr, new RegExp(`^${q(HELD)} kept: node ${M04} is another machine now, but it is reserved by ${OWNER} \\(add --reserved-by=${OWNER} to remove it\\)$`, 'm'));
    const pruned = await plugin(['prune', '--dry-run=none', '--reserved-by', OWNER]);
    t.is(pruned.code, 0, pruned.stderr);
    t.is(pruned.stdout, `${q(HELD)} deleted: node ${M04} is another machine now; its reservation by ${OWNER} is dropped\n`);
    // Its NodeDisk gone, the new machine's disk1 is reported as its own, free.
    await until(
      `${HELD} is reported afresh by the new machine`,
      2 * MINUTES,
      async () => [await reportOf(HELD), (await readyOf(HELD)).ready, await k(['get', 'nodedisk', HELD, '-o', 'jsonpath={.spec.desired.state}'])],
      ([r, ready, desired]) => r === `Available 67108864 ${newUID}` && ready === 'True PhaseMatchesDesired' && desired === 'Available',
    );
    t.deepEqual(await allMarkers(), { [M02]: [], [M03]: [], [M04]: [] });
    const prunedAgain = await plugin(['prune']);
    t.regex(prunedAgain.stderr, /No NodeDisks of gone nodes found/);
  },
);

test.serial("the controller's environment is restored, every NodeDisk is Ready, and Ctrl-C leaves the host as found", async (t) => {
  t.timeout(10 * MINUTES);
  await k(['-n', NS, 'set', 'env', DEPLOYMENT, 'NODE_GONE_GRACE-']);
  await k(['-n', NS, 'rollout', 'status', DEPLOYMENT, '--timeout=300s'], 6 * MINUTES);
  t.is(await controllerEnv(), envBefore);
  const all = await k(['get', 'nodedisks', '-o', 'jsonpath={range .items[*]}{.metadata.name} {.spec.desired.state} {.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}']);
  t.deepEqual(
    all.trim().split('\n'),
    NODE_NAMES.flatMap((n) => ['disk1', 'disk2', 'disk3'].map((d) => `${ndName(n, d)} Available True`)),
  );
  await interruptAndCheckTornDown(t, cluster.run()!, before);
});
