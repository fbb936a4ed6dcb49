// The one stale-version check (lib/kube/errors.ts), fed the two 409s the real API server sends
// (test/fixtures/conflicts.ts, checked against it by test/integration/conflicts.test.ts) through the REST
// client: the controller decides again from a fresh read on the first, the plugin says "changed meanwhile";
// neither takes the second (a field owned by another manager) for a stale read.
import test from 'ava';
import nock from 'nock';
import { API_VERSION, FIELD_MANAGER, KIND } from '../../api/constants.ts';
import { type NodeDiskApply, NodeDiskClient, NODEDISKS_PATH } from '../../api/client.ts';
import { ApiError, isConflict, isFieldManagerConflict, isStaleVersionConflict } from '../../lib/kube/errors.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import { applyResolving, ChangedMeanwhile } from '../../plugin/reserve/ownership.ts';
import { FIELD_MANAGER_CONFLICT, forName, STALE_VERSION_CONFLICT } from '../fixtures/conflicts.ts';
import { tokenAccess } from './_access.ts';

const SERVER = 'https://k8s.conflicts.unit.test:6443';
const NAME = 'node-disk-n-d1';
const client = () => new NodeDiskClient(new RestClient(tokenAccess(SERVER, 'secret-token')));
const body: NodeDiskApply = { apiVersion: API_VERSION, kind: KIND, metadata: { name: NAME, resourceVersion: '7' }, spec: { desired: { state: 'Reserved' as const, owner: 'x' } } };

test.before(() => nock.disableNetConnect());
test.afterEach.always(() => nock.cleanAll());
test.after.always(() => nock.enableNetConnect());

async function refusedWith(status: object | string, code = 409): Promise<ApiError> {
  nock(SERVER).patch(`${NODEDISKS_PATH}/${NAME}`).query(true).reply(code, status);
  const err = await client()
    .apply(body, { fieldManager: FIELD_MANAGER.plugin })
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  if (!(err instanceof ApiError)) throw new Error(`expected an ApiError, got ${String(err)}`);
  return err;
}

test.serial("the API server's resourceVersion precondition 409 is a stale version", async (t) => {
  const err = await refusedWith(forName(STALE_VERSION_CONFLICT, NAME));
  t.true(isConflict(err));
  t.true(isStaleVersionConflict(err));
  t.false(isFieldManagerConflict(err));
});

test.serial("the API server's field manager 409 is a conflict, not a stale version", async (t) => {
  const err = await refusedWith(FIELD_MANAGER_CONFLICT);
  t.true(isConflict(err));
  t.true(isFieldManagerConflict(err));
  t.false(isStaleVersionConflict(err));
});

test.serial('a field manager 409 is recognised by its causes alone, and by the managers its message names alone', async (t) => {
  const causesOnly = await refusedWith({ ...FIELD_MANAGER_CONFLICT, message: 'Apply failed with 1 conflict' });
  t.true(isFieldManagerConflict(causesOnly));
  t.false(isStaleVersionConflict(causesOnly));
  const { details: _, ...messageOnly } = FIELD_MANAGER_CONFLICT;
  const named = await refusedWith(messageOnly);
  t.true(isFieldManagerConflict(named));
  t.false(isStaleVersionConflict(named));
});

test.serial("as client-go's IsConflict: reason Conflict, or a 409 of a reason it does not know; a 409 AlreadyExists is none", async (t) => {
  t.false(isConflict(await refusedWith({ kind: 'Status', code: 409, reason: 'AlreadyExists', message: 'already exists' })));
  t.true(isStaleVersionConflict(await refusedWith({ kind: 'Status', code: 409, reason: 'SomethingNew', message: 'x' })));
  t.true(isStaleVersionConflict(await refusedWith('not a Status body')));
  t.false(isConflict(await refusedWith({ kind: 'Status', code: 422, reason: 'Invalid', message: 'x' }, 422)));
  t.false(isConflict(new Error('409')));
});

test.serial('the plugin: a stale version is "changed meanwhile", never forced', async (t) => {
  nock(SERVER).patch(`${NODEDISKS_PATH}/${NAME}`).query(true).reply(409, forName(STALE_VERSION_CONFLICT, NAME));
  const err = await t.throwsAsync(applyResolving(client(), body, { fieldManager: FIELD_MANAGER.plugin, forceConflicts: false, dryRun: false }, '7'));
  t.true(err instanceof ChangedMeanwhile);
  t.true(nock.isDone());
});

test.serial("the plugin: the operator's field is taken over with force, still guarded, and a stale version then is changed meanwhile", async (t) => {
  const forced: string[] = [];
  nock(SERVER)
    .patch(`${NODEDISKS_PATH}/${NAME}`)
    .query((q) => q.force === undefined)
    .reply(409, FIELD_MANAGER_CONFLICT)
    .patch(`${NODEDISKS_PATH}/${NAME}`)
    .query((q) => (forced.push(String(q.force)), q.force === 'true'))
    .reply(409, forName(STALE_VERSION_CONFLICT, NAME));
  const err = await t.throwsAsync(applyResolving(client(), body, { fieldManager: FIELD_MANAGER.plugin, forceConflicts: false, dryRun: false }, '7'));
  t.true(err instanceof ChangedMeanwhile);
  t.deepEqual(forced, ['true']);
});
