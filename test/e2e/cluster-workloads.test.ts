// NodeDisks as real pods on the local 3-node cluster (root only; `npm run test:e2e`): the seed's
// walk-through, then everything that can happen to the pods (agent pod deleted, DaemonSet rolled, leader
// pod deleted, a node rebooted), the agent's node-bound token judged from inside its pod, and the images'
// security settings as the running containers see them. One cluster for the whole file (a start costs
// 1–2 minutes); the tests run in order and each leaves the reservations it documents for the next.
import test, { type ExecutionContext } from 'ava';
import { DISK_DIR, NODE_NAMES } from '../../hack/cluster/topology.ts';
import { readSysctls, sh } from '../../hack/cluster/host.ts';
import { interruptAndCheckTornDown, nodeControl, onNode, until } from '../../hack/cluster/run.ts';
import { clusterForFile, FINALIZER, LABEL, MINUTES, NS, nodeDisksE2E } from './_nodedisks.ts';

const LEASE = 'node-disks-operator.localtest.example.com';
const [M02, M03, M04] = NODE_NAMES as [string, string, string];

// Read before any test is declared: AVA takes declarations only until the file's first pause.
const before = await readSysctls();
const cluster = clusterForFile(test);
const { dataDir, env } = cluster;
const { k, ndName, seedLine, markers, allMarkers, reservations, reserve, release, pods } = nodeDisksE2E(dataDir, env, cluster.kubectl);

const agentOn = async (node: string) => (await pods('node-disks-agent')).filter((p) => p.node === node);

/** Runs a Node.js snippet inside a pod's container (the images have no shell) and returns its stdout. */
const nodeIn = (pod: string, script: string) => k(['-n', NS, 'exec', pod, '--', '/nodejs/bin/node', '-e', script]);

test.serial('the seed walk-through: a label reserves a disk, its marker appears on that node only, and removing the label releases it', async (t) => {
  t.timeout(10 * MINUTES);
  const nd = ndName(M02, 'disk1');
  // Discovery, as the seed's `kubectl get nodedisks -o wide` shows it.
  const wide = await k(['get', 'nodedisks', '-o', 'wide']);
  t.regex(wide, /^NAME\s+NODE\s+DISK\s+DESIRED\s+PHASE\s+OWNER\s+CAPACITY\s+MEDIA\s+READY\s+CORDONED\s+AGE$/m);
  for (const n of NODE_NAMES) for (const d of ['disk1', 'disk2', 'disk3']) t.regex(wide, new RegExp(`^${ndName(n, d)}\\s+${n}\\s+${d}\\s+Available\\s+Available\\s`, 'm'));
  t.deepEqual(await allMarkers(), { [M02]: [], [M03]: [], [M04]: [] });

  await k(['label', 'nodedisk', nd, `${LABEL}=true`, '--overwrite']);
  t.is(
    await until(
      'the label is honoured',
      3 * MINUTES,
      () => seedLine(nd),
      (l) => l === 'Reserved auto Reserved 67108864',
    ),
    'Reserved auto Reserved 67108864',
  );
  const nodeName = await k(['get', 'nodedisk', nd, '-o', 'jsonpath={.spec.nodeName}']);
  const diskID = await k(['get', 'nodedisk', nd, '-o', 'jsonpath={.spec.diskID}']);
  t.is(nodeName, M02);
  const listed = await until(
    'the marker is on the node',
    2 * MINUTES,
    () => onNode(env, nodeName, ['ls', '-1', DISK_DIR]),
    (o) => o.includes(`${diskID}.img.reserved`),
  );
  t.deepEqual(
    listed.split('\n').filter((f) => f.startsWith(`${diskID}.img`)),
    ['disk1.img', 'disk1.img.reserved'],
  );
  t.is(await onNode(env, nodeName, ['cat', `${DISK_DIR}/${diskID}.img.reserved`]), 'reserved\n');
  t.deepEqual(await allMarkers(), { [M02]: ['disk1.img.reserved'], [M03]: [], [M04]: [] }, 'the marker is on that node only');

  await k(['label', 'nodedisk', nd, `${LABEL}-`]);
  t.is(
    await until(
      'the release',
      3 * MINUTES,
      () => seedLine(nd),
      (l) => l === 'Available  Available 67108864',
    ),
    'Available  Available 67108864',
  );
  await until(
    'the marker is gone',
    2 * MINUTES,
    () => markers(M02),
    (m) => m.length === 0,
  );
  t.deepEqual(
    (await onNode(env, nodeName, ['ls', '-1', DISK_DIR])).split('\n').filter((f) => f.startsWith(`${diskID}.img`)),
    ['disk1.img'],
  );
});

test.serial('the agent pod of a node with a reserved disk is deleted: the DaemonSet re-creates it and nothing is lost', async (t) => {
  t.timeout(10 * MINUTES);
  await reserve(M03, 'disk2');
  const held = await reservations();
  t.is(held[ndName(M03, 'disk2')], `Reserved auto Reserved ["${FINALIZER}"]`);
  const [old] = await agentOn(M03);
  t.truthy(old);
  await k(['-n', NS, 'delete', 'pod', old!.name, '--wait=true', '--timeout=180s'], 4 * MINUTES);
  const fresh = await until(
    'a new agent pod is Ready on m03',
    5 * MINUTES,
    () => agentOn(M03),
    (p) => p.length === 1 && p[0]!.uid !== old!.uid && p[0]!.ready === 'True',
  );
  t.not(fresh[0]!.uid, old!.uid);
  t.deepEqual(await reservations(), held, 'reservation and finalizer kept');
  t.deepEqual(await markers(M03), ['disk2.img.reserved'], 'marker kept');
  // The new pod does its job: a new label on its node is honoured there.
  await reserve(M03, 'disk3');
  await release(M03, 'disk3');
  t.deepEqual(await markers(M03), ['disk2.img.reserved']);
});

test.serial('kubectl rollout restart of the agent DaemonSet keeps every reservation and marker', async (t) => {
  t.timeout(15 * MINUTES);
  await reserve(M04, 'disk1');
  const held = await reservations();
  const marked = await allMarkers();
  t.deepEqual(marked, { [M02]: [], [M03]: ['disk2.img.reserved'], [M04]: ['disk1.img.reserved'] });
  const oldUids = new Set((await pods('node-disks-agent')).map((p) => p.uid));
  t.is(oldUids.size, 3);
  await k(['-n', NS, 'rollout', 'restart', 'daemonset/node-disks-agent']);
  await k(['-n', NS, 'rollout', 'status', 'daemonset/node-disks-agent', '--timeout=600s'], 11 * MINUTES);
  const now = await until(
    'three new agent pods are Ready',
    5 * MINUTES,
    () => pods('node-disks-agent'),
    (p) => p.length === 3 && p.every((x) => !oldUids.has(x.uid) && x.ready === 'True'),
  );
  t.deepEqual(now.map((p) => p.node).sort(), [...NODE_NAMES]);
  t.deepEqual(await reservations(), held);
  t.deepEqual(await allMarkers(), marked);
});

test.serial('the leading controller pod is deleted: the other replica takes the lease and honours a new label', async (t) => {
  t.timeout(10 * MINUTES);
  const ops = await pods('node-disks-operator');
  t.is(ops.length, 2);
  const leader = await k(['-n', NS, 'get', 'lease', LEASE, '-o', 'jsonpath={.spec.holderIdentity}']);
  t.true(
    ops.some((p) => p.name === leader),
    `the lease holder ${leader} is one of the pods ${ops.map((p) => p.name).join(', ')}`,
  );
  const standby = ops.find((p) => p.name !== leader)!;
  await k(['-n', NS, 'delete', 'pod', leader, '--wait=true', '--timeout=180s'], 4 * MINUTES);
  const next = await until(
    'another pod holds the lease',
    3 * MINUTES,
    () => k(['-n', NS, 'get', 'lease', LEASE, '-o', 'jsonpath={.spec.holderIdentity}']),
    (h) => h !== '' && h !== leader,
  );
  // The leader gives the lease up as it stops, so the standby and the ReplicaSet's replacement (created as
  // soon as the leader is marked for deletion) both race for it; either is a correct successor.
  const live = await pods('node-disks-operator');
  t.true(
    live.some((p) => p.name === next && p.name !== leader),
    `the new holder ${next} is a live pod other than ${leader} (pods: ${live.map((p) => p.name).join(', ')}; standby was ${standby.name})`,
  );
  await reserve(M04, 'disk2');
  // The new leader reports it too: Ready at status.conditions (ADR 20), written after the agent's report.
  await until(
    'the new leader reports Ready=True',
    2 * MINUTES,
    () => k(['get', 'nodedisk', ndName(M04, 'disk2'), '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}']),
    (s) => s === 'True',
  );
  await release(M04, 'disk2');
});

test.serial('a node reboot (kubelet, containerd and containers stopped, then started again) recovers its disks', async (t) => {
  t.timeout(20 * MINUTES);
  await reserve(M04, 'disk1'); // already, after the rollout test; this test also runs alone (--match)
  const held = await reservations();
  const marked = await allMarkers();
  t.is(held[ndName(M04, 'disk1')], `Reserved auto Reserved ["${FINALIZER}"]`);
  // Second precision, as the API server writes startedAt.
  const stoppedAt = Math.floor(Date.now() / 1000) * 1000;
  await nodeControl(env, M04, 'stop');
  // From the cluster's view the node is gone (the controller manager marks it after its grace period).
  await until(
    'm04 is not Ready',
    5 * MINUTES,
    () => k(['get', 'node', M04, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}']),
    (s) => s !== 'True' && s !== '',
  );
  const ps = await sh('ps', ['-eo', 'args']);
  t.deepEqual(
    ps.split('\n').filter((l) => /\/nodes\/m04\/(kubelet\.yaml|containerd\.toml)/.test(l)),
    [],
    'no kubelet or containerd of m04 runs',
  );
  t.deepEqual(await markers(M04), marked[M04], 'the disk dir survives the power-off');

  await nodeControl(env, M04, 'start');
  t.deepEqual(await readSysctls(), before, 'kernel settings restored after the kubelet started again');
  // The agent's container was killed with the node: a new one must run, started after the power-off.
  await until(
    'a new agent container runs on m04',
    5 * MINUTES,
    async () => {
      const [p] = await agentOn(M04);
      const started = p ? await k(['-n', NS, 'get', 'pod', p.name, '-o', 'jsonpath={.status.containerStatuses[0].state.running.startedAt}']) : '';
      return { ready: p?.ready, started: Date.parse(started) };
    },
    (s) => s.ready === 'True' && s.started >= stoppedAt - 1000,
  );
  t.deepEqual(await reservations(), held, 'NodeDisks as before');
  t.deepEqual(await allMarkers(), marked, 'markers intact');
  await reserve(M04, 'disk3');
  await release(M04, 'disk3');
});

test.serial("from inside the agent pod on m02, its node-bound token may not touch m03's NodeDisks, only its own", async (t) => {
  t.timeout(5 * MINUTES);
  const [agent] = await agentOn(M02);
  // Calls the API server as the pod does: its kubelet-projected token, the cluster CA, the service host.
  // Dry-run writes: authorization and admission judge them fully, nothing is stored.
  const script = `
    const https = require('node:https'); const fs = require('node:fs');
    const dir = '/var/run/secrets/kubernetes.io/serviceaccount';
    const token = fs.readFileSync(dir + '/token', 'utf8'); const ca = fs.readFileSync(dir + '/ca.crt');
    const call = (method, path, body, type) => new Promise((resolve, reject) => {
      const req = https.request({ host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT, ca, method, path,
        headers: { authorization: 'Bearer ' + token, 'content-type': type || 'application/json' } }, (res) => {
        let text = ''; res.on('data', (d) => (text += d)); res.on('end', () => resolve({ status: res.statusCode, message: (() => { try { return JSON.parse(text).message || ''; } catch { return text; } })() }));
      });
      req.on('error', reject); req.end(body);
    });
    const nd = (name) => '/apis/localtest.example.com/v1alpha1/nodedisks/' + name;
    const patch = JSON.stringify({ status: { node: { message: 'e2e token probe' } } });
    (async () => {
      const out = {
        otherStatus: await call('PATCH', nd('${ndName(M03, 'disk1')}') + '/status?dryRun=All', patch, 'application/merge-patch+json'),
        ownStatus: await call('PATCH', nd('${ndName(M02, 'disk1')}') + '/status?dryRun=All', patch, 'application/merge-patch+json'),
        otherFinalizer: await call('PATCH', nd('${ndName(M03, 'disk1')}') + '?dryRun=All', JSON.stringify({ metadata: { finalizers: ['${FINALIZER}'] } }), 'application/merge-patch+json'),
        otherDelete: await call('DELETE', nd('${ndName(M03, 'disk1')}') + '?dryRun=All'),
        ownDelete: await call('DELETE', nd('${ndName(M02, 'disk1')}') + '?dryRun=All'),
      };
      process.stdout.write(JSON.stringify(out));
    })().catch((e) => { console.error(e); process.exit(1); });`;
  const r = JSON.parse(await nodeIn(agent!.name, script)) as Record<string, { status: number; message: string }>;
  t.is(r.otherStatus!.status, 403, r.otherStatus!.message);
  t.regex(r.otherStatus!.message, /the agent of node node-disks-dev-m02 may not write NodeDisks of node node-disks-dev-m03/);
  t.is(r.otherFinalizer!.status, 403, r.otherFinalizer!.message);
  t.is(r.ownStatus!.status, 200, r.ownStatus!.message);
  // The agent never deletes NodeDisks (no delete in its ClusterRole): refused for any node.
  t.is(r.otherDelete!.status, 403);
  t.is(r.ownDelete!.status, 403);
});

async function inContainer(t: ExecutionContext, pod: string): Promise<{ uid: number; gid: number; rootWrite: string; tmpWrite: string }> {
  const script = `const fs = require('node:fs'); const tryWrite = (p) => { try { fs.writeFileSync(p, 'x'); return 'written'; } catch (e) { return e.code; } };
    process.stdout.write(JSON.stringify({ uid: process.getuid(), gid: process.getgid(), rootWrite: tryWrite('/e2e-probe'), tmpWrite: tryWrite('/tmp/e2e-probe') }));`;
  const r = JSON.parse(await nodeIn(pod, script)) as { uid: number; gid: number; rootWrite: string; tmpWrite: string };
  t.log(pod, r);
  return r;
}

test.serial('the running containers honour readOnlyRootFilesystem; the controller runs as 65532, the agent as root', async (t) => {
  t.timeout(5 * MINUTES);
  const [agent] = await agentOn(M02);
  const [operator] = await pods('node-disks-operator');
  const a = await inContainer(t, agent!.name);
  const o = await inContainer(t, operator!.name);
  t.like(a, { uid: 0, gid: 0, rootWrite: 'EROFS', tmpWrite: 'EROFS' });
  t.like(o, { uid: 65532, gid: 65532, rootWrite: 'EROFS', tmpWrite: 'EROFS' });
});

test.serial('Ctrl-C tears the cluster down and leaves the host as found', async (t) => {
  t.timeout(5 * MINUTES);
  await interruptAndCheckTornDown(t, cluster.run()!, before);
});
