// HTTP error paths of the REST client, against nock: each becomes an error a caller can act on.
import test from 'ava';
import nock from 'nock';
import { NodeDiskClient, NODEDISKS_PATH } from '../../api/client.ts';
import { ApiError, isRetryable, TransportError } from '../../lib/kube/errors.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import { tokenAccess } from './_access.ts';

const SERVER = 'https://k8s.unit.test:6443';

function client(timeoutMs = 0): NodeDiskClient {
  return new NodeDiskClient(new RestClient(tokenAccess(SERVER, 'secret-token'), { timeoutMs }));
}

test.before(() => nock.disableNetConnect());
test.afterEach.always(() => nock.cleanAll());
test.after.always(() => nock.enableNetConnect());

const status = (code: number, reason: string, message: string, details?: object) => ({
  kind: 'Status',
  apiVersion: 'v1',
  status: 'Failure',
  code,
  reason,
  message,
  ...(details ? { details } : {}),
});

test.serial('403 carries the API server message and is not retried', async (t) => {
  nock(SERVER)
    .get(`${NODEDISKS_PATH}/x`)
    .matchHeader('authorization', 'Bearer secret-token')
    .reply(403, status(403, 'Forbidden', 'nodedisks.localtest.example.com "x" is forbidden: User "bob" cannot get resource'));
  const err = await t.throwsAsync(client().get('x'), { instanceOf: ApiError });
  t.is(err?.statusCode, 403);
  t.is(err?.reason, 'Forbidden');
  t.regex(err?.message ?? '', /User "bob" cannot get/);
  t.false(isRetryable(err));
});

test.serial('404 names what is missing', async (t) => {
  nock(SERVER)
    .get(`${NODEDISKS_PATH}/gone`)
    .reply(404, status(404, 'NotFound', 'nodedisks.localtest.example.com "gone" not found'));
  const err = await t.throwsAsync(client().get('gone'), { instanceOf: ApiError });
  t.is(err?.reason, 'NotFound');
});

test.serial('409 from server-side apply keeps the conflict causes (who owns the field)', async (t) => {
  nock(SERVER)
    .patch(`${NODEDISKS_PATH}/d1`)
    .query({ fieldManager: 'kubectl-nodedisks' })
    .matchHeader('content-type', 'application/apply-patch+yaml')
    .reply(
      409,
      status(409, 'Conflict', 'Apply failed with 1 conflict: conflict with "argocd-controller": .spec.desired.state', {
        causes: [{ reason: 'FieldManagerConflict', message: 'conflict with "argocd-controller"', field: '.spec.desired.state' }],
      }),
    );
  const err = await t.throwsAsync(
    client().apply({ apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDisk', metadata: { name: 'd1' }, spec: { desired: { state: 'Reserved' } } }, { fieldManager: 'kubectl-nodedisks' }),
    { instanceOf: ApiError },
  );
  t.is(err?.statusCode, 409);
  t.deepEqual(err?.status.details?.causes?.[0]?.field, '.spec.desired.state');
});

test.serial('410 on a continue token is reported as Expired', async (t) => {
  nock(SERVER)
    .get(NODEDISKS_PATH)
    .query({ limit: '2', continue: 'stale' })
    .reply(410, status(410, 'Expired', 'The provided continue parameter is too old'));
  const err = await t.throwsAsync(client().list({ limit: 2, continue: 'stale' }), { instanceOf: ApiError });
  t.is(err?.reason, 'Expired');
});

test.serial('429 on a write exposes Retry-After and is retryable', async (t) => {
  nock(SERVER)
    .post(NODEDISKS_PATH)
    .query(true)
    .reply(429, status(429, 'TooManyRequests', 'too many requests'), { 'Retry-After': '7' });
  const err = await t.throwsAsync(
    client().create({ apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDisk', metadata: { name: 'a' }, spec: { nodeName: 'n', diskID: 'a', path: '/d/a.img' } }, { fieldManager: 'x' }),
    { instanceOf: ApiError },
  );
  t.is(err?.retryAfterSeconds, 7);
  t.true(isRetryable(err));
});

test.serial('429 on a read is retried after Retry-After', async (t) => {
  nock(SERVER)
    .get(NODEDISKS_PATH)
    .reply(429, status(429, 'TooManyRequests', 'too many requests'), { 'Retry-After': '1' })
    .get(NODEDISKS_PATH)
    .reply(200, { apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDiskList', metadata: {}, items: [] });
  const started = Date.now();
  const list = await client().list();
  t.deepEqual(list.items, []);
  t.true(Date.now() - started >= 900, 'waited for Retry-After');
});

test.serial('a non-JSON error body still gives a message', async (t) => {
  nock(SERVER).get(NODEDISKS_PATH).reply(502, 'Bad Gateway');
  const err = await t.throwsAsync(client().list(), { instanceOf: ApiError });
  t.is(err?.message, 'Bad Gateway');
  t.true(isRetryable(err));
});

test.serial('a request that gets no answer times out as a transport error', async (t) => {
  nock(SERVER).get(NODEDISKS_PATH).delay(2000).reply(200, { items: [] });
  const err = await t.throwsAsync(client(100).list(), { instanceOf: TransportError });
  t.regex(err?.message ?? '', /cannot reach the API server at https:\/\/k8s\.unit\.test:6443: request timed out after 100 ms/);
  t.true(isRetryable(err));
});

test.serial('paged lists follow continue tokens to the end', async (t) => {
  nock(SERVER)
    .get(NODEDISKS_PATH)
    .query({ limit: '1' })
    .reply(200, { apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDiskList', metadata: { continue: 'c1' }, items: [{ metadata: { name: 'a' } }] })
    .get(NODEDISKS_PATH)
    .query({ limit: '1', continue: 'c1' })
    .reply(200, { apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDiskList', metadata: {}, items: [{ metadata: { name: 'b' } }] });
  const names: string[] = [];
  for await (const page of client().listPages({ pageSize: 1 })) names.push(...page.items.map((i) => i.metadata.name ?? ''));
  t.deepEqual(names, ['a', 'b']);
});

test.serial('onError hears each refused request and each one without an answer, not one cancelled by its caller or a success', async (t) => {
  const heard: string[] = [];
  const rest = new RestClient(tokenAccess(SERVER, 'secret-token'), { timeoutMs: 100, onError: (verb, err) => heard.push(`${verb} ${err instanceof ApiError ? err.statusCode : err.name}`) });
  // Kept by with(), as the controller's term clients are made from its process's client.
  const c = new NodeDiskClient(rest.with({ userAgent: 'x' }));
  nock(SERVER)
    .get(NODEDISKS_PATH)
    .reply(200, { items: [] })
    .get(NODEDISKS_PATH)
    .reply(403, status(403, 'Forbidden', 'no'))
    .get(NODEDISKS_PATH)
    .delay(2000)
    .reply(200, { items: [] })
    .get(NODEDISKS_PATH)
    .delay(2000)
    .reply(200, { items: [] });
  await c.list();
  await t.throwsAsync(c.list(), { instanceOf: ApiError });
  await t.throwsAsync(c.list(), { instanceOf: TransportError });
  const cancelled = new AbortController();
  const pending = rest.request('GET', NODEDISKS_PATH, { signal: cancelled.signal, timeoutMs: 0 });
  cancelled.abort();
  await t.throwsAsync(pending);
  t.deepEqual(heard, ['GET 403', 'GET TransportError']);
});
