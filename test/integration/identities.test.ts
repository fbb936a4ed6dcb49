// The identities the programs have in production, each through its own kubeconfig, with RBAC on.
import test from 'ava';
import { FIELD_MANAGER, FINALIZER, LABEL_AUTO_RESERVE } from '../../api/constants.ts';
import { ApiError } from '../../lib/kube/errors.ts';
import type { RestClient } from '../../lib/kube/rest.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { nodeDisksFor, restFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);

interface UserInfo {
  username: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

async function whoami(rest: RestClient): Promise<UserInfo> {
  const review = await rest.request<{ status: { userInfo: UserInfo } }>('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
  });
  return review.status.userInfo;
}

test('the agent token is the agent ServiceAccount, bound to its Node', async (t) => {
  const agent = await controlPlane().agent('node-id-a');
  const user = await whoami(restFor(agent));
  t.is(user.username, 'system:serviceaccount:node-disks-system:node-disks-agent');
  t.deepEqual(user.extra?.['authentication.kubernetes.io/node-name'], ['node-id-a']);
  t.is(user.extra?.['authentication.kubernetes.io/node-uid']?.length, 1);
});

test('the controller token is the controller ServiceAccount', async (t) => {
  const user = await whoami(restFor(await controlPlane().controller()));
  t.is(user.username, 'system:serviceaccount:node-disks-system:node-disks-operator');
});

test('the admin is in system:masters', async (t) => {
  const user = await whoami(restFor(controlPlane().admin()));
  t.true(user.groups?.includes('system:masters'));
});

test('a user with no rights is refused, and the error names the verb and resource', async (t) => {
  const nobody = nodeDisksFor(await controlPlane().nobody());
  const err = await t.throwsAsync(nobody.list(), { instanceOf: ApiError });
  t.is(err?.statusCode, 403);
  t.regex(err?.message ?? '', /User "nodedisks-nobody" cannot list resource "nodedisks" in API group "localtest\.example\.com"/);
});

test('the agent creates and writes status; patching the resource itself is limited to its finalizer', async (t) => {
  const agent = nodeDisksFor(await controlPlane().agent('node-id-b'));
  const d = newNodeDisk('node-id-b', 'disk1');
  const name = d.metadata.name!;
  await agent.create(d, { fieldManager: FIELD_MANAGER.agent });
  const meta = { apiVersion: d.apiVersion, kind: d.kind, metadata: { name } } as const;
  const st = await agent.applyStatus({ ...meta, status: { node: { phase: 'Available', capacityBytes: 1 } } }, { fieldManager: FIELD_MANAGER.agent });
  t.is(st.status?.node?.phase, 'Available');
  // RBAC grants patch (for the finalizer, ADR 12); the admission policy refuses anything else.
  const err = await t.throwsAsync(agent.apply({ ...meta, spec: { desired: { state: 'Reserved', owner: 'x' } } }, { fieldManager: FIELD_MANAGER.agent, force: true }), {
    instanceOf: ApiError,
  });
  t.is(err?.statusCode, 403);
  t.regex(err?.message ?? '', /the agent may not change spec\.desired/);
  const protectedNd = await agent.mergePatch(name, { metadata: { finalizers: [FINALIZER] } }, { fieldManager: FIELD_MANAGER.agent });
  t.deepEqual(protectedNd.metadata.finalizers, [FINALIZER]);
});

test('RBAC lets the controller patch spec and status but not create NodeDisks', async (t) => {
  const cp = controlPlane();
  const d = newNodeDisk('node-id-c', 'disk1');
  await nodeDisksFor(cp.admin()).create(d, { fieldManager: FIELD_MANAGER.agent });
  // The controller reserves for owner auto as the label asks (its admission policy holds it to that).
  await nodeDisksFor(cp.admin()).mergePatch(d.metadata.name!, { metadata: { labels: { [LABEL_AUTO_RESERVE]: 'true' } } }, { fieldManager: FIELD_MANAGER.plugin });
  const controller = nodeDisksFor(await cp.controller());
  const meta = { apiVersion: d.apiVersion, kind: d.kind, metadata: { name: d.metadata.name! } } as const;
  const applied = await controller.apply({ ...meta, spec: { desired: { state: 'Reserved', owner: 'auto' } } }, { fieldManager: FIELD_MANAGER.controller, force: true });
  t.is(applied.spec.desired?.owner, 'auto');
  await controller.applyStatus({ ...meta, status: { controller: { accepted: true } } }, { fieldManager: FIELD_MANAGER.controller });
  const err = await t.throwsAsync(controller.create(newNodeDisk('node-id-c', 'disk2'), { fieldManager: FIELD_MANAGER.controller }), {
    instanceOf: ApiError,
  });
  t.is(err?.statusCode, 403);
});
