// The CRD's canonical-name rule (api/v1alpha1/name-rule.ts) agrees with nodeDiskName (api/names.ts) on
// ordinary, odd and long identities, as the real API server evaluates it (the only CEL that counts):
// each case is a server-side dry-run create, so nothing is stored and the table stays fast.
import test from 'ava';
import { API_VERSION, KIND } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import { ApiError } from '../../lib/kube/errors.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);

/** undefined when the API server accepts the name for this identity, else its 422 message. */
async function verdict(name: string, nodeName: string, diskID: string): Promise<string | undefined> {
  try {
    await nodeDisksFor(controlPlane().admin()).create(
      { apiVersion: API_VERSION, kind: KIND, metadata: { name }, spec: { nodeName, diskID, path: `/var/lib/node-disks-manager/disks/${diskID}.img` } },
      { fieldManager: 'test', dryRun: true },
    );
    return undefined;
  } catch (err) {
    if (err instanceof ApiError && err.statusCode === 422) return err.message;
    throw err;
  }
}

const identities: [string, string][] = [
  ['node-disks-dev-m02', 'disk1'],
  ['ip-10-0-0-1.ec2.internal', 'Data_Disk.2'],
  ['a--b---c.d', 'X__y._z'],
  ['n', 'disk_'],
  ['n', `d${'_'.repeat(127)}`],
  [`a${'-'.repeat(251)}b`, 'disk1'],
  [`${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(50)}`, 'disk1'],
  [`${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`, `Disk_${'9'.repeat(120)}_`],
];
// Dashes at every position of the cut, so the head's trailing dash is stripped as nodeDiskName does.
for (let i = 0; i < 12; i++) identities.push([`${'a'.repeat(230 + i)}-b`, 'disk-1-2-3-4-5-6-7-8-9']);

test('the API server accepts exactly the canonical name of each identity', async (t) => {
  for (const [node, disk] of identities) {
    const name = nodeDiskName(node, disk);
    t.is(await verdict(name, node, disk), undefined, `${node} ${disk} → ${name}`);
    const alias = `${name.slice(0, -1)}${name.endsWith('x') ? 'y' : 'x'}`.replace(/-[0-9a-f]{10}$/, '-zz');
    t.regex((await verdict(alias, node, disk)) ?? 'accepted', /metadata\.name must be /, `an alias of ${name}`);
    const other = name.length < 250 ? `${name}-x` : `z${name.slice(1)}`;
    t.regex((await verdict(other, node, disk)) ?? 'accepted', /metadata\.name must be /, `another alias of ${name}`);
  }
});

test('a shortened name is checked up to its hash: another head is refused, another hash cannot be told apart', async (t) => {
  const [node, disk] = identities[6]!;
  const name = nodeDiskName(node, disk);
  t.regex(name, /-[0-9a-f]{10}$/);
  t.is(await verdict(name.replace(/[0-9a-f]{10}$/, '0123456789'), node, disk), undefined, 'CEL cannot compute SHA-256: the agent reports this one');
  t.not(await verdict(`b${name.slice(1)}`, node, disk), undefined);
  t.not(await verdict(name.replace(/-[0-9a-f]{10}$/, '-0123456789a'), node, disk), undefined);
});

test('the refusal names the expected name and why', async (t) => {
  const message = await verdict('alias', 'node-a', 'Disk_1');
  t.true(
    message?.includes(
      'metadata.name must be node-disk-node-a-disk-1, the canonical name of spec.nodeName and spec.diskID (node-disk-<node>-<disk>, normalized); an alias of a disk would be acted on by nothing',
    ),
    message,
  );
});
