// The two 409s a writer meets, as the real API server sends them, against the one check both programs use
// (lib/kube/errors.ts): a resourceVersion precondition that no longer holds (stale: read again and decide
// again) and a server-side apply field ownership conflict (not stale: a fresh read does not cure it). The
// bodies must be those of test/fixtures/conflicts.ts, which the unit test feeds through nock.
import test from 'ava';
import type { NodeDiskApply } from '../../api/client.ts';
import { API_VERSION, FIELD_MANAGER, KIND } from '../../api/constants.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { ApiError, isConflict, isFieldManagerConflict, isStaleVersionConflict } from '../../lib/kube/errors.ts';
import { FIELD_MANAGER_CONFLICT, forName, STALE_VERSION_CONFLICT } from '../fixtures/conflicts.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);

async function refusal(p: Promise<unknown>): Promise<ApiError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof ApiError)) throw new Error(`expected an API error, got ${String(err)}`);
  return err;
}

test('an apply guarded by a resourceVersion the object has moved past: a stale-version 409', async (t) => {
  const client = nodeDisksFor(controlPlane().admin());
  const created = await client.create(newNodeDisk('conflicts-stale', 'disk1'), { fieldManager: FIELD_MANAGER.agent });
  const name = created.metadata.name!;
  await client.mergePatch(name, { metadata: { labels: { moved: 'on' } } }, { fieldManager: 'someone' });
  const err = await refusal(
    client.apply(
      { apiVersion: API_VERSION, kind: KIND, metadata: { name, resourceVersion: created.metadata.resourceVersion! }, spec: { desired: { state: 'Reserved', owner: 'x' } } },
      { fieldManager: FIELD_MANAGER.plugin, force: true },
    ),
  );
  t.is(err.statusCode, 409);
  t.deepEqual(err.status, forName(STALE_VERSION_CONFLICT, name));
  t.true(isConflict(err));
  t.true(isStaleVersionConflict(err));
  t.false(isFieldManagerConflict(err));
});

test('an apply of a field another manager owns, not forced: a field manager 409, not a stale version', async (t) => {
  const client = nodeDisksFor(controlPlane().admin());
  const created = await client.create(newNodeDisk('conflicts-owner', 'disk1'), { fieldManager: FIELD_MANAGER.agent });
  const name = created.metadata.name!;
  const desired = (owner: string): NodeDiskApply => ({ apiVersion: API_VERSION, kind: KIND, metadata: { name }, spec: { desired: { state: 'Reserved' as const, owner } } });
  // Forced: the CRD's default of spec.desired.state is the agent's, from the create.
  await client.apply(desired('alice'), { fieldManager: FIELD_MANAGER.controller, force: true });
  const err = await refusal(client.apply(desired('bob'), { fieldManager: FIELD_MANAGER.plugin }));
  t.is(err.statusCode, 409);
  t.deepEqual(err.status, forName(FIELD_MANAGER_CONFLICT, name));
  t.true(isConflict(err));
  t.true(isFieldManagerConflict(err));
  t.false(isStaleVersionConflict(err));
});
