// The reconciler's conditional writes against nock: every apply carries the resourceVersion it was
// decided from; a 409 for a stale version makes it decide again from a fresh GET (not from the cache),
// and a field ownership conflict or a persistent race is handed back to the queue.
import test from 'ava';
import nock from 'nock';
import { NodeDiskClient, NODEDISKS_PATH } from '../../api/client.ts';
import { LABEL_AUTO_RESERVE } from '../../api/constants.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { ApiError } from '../../lib/kube/errors.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import { createLogger } from '../../lib/runtime/log.ts';
import { EventRecorder } from '../../controller/events.ts';
import { controllerMetrics } from '../../controller/metrics.ts';
import { Reconciler } from '../../controller/reconciler.ts';
import { tokenAccess } from './_access.ts';

const SERVER = 'https://k8s.reconciler.test:6443';
const silent = createLogger('test', { write: () => {} });

function reconciler(): { r: Reconciler; metrics: ReturnType<typeof controllerMetrics> } {
  const rest = new RestClient(tokenAccess(SERVER, 't'), { timeoutMs: 2000 });
  const metrics = controllerMetrics(() => true);
  const r = new Reconciler({ client: new NodeDiskClient(rest), events: new EventRecorder(rest, 'unit', silent), log: silent, metrics, staleAfterMs: 60_000 });
  return { r, metrics };
}

const disk = (rv: string, desired: NodeDisk['spec']['desired'], labels: Record<string, string> = {}): NodeDisk => ({
  apiVersion: 'localtest.example.com/v1alpha1',
  kind: 'NodeDisk',
  metadata: { name: 'd1', resourceVersion: rv, generation: Number(rv), labels },
  spec: { nodeName: 'n', diskID: 'd1', path: '/d/d1.img', ...(desired ? { desired } : {}) },
});
const stale = {
  kind: 'Status',
  apiVersion: 'v1',
  status: 'Failure',
  code: 409,
  reason: 'Conflict',
  message: 'Operation cannot be fulfilled on nodedisks.localtest.example.com "d1": the object has been modified; please apply your changes to the latest version and try again',
};
type Body = { metadata: { resourceVersion?: string }; spec?: { desired?: unknown }; status?: { conditions?: { type: string; status: string; reason: string }[] } };

test.before(() => nock.disableNetConnect());
test.afterEach.always(() => nock.cleanAll());

test.serial('a reservation decided from a stale version is refused, and the fresh version (a manual reservation) is left alone', async (t) => {
  const labelled = { [LABEL_AUTO_RESERVE]: 'true' };
  const sent: Body[] = [];
  nock(SERVER)
    .patch(`${NODEDISKS_PATH}/d1`, (b: Body) => (sent.push(b), true))
    .query({ fieldManager: 'node-disks-operator', force: 'true' })
    .reply(409, stale)
    .get(`${NODEDISKS_PATH}/d1`)
    .reply(200, disk('6', { state: 'Reserved', owner: 'team-db' }, labelled))
    .patch(`${NODEDISKS_PATH}/d1/status`, (b: Body) => (sent.push(b), true))
    .query({ fieldManager: 'node-disks-operator' })
    .reply(200, disk('7', { state: 'Reserved', owner: 'team-db' }, labelled))
    .post('/apis/events.k8s.io/v1/namespaces/default/events')
    .reply(201, {});
  const { r, metrics } = reconciler();
  const result = await r.reconcile(disk('5', { state: 'Available' }, labelled));
  t.deepEqual(sent[0]?.metadata.resourceVersion, '5', 'the reservation is conditional on the version it was decided from');
  t.deepEqual(sent[0]?.spec?.desired, { state: 'Reserved', owner: 'auto' });
  t.is(sent.length, 2, 'after the fresh read, only status is written');
  t.is(sent[1]?.metadata.resourceVersion, '6', 'the status is conditional on the fresh version');
  const accepted = sent[1]?.status?.conditions?.find((c) => c.type === 'Accepted');
  t.like(accepted, { status: 'False', reason: 'ReservedByOther' });
  t.is(result.updated?.metadata.resourceVersion, '7');
  t.true(nock.isDone());
  t.regex(await metrics.registry.metrics(), /^nodedisks_controller_stale_writes_total 1$/m);
});

test.serial('a status decided from a stale version is written again from the fresh one', async (t) => {
  const sent: Body[] = [];
  nock(SERVER)
    .patch(`${NODEDISKS_PATH}/d1/status`, (b: Body) => (sent.push(b), true))
    .query(true)
    .reply(409, stale)
    .get(`${NODEDISKS_PATH}/d1`)
    .reply(200, disk('9', { state: 'Available' }))
    .patch(`${NODEDISKS_PATH}/d1/status`, (b: Body) => (sent.push(b), true))
    .query(true)
    .reply(200, disk('10', { state: 'Available' }));
  const { r } = reconciler();
  await r.reconcile(disk('8', { state: 'Available' }));
  t.deepEqual(
    sent.map((b) => b.metadata.resourceVersion),
    ['8', '9'],
  );
  t.true(nock.isDone());
});

test.serial('a field ownership conflict is not taken for a stale read: it goes back to the queue at once', async (t) => {
  nock(SERVER)
    .patch(`${NODEDISKS_PATH}/d1/status`)
    .query(true)
    .reply(409, { ...stale, message: 'Apply failed with 1 conflict: conflict with "someone"', details: { causes: [{ reason: 'FieldManagerConflict', field: '.status.controller' }] } });
  const { r } = reconciler();
  const err = await t.throwsAsync(r.reconcile(disk('8', { state: 'Available' })), { instanceOf: ApiError });
  t.regex(err?.message ?? '', /conflict with "someone"/);
  t.true(nock.isDone(), 'no GET: a fresh read would not help');
});

test.serial('a race that does not settle goes back to the queue after a few fresh reads', async (t) => {
  nock(SERVER)
    .patch(`${NODEDISKS_PATH}/d1/status`)
    .query(true)
    .times(5)
    .reply(409, stale)
    .get(`${NODEDISKS_PATH}/d1`)
    .times(4)
    .reply(200, disk('8', { state: 'Available' }));
  const { r } = reconciler();
  const err = await t.throwsAsync(r.reconcile(disk('8', { state: 'Available' })), { instanceOf: ApiError });
  t.is(err?.statusCode, 409);
  t.true(nock.isDone());
});

test.serial('a NodeDisk deleted meanwhile ends the reconcile quietly', async (t) => {
  nock(SERVER).patch(`${NODEDISKS_PATH}/d1/status`).query(true).reply(409, stale).get(`${NODEDISKS_PATH}/d1`).reply(404, { kind: 'Status', code: 404, reason: 'NotFound', message: 'not found' });
  const { r } = reconciler();
  t.deepEqual(await r.reconcile(disk('8', { state: 'Available' })), { deleted: true });
});

test.serial('a new NodeDisk its agent has not reported yet gets no status until the report or the grace ends', async (t) => {
  const rest = new RestClient(tokenAccess(SERVER, 't'), { timeoutMs: 2000 });
  const r = new Reconciler({
    client: new NodeDiskClient(rest),
    events: new EventRecorder(rest, 'unit', silent),
    log: silent,
    metrics: controllerMetrics(() => true),
    staleAfterMs: 60_000,
    firstReportGraceMs: 5000,
  });
  const created = (msAgo: number) => ({ ...disk('5', undefined), metadata: { ...disk('5', undefined).metadata, creationTimestamp: new Date(Date.now() - msAgo).toISOString() } });
  // nock allows no request here: nothing may be written for a disk created a second ago.
  const young = await r.reconcile(created(1000));
  t.false(young.wrote ?? false);
  t.true(young.requeueAfterMs !== undefined && young.requeueAfterMs > 3000 && young.requeueAfterMs <= 5000, `requeued after ${young.requeueAfterMs} ms`);
  // A clock far behind the API server's cannot hold the status back longer than the grace.
  t.true((await r.reconcile(created(-3_600_000))).requeueAfterMs! <= 5000);

  const sent: Body[] = [];
  nock(SERVER)
    .patch(`${NODEDISKS_PATH}/d1/status`, (b: Body) => (sent.push(b), true))
    .query(true)
    .reply(200, disk('6', undefined));
  const old = await r.reconcile(created(6000));
  t.true(old.wrote);
  t.like(
    sent[0]?.status?.conditions?.find((c) => c.type === 'Ready'),
    { status: 'Unknown', reason: 'WaitingForAgent' },
  );
});

test.serial("a disk turning failing whose volume's PV cannot be read (refused) still gets its status and its own Warning, and the reconcile succeeds", async (t) => {
  const failing: NodeDisk = {
    ...disk('3', { state: 'Reserved', owner: 'pv:pvc-8f0c5b9e-1d2a-4c3b-9e8f-7a6b5c4d3e2f', ownerUID: '8f0c5b9e-1d2a-4c3b-9e8f-7a6b5c4d3e2f' }),
    status: {
      node: {
        phase: 'Reserved',
        capacityBytes: 1024,
        lastSeenTime: new Date().toISOString(),
        health: {
          status: 'False',
          reason: 'FilesystemErrors',
          message: 'ext4 on the volume staged from it (loop3) has recorded 1 error since it was last checked',
          since: '2026-12-05T10:00:00Z',
        },
      },
    },
  };
  const sent: Body[] = [];
  const events: { reason?: string; type?: string; regarding?: { kind?: string } }[] = [];
  nock(SERVER)
    .patch(`${NODEDISKS_PATH}/d1/status`, (b: Body) => (sent.push(b), true))
    .query(true)
    .reply(200, { ...failing, metadata: { ...failing.metadata, resourceVersion: '4' } })
    .post('/apis/events.k8s.io/v1/namespaces/default/events', (b: (typeof events)[number]) => (events.push(b), true))
    .reply(201, {})
    .get('/api/v1/persistentvolumes/pvc-8f0c5b9e-1d2a-4c3b-9e8f-7a6b5c4d3e2f')
    .reply(403, { kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 403, reason: 'Forbidden', message: 'persistentvolumes is forbidden' });
  const { r } = reconciler();
  const result = await r.reconcile(failing);
  t.like(
    sent[0]?.status?.conditions?.find((c) => c.type === 'Healthy'),
    { status: 'False', reason: 'FilesystemErrors' },
  );
  t.deepEqual(
    events.map((e) => [e.type, e.reason, e.regarding?.kind]),
    [['Warning', 'DiskFailing', 'NodeDisk']],
  );
  t.true(result.wrote);
  t.true(nock.isDone());
});
