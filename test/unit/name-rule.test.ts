// The CRD's canonical-name rule (api/v1alpha1/name-rule.ts) agrees with nodeDiskName (api/names.ts) on
// ordinary, odd and long identities. Evaluated by @bufbuild/cel with its strings extension, the functions
// the API server provides too; test/integration/contract.test.ts runs the same rule on the real API server.
import { isCelError, run } from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';
import test from 'ava';
import { nodeDiskName } from '../../api/names.ts';
import { canonicalNameRule } from '../../api/v1alpha1/name-rule.ts';

function evaluate(expr: string, name: string, nodeName: string, diskID: string): unknown {
  const out = run(expr, { self: { metadata: { name }, spec: { nodeName, diskID } } }, { funcs: strings });
  if (isCelError(out)) throw new Error(`CEL error: ${out.message}`);
  return out;
}
const accepts = (name: string, node: string, disk: string) => evaluate(canonicalNameRule.rule, name, node, disk) === true;

const identities: [string, string][] = [
  ['node-disks-dev-m02', 'disk1'],
  ['ip-10-0-0-1.ec2.internal', 'Data_Disk.2'],
  ['a--b---c.d', 'X__y..z'.replace('..', '._')],
  ['n', 'disk_'],
  ['n', `d${'_'.repeat(127)}`],
  [`a${'-'.repeat(251)}b`, 'disk1'],
  [`${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(50)}`, 'disk1'],
  [`${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`, `Disk_${'9'.repeat(120)}_`],
];
// Dashes at every position of the cut, so the head's trailing dash is stripped as nodeDiskName does.
for (let i = 0; i < 12; i++) identities.push([`${'a'.repeat(230 + i)}-b`, 'disk-1-2-3-4-5-6-7-8-9']);

test('the rule accepts exactly the canonical name of each identity', (t) => {
  for (const [node, disk] of identities) {
    const name = nodeDiskName(node, disk);
    t.true(accepts(name, node, disk), `${node} ${disk} → ${name}`);
    t.false(accepts(`${name.slice(0, -1)}${name.endsWith('x') ? 'y' : 'x'}`.replace(/-[0-9a-f]{10}$/, '-zz'), node, disk), `an alias of ${name}`);
    t.false(accepts(name.length < 250 ? `${name}-x` : `z${name.slice(1)}`, node, disk), `another alias of ${name}`);
  }
});

test('a shortened name is checked up to its hash: another head is refused, another hash cannot be told apart', (t) => {
  const [node, disk] = identities[6]!;
  const name = nodeDiskName(node, disk);
  t.regex(name, /-[0-9a-f]{10}$/);
  t.true(accepts(name.replace(/[0-9a-f]{10}$/, '0123456789'), node, disk), 'CEL cannot compute SHA-256: the agent reports this one');
  t.false(accepts(`b${name.slice(1)}`, node, disk));
  t.false(accepts(name.replace(/-[0-9a-f]{10}$/, '-0123456789a'), node, disk));
});

test('the message names the expected name', (t) => {
  const msg = evaluate(canonicalNameRule.messageExpression, 'alias', 'node-a', 'Disk_1');
  t.is(msg, "metadata.name must be node-disk-node-a-disk-1, the canonical name of spec.nodeName and spec.diskID (node-disk-<node>-<disk>, normalized); an alias of a disk would be acted on by nothing");
});
