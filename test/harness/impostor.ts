// The attacker of issue 30's identities item: a ServiceAccount named like the controller, in a namespace
// that is not the install's, whose namespace's accounts are NodeDisk editors through a group binding (a
// platform team binding `nodedisks-editor` to `system:serviceaccounts:<ns>`, say). The install's
// policies must hold it to the rules for people, since it is not the install's controller.
import type { ExecutionContext } from 'ava';
import { API_VERSION, FIELD_MANAGER, KIND } from '../../api/constants.ts';
import { NodeDiskClient } from '../../api/client.ts';
import { loadKubeConfig } from '../../lib/kube/kubeconfig.ts';
import { ApiError } from '../../lib/kube/errors.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import type { ControlPlane } from '../../hack/controlplane/controlplane.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';

const clientOf = (kubeconfig: string) => new NodeDiskClient(new RestClient(loadKubeConfig({ kubeconfig }), { timeoutMs: 30_000 }));

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ApiError) return err.message;
    throw err;
  }
  return 'allowed';
}

/**
 * Makes the impostor `x-node-disks-operator` of namespace `namespace`, a NodeDisk editor by a group
 * binding of `editorRole`, and shows it is held to people's rules: it may reserve a free disk for an owner
 * of its own (the editor role works), but neither release a disk the install's controller reserved for a
 * claim nor reserve a free disk for a claim (which would bind that claim to a disk of its choosing).
 */
export async function impostorIsHeldToPeoplesRules(t: ExecutionContext, cp: ControlPlane, o: { namespace: string; node: string; editorRole?: string }): Promise<void> {
  const impostor = await cp.namespacedUser(o.namespace, 'x-node-disks-operator', 'view');
  const who = await cp.kubectl(impostor, ['auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}']);
  t.is(who, `system:serviceaccount:${o.namespace}:x-node-disks-operator`);
  const role = o.editorRole ?? 'nodedisks-editor';
  await cp.kubectl(cp.admin(), ['create', 'clusterrolebinding', `${o.namespace}-editors`, `--clusterrole=${role}`, `--group=system:serviceaccounts:${o.namespace}`]);

  const agent = clientOf((await cp.agent(o.node)).kubeconfig);
  const [claimed, free, own] = ['disk1', 'disk2', 'disk3'].map((d) => newNodeDisk(o.node, d));
  for (const d of [claimed!, free!, own!]) await agent.create(d, { fieldManager: FIELD_MANAGER.agent });
  const meta = (d: typeof claimed) => ({ apiVersion: API_VERSION, kind: KIND, metadata: { name: d!.metadata.name! } }) as const;
  const asImpostor = { fieldManager: FIELD_MANAGER.plugin, force: true } as const;
  const client = clientOf(impostor.kubeconfig);
  await clientOf((await cp.controller()).kubeconfig).apply(
    { ...meta(claimed), spec: { desired: { state: 'Reserved', owner: 'claim:team-a/db', ownerUID: 'claim-uid' } } },
    { fieldManager: FIELD_MANAGER.controller, force: true },
  );

  const release = await refusal(client.apply({ ...meta(claimed), spec: { desired: { state: 'Available', owner: '' } } }, asImpostor));
  t.regex(release, /nodedisks-claims\.localtest\.example\.com.*reserved for NodeDiskClaim team-a\/db: only the controller changes that reservation/);
  const bind = await refusal(client.apply({ ...meta(free), spec: { desired: { state: 'Reserved', owner: 'claim:team-b/db' } } }, asImpostor));
  t.regex(bind, /nodedisks-claims\.localtest\.example\.com.*only the controller reserves a NodeDisk for a claim/);
  const admin = clientOf(cp.admin().kubeconfig);
  t.deepEqual((await admin.get(claimed!.metadata.name!)).spec.desired, { state: 'Reserved', owner: 'claim:team-a/db', ownerUID: 'claim-uid' });
  t.is((await admin.get(free!.metadata.name!)).spec.desired?.owner, undefined);
  const mine = await client.apply({ ...meta(own), spec: { desired: { state: 'Reserved', owner: 'x' } } }, asImpostor);
  t.is(mine.spec.desired?.owner, 'x', 'an editor: it may reserve a free disk for an owner of its own');
}
