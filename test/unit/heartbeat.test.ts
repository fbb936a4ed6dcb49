// The heartbeat Lease (ADR 24). The agent's renewal against nock: one PUT of the Lease it last wrote; a
// 409 is one GET and one more PUT; a 404 is a create. The controller's judgement on a fake clock: a Lease
// not renewed for its duration makes its node stale, a renewal makes it fresh, and only changes call back.
import test from 'ava';
import nock from 'nock';
import { heartbeatLeaseName, heartbeatLeaseNode } from '../../api/heartbeat-lease.ts';
import { leasesPath, type Lease } from '../../lib/kube/lease.ts';
import { NodeHeartbeat } from '../../agent/heartbeat.ts';
import { AgentHeartbeats } from '../../controller/agent-liveness.ts';
import { ApiError } from '../../lib/kube/errors.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import { createLogger } from '../../lib/runtime/log.ts';
import { tokenAccess } from './_access.ts';

const SERVER = 'https://k8s.heartbeat.test:6443';
const silent = createLogger('test', { write: () => {} });
const PATH = leasesPath('node-disks-system');
const NAME = 'node-disks-agent-node-a';
const rest = () => new RestClient(tokenAccess(SERVER, 't'), { timeoutMs: 2000 });
const beat = () => new NodeHeartbeat({ rest: rest(), namespace: 'node-disks-system', nodeName: 'node-a', periodMs: 60_000, log: silent });
const lease = (rv: string, holder = 'node-a'): Lease => ({
  apiVersion: 'coordination.k8s.io/v1',
  kind: 'Lease',
  metadata: { name: NAME, namespace: 'node-disks-system', resourceVersion: rv, labels: { 'localtest.example.com/agent-heartbeat': 'true' } },
  spec: { holderIdentity: holder, leaseDurationSeconds: 240, renewTime: '2026-01-01T00:00:00.000000Z' },
});
const conflict = { kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 409, reason: 'Conflict', message: 'the object has been modified' };
const notFound = { kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 404, reason: 'NotFound', message: `leases.coordination.k8s.io "${NAME}" not found` };

test.before(() => nock.disableNetConnect());
test.afterEach.always(() => nock.cleanAll());

test('the Lease is named for the node; a node name too long for it ends in a hash', (t) => {
  t.is(heartbeatLeaseName('node-a'), 'node-disks-agent-node-a');
  const long = `${'a'.repeat(230)}.b${'c'.repeat(20)}`; // 253 characters, a valid node name
  const name = heartbeatLeaseName(long);
  t.is(name.length, 253);
  t.true(name.startsWith(`node-disks-agent-${long.slice(0, 224)}`), 'the head the admission policy checks');
  t.regex(name, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/);
  t.not(heartbeatLeaseName(`${long.slice(0, -1)}d`), name, 'two long names sharing their head differ');
});

test.serial('no Lease yet (404): the agent creates it, holding it for its node, lasting four periods', async (t) => {
  let created: Lease | undefined;
  nock(SERVER)
    .get(`${PATH}/${NAME}`)
    .reply(404, notFound)
    .post(PATH, (b: Lease) => ((created = b), true))
    .reply(201, lease('1'));
  await beat().renew();
  t.like(created?.metadata, { name: NAME, namespace: 'node-disks-system', labels: { 'localtest.example.com/agent-heartbeat': 'true' } });
  t.like(created?.spec, { holderIdentity: 'node-a', leaseDurationSeconds: 240 });
  t.regex(created?.spec?.renewTime ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/, 'a MicroTime');
  t.true(nock.isDone());
});

test.serial('a renewal is one PUT of the Lease last written, carrying its resourceVersion', async (t) => {
  const puts: Lease[] = [];
  nock(SERVER)
    .get(`${PATH}/${NAME}`)
    .reply(200, lease('5'))
    .put(`${PATH}/${NAME}`, (b: Lease) => (puts.push(b), true))
    .reply(200, lease('6'))
    .put(`${PATH}/${NAME}`, (b: Lease) => (puts.push(b), true))
    .reply(200, lease('7'));
  const hb = beat();
  await hb.renew();
  await hb.renew();
  t.deepEqual(
    puts.map((p) => p.metadata.resourceVersion),
    ['5', '6'],
    'the second renewal needs no read',
  );
  t.true(nock.isDone());
});

test.serial('a renewal refused with 409 (written by someone else) reads the Lease again and renews that', async (t) => {
  const puts: Lease[] = [];
  nock(SERVER)
    .get(`${PATH}/${NAME}`)
    .reply(200, lease('5'))
    .put(`${PATH}/${NAME}`, (b: Lease) => (puts.push(b), true))
    .reply(409, conflict)
    .get(`${PATH}/${NAME}`)
    .reply(200, lease('9'))
    .put(`${PATH}/${NAME}`, (b: Lease) => (puts.push(b), true))
    .reply(200, lease('10'));
  await beat().renew();
  t.deepEqual(
    puts.map((p) => p.metadata.resourceVersion),
    ['5', '9'],
  );
  t.is(puts[1]?.spec?.holderIdentity, 'node-a');
  t.true(nock.isDone());
});

test.serial('a Lease deleted since the last renewal (404 on PUT) is created again', async (t) => {
  nock(SERVER).get(`${PATH}/${NAME}`).reply(200, lease('5')).put(`${PATH}/${NAME}`).reply(200, lease('6')).put(`${PATH}/${NAME}`).reply(404, notFound).post(PATH).reply(201, lease('1'));
  const hb = beat();
  await hb.renew();
  await hb.renew();
  t.true(nock.isDone());
});

test.serial('a renewal refused otherwise (403) fails, and the next one starts from a fresh read', async (t) => {
  nock(SERVER)
    .get(`${PATH}/${NAME}`)
    .reply(200, lease('5'))
    .put(`${PATH}/${NAME}`)
    .reply(403, { kind: 'Status', code: 403, reason: 'Forbidden', message: 'the agent of node node-a may renew only its own heartbeat Lease' })
    .get(`${PATH}/${NAME}`)
    .reply(200, lease('8'))
    .put(`${PATH}/${NAME}`)
    .reply(200, lease('9'));
  const hb = beat();
  const err = await t.throwsAsync(hb.renew(), { instanceOf: ApiError });
  t.is(err?.statusCode, 403);
  await hb.renew();
  t.true(nock.isDone());
});

function judge(wallNow: number) {
  const clock = { mono: 1_000_000, wall: wallNow };
  const changes: string[][] = [];
  const h = new AgentHeartbeats({
    rest: rest(),
    namespace: 'node-disks-system',
    log: silent,
    onChange: (nodes) => changes.push([...nodes].sort()),
    monotonic: () => clock.mono,
    wall: () => clock.wall,
  });
  return { h, clock, changes };
}
const at = (iso: string, holder = 'node-a', durationSeconds = 40): Lease => ({
  metadata: { name: heartbeatLeaseName(holder), resourceVersion: '1' },
  spec: { holderIdentity: holder, leaseDurationSeconds: durationSeconds, renewTime: iso },
});
const flush = () => new Promise((r) => setImmediate(r));

test.serial('a node is stale once its Lease has not been renewed for its duration, and fresh again when renewed', async (t) => {
  const { h, clock, changes } = judge(Date.parse('2026-01-01T00:00:10Z'));
  t.deepEqual(h.liveness('node-a'), { kind: 'none' }, 'no Lease: judged by lastSeenTime');
  h.observe(at('2026-01-01T00:00:00.000000Z')); // 10 s old at first sight
  await flush();
  t.deepEqual(changes, [['node-a']]);
  t.deepEqual(h.liveness('node-a'), { kind: 'alive' });
  clock.mono += 29_000; // 39 s after the renewal
  h.check('node-a');
  t.deepEqual(h.liveness('node-a'), { kind: 'alive' });
  clock.mono += 2000; // 41 s
  h.check('node-a');
  await flush();
  t.like(h.liveness('node-a'), { kind: 'stale', lease: 'node-disks-system/node-disks-agent-node-a', renewTime: '2026-01-01T00:00:00.000000Z', durationSeconds: 40 });
  t.deepEqual(changes, [['node-a'], ['node-a']]);
  // The same record seen again (a relist) changes nothing; a new renewTime is a renewal, timed locally.
  h.observe(at('2026-01-01T00:00:00.000000Z'));
  await flush();
  t.is(changes.length, 2);
  h.observe(at('2026-01-01T00:59:00.000000Z')); // a wall clock far off does not matter once running
  await flush();
  t.deepEqual(h.liveness('node-a'), { kind: 'alive' });
  t.deepEqual(changes, [['node-a'], ['node-a'], ['node-a']]);
  h.forget(at('2026-01-01T00:59:00.000000Z'));
  await flush();
  t.deepEqual(h.liveness('node-a'), { kind: 'none' });
  t.is(changes.length, 4);
});

test.serial('a Lease first seen already expired (a controller restart) is stale at once, with no change to report later', async (t) => {
  const { h, changes } = judge(Date.parse('2026-01-01T01:00:00Z'));
  h.observe(at('2026-01-01T00:00:00.000000Z', 'node-dead'));
  h.observe(at('2026-01-01T00:59:50.000000Z', 'node-live'));
  await flush();
  t.is(h.liveness('node-dead').kind, 'stale');
  t.is(h.liveness('node-live').kind, 'alive');
  t.deepEqual(changes, [['node-dead', 'node-live']], 'one batch');
});

test.serial("heartbeat ages for the metrics: from renewTime at first sight, then from when a renewal was seen, on the verdicts' clock; a deleted Lease has none", async (t) => {
  const { h, clock } = judge(Date.parse('2026-01-01T00:00:10Z'));
  t.deepEqual(h.ages(), []);
  h.observe(at('2026-01-01T00:00:00.000000Z', 'node-a')); // 10 s old at first sight
  h.observe(at('2026-01-01T00:00:07.500000Z', 'node-b'));
  clock.mono += 5000;
  t.deepEqual(h.ages(), [
    { node: 'node-a', ageSeconds: 15 },
    { node: 'node-b', ageSeconds: 7.5 },
  ]);
  // A renewal seen now is age 0, whatever its renewTime says (the wall clocks need not agree).
  h.observe(at('2026-01-01T00:59:00.000000Z', 'node-a'));
  clock.mono += 1000;
  t.deepEqual(
    h.ages().find((a) => a.node === 'node-a'),
    { node: 'node-a', ageSeconds: 1 },
  );
  h.forget(at('2026-01-01T00:59:00.000000Z', 'node-a'));
  t.deepEqual(
    h.ages().map((a) => a.node),
    ['node-b'],
  );
  await flush();
});

test.serial("the Lease is owned by its Node once the agent knows the Node's UID; before that, it keeps the owner it had", async (t) => {
  const sent: Lease[] = [];
  let uid: string | undefined;
  const b = new NodeHeartbeat({ rest: rest(), namespace: 'node-disks-system', nodeName: 'node-a', periodMs: 60_000, log: silent, nodeUID: () => uid });
  const owned = { ...lease('1'), metadata: { ...lease('1').metadata, ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: 'node-a', uid: 'uid-old' }] } };
  nock(SERVER)
    .get(`${PATH}/${NAME}`)
    .reply(200, owned)
    .put(`${PATH}/${NAME}`, (l: Lease) => (sent.push(l), true))
    .times(2)
    .reply(200, owned);
  await b.renew();
  uid = 'uid-new';
  await b.renew();
  t.deepEqual(sent[0]?.metadata.ownerReferences, [{ apiVersion: 'v1', kind: 'Node', name: 'node-a', uid: 'uid-old' }], 'unknown UID: the owner as it was');
  t.deepEqual(sent[1]?.metadata.ownerReferences, [{ apiVersion: 'v1', kind: 'Node', name: 'node-a', uid: 'uid-new' }], 'its Node of the moment, and only it');
  t.true(nock.isDone());
});

test.serial("only the Lease named for its holder speaks for it: zz or another node's Lease holding node-a makes node-a neither alive nor stale", async (t) => {
  const { h, changes } = judge(Date.parse('2026-01-01T00:00:10Z'));
  const fresh = at('2026-01-01T00:00:05.000000Z');
  h.observe({ ...fresh, metadata: { name: 'zz', resourceVersion: '1' } });
  h.observe({ ...fresh, metadata: { name: heartbeatLeaseName('node-b'), resourceVersion: '1' } });
  await flush();
  t.deepEqual(h.liveness('node-a'), { kind: 'none' });
  t.deepEqual(h.liveness('node-b'), { kind: 'none' });
  t.deepEqual(changes, []);
  t.is(heartbeatLeaseNode({ metadata: { name: 'zz' }, spec: { holderIdentity: 'node-a' } }), undefined);
  t.is(heartbeatLeaseNode(fresh), 'node-a');
  const long = `${'a'.repeat(240)}.b`;
  t.is(heartbeatLeaseNode({ metadata: { name: heartbeatLeaseName(long) }, spec: { holderIdentity: long } }), long, 'a long node name: the hashed Lease name');
});
