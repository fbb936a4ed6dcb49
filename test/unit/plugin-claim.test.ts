// The pure parts of the plugin's claim commands (plugin/claim-model.ts, plugin/cmd/claims.ts): the selector and
// spec a command line means, the words of a claim's status, the PVC pointer for pods, the table rows, completion.
import test from 'ava';
import { load } from 'js-yaml';
import type { NodeDiskClaim } from '../../api/v1alpha1/claim-types.ts';
import { COMMANDS } from '../../plugin/cli.ts';
import { claimFromFlags, claimName, claimReason, claimUsable, describeClaim, parseLabelSelector, pvcPointer } from '../../plugin/claim-model.ts';
import { claimTableRows } from '../../plugin/cmd/claims.ts';
import { complete } from '../../plugin/cmd/completion.ts';
import type { CommandSpec } from '../../plugin/args.ts';
import { PluginError } from '../../plugin/errors.ts';

const claim = (status: NodeDiskClaim['status'], spec: NodeDiskClaim['spec'] = {}): NodeDiskClaim => ({
  apiVersion: 'localtest.example.com/v1alpha1',
  kind: 'NodeDiskClaim',
  metadata: { name: 'db', namespace: 'team-a', generation: 1 },
  spec,
  ...(status ? { status } : {}),
});
const BOUND: NodeDiskClaim['status'] = {
  phase: 'Bound',
  diskName: 'node-disk-node-a-disk1',
  nodeName: 'node-a',
  path: '/var/lib/node-disks-manager/disks/disk1.img',
  capacityBytes: 67108864,
  observedGeneration: 1,
  conditions: [
    { type: 'Bound', status: 'True', reason: 'Bound', message: '', lastTransitionTime: '2026-01-01T00:00:00Z' },
    { type: 'Ready', status: 'True', reason: 'MarkerOnNode', message: '', lastTransitionTime: '2026-01-01T00:00:00Z' },
  ],
};

const usage = (t: import('ava').ExecutionContext, fn: () => unknown, message: RegExp) => {
  const err = t.throws(fn, { instanceOf: PluginError, message });
  t.is(err?.exitCode, 2);
};

test('a kubectl label selector becomes the metav1.LabelSelector of the spec', (t) => {
  t.deepEqual(parseLabelSelector('tier=fast,zone==a'), { matchLabels: { tier: 'fast', zone: 'a' } });
  t.deepEqual(parseLabelSelector('tier in (fast, slow),zone notin (a),ssd,!hdd,team!=x'), {
    matchExpressions: [
      { key: 'tier', operator: 'In', values: ['fast', 'slow'] },
      { key: 'zone', operator: 'NotIn', values: ['a'] },
      { key: 'ssd', operator: 'Exists' },
      { key: 'hdd', operator: 'DoesNotExist' },
      { key: 'team', operator: 'NotIn', values: ['x'] },
    ],
  });
  t.deepEqual(parseLabelSelector('localtest.example.com/node=node-a'), { matchLabels: { 'localtest.example.com/node': 'node-a' } });
  usage(t, () => parseLabelSelector(''), /empty selector/);
  usage(t, () => parseLabelSelector('a in (b'), /cannot read "a in \(b"/);
  usage(t, () => parseLabelSelector('-bad=x'), /invalid label key "-bad"/);
  usage(t, () => parseLabelSelector('a=b c'), /cannot read/);
  usage(t, () => parseLabelSelector('a=x,a=y'), /a is required to equal two values/);
});

test('the claim of a command line: each flag its spec field, each bad value a usage error naming the flag', (t) => {
  t.deepEqual(claimFromFlags('ns', 'db', { node: 'n', 'min-capacity': '32Mi', selector: 'tier=fast', disk: 'd', 'reclaim-policy': 'Retain' }), {
    apiVersion: 'localtest.example.com/v1alpha1',
    kind: 'NodeDiskClaim',
    metadata: { name: 'db', namespace: 'ns' },
    spec: { nodeName: 'n', minCapacity: '32Mi', selector: { matchLabels: { tier: 'fast' } }, diskName: 'd', reclaimPolicy: 'Retain' },
  });
  t.deepEqual(claimFromFlags('ns', 'db', {}).spec, {});
  usage(t, () => claimFromFlags('ns', 'db', { 'min-capacity': '0' }), /--min-capacity must be a positive quantity/);
  usage(t, () => claimFromFlags('ns', 'db', { 'min-capacity': '32MB!' }), /--min-capacity/);
  usage(t, () => claimFromFlags('ns', 'db', { 'reclaim-policy': 'delete' }), /--reclaim-policy must be Delete or Retain/);
  usage(t, () => claimFromFlags('ns', 'db', { node: '' }), /--node: node name is empty/);
  usage(t, () => claimFromFlags('ns', 'db', { disk: '' }), /--disk needs a NodeDisk name/);
});

test('usable means Bound, Ready and observed; the reason line says what is missing', (t) => {
  t.true(claimUsable(claim(BOUND)));
  const notReady = { ...BOUND, conditions: [BOUND!.conditions![0]!, { ...BOUND!.conditions![1]!, status: 'False' as const, reason: 'MarkerPending', message: 'waiting for the marker' }] };
  t.false(claimUsable(claim(notReady)));
  t.is(claimReason(claim(notReady)), 'Bound to node-disk-node-a-disk1 on node-a, not Ready: waiting for the marker');
  t.false(claimUsable({ ...claim(BOUND), metadata: { name: 'db', namespace: 'team-a', generation: 2 } }), 'an older generation bound');
  t.is(claimReason(claim({ phase: 'Pending', message: '0/9 disks fit: 4 reserved' })), 'Pending: 0/9 disks fit: 4 reserved');
  t.regex(claimReason(claim(undefined)), /^Pending: the controller has not looked at this claim yet/);
  t.is(claimReason(claim({ phase: 'Lost', message: 'NodeDisk x is gone' })), 'Lost: NodeDisk x is gone');
});

test('a Bound and Ready claim is described by where its disk is and, for pods, a PersistentVolumeClaim of StorageClass nodedisks: no hostPath pod', (t) => {
  const text = describeClaim(claim(BOUND, { minCapacity: '32Mi' }));
  t.is(
    text.slice(0, text.indexOf('\n\n') + 1),
    [
      'db (namespace team-a)',
      '  Asks:     at least 32Mi, reclaim policy Delete',
      '  Status:   Bound to node-disk-node-a-disk1 on node node-a, Ready',
      '  Capacity: 67108864',
      '  Path:     /var/lib/node-disks-manager/disks/disk1.img',
      '',
    ].join('\n'),
  );
  // Nothing of the old pod snippet: no hostPath, no node affinity, no pod spec to paste.
  t.notRegex(text, /hostPath|nodeAffinity|matchFields|Pod spec|mountPath/);
  // The pointer is a PVC kubectl create -f takes, asking for what the claim asked.
  const pointer = text.slice(text.indexOf('\n\n') + 2);
  t.regex(pointer, /^# Pods do not mount a claim's disk\. A pod gets a node-local disk through a PersistentVolumeClaim of\n# StorageClass nodedisks:/);
  t.deepEqual(load(pointer), {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'data', namespace: 'team-a' },
    spec: { storageClassName: 'nodedisks', accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '32Mi' } } },
  });
  t.regex(pointer, /\n# and in the pod: volumes: \[\{name: data, persistentVolumeClaim: \{claimName: data\}\}\]\n$/);
  // A claim that asked no size: the PVC asks for the size of the disk the claim got, exactly, as a string.
  const sizes = (status: NodeDiskClaim['status']) => (load(pvcPointer(claim(status))) as { spec: { resources: { requests: { storage: unknown } } } }).spec.resources.requests.storage;
  t.is(sizes(BOUND), '64Mi');
  t.is(sizes({ ...BOUND, capacityBytes: 1000 }), '1000', 'a number of bytes stays a string');
  t.is(sizes({ ...BOUND, capacityBytes: 3 * 2 ** 30 + 2 ** 20 }), '3073Mi');
  // Not usable: no pointer either, only the reason.
  t.notRegex(describeClaim(claim({ phase: 'Pending', message: 'm' })), /PersistentVolumeClaim|hostPath/);
  const notReady = { ...BOUND, conditions: [BOUND!.conditions![0]!, { ...BOUND!.conditions![1]!, status: 'False' as const, reason: 'MarkerPending', message: 'waiting' }] };
  t.notRegex(describeClaim(claim(notReady)), /PersistentVolumeClaim/);
});

test('claim/NAME and the other kind prefixes kubectl takes name a claim; plain names do not', (t) => {
  for (const arg of ['claim/db', 'ndc/db', 'nodediskclaim/db', 'nodediskclaims.localtest.example.com/db']) t.is(claimName(arg), 'db', arg);
  t.is(claimName('node-disk-a-disk1'), undefined);
  t.is(claimName('nodedisk/db'), undefined);
});

test('table rows from the server Table: priority columns only with wide, NAMESPACE first with -A', (t) => {
  const page = {
    columnDefinitions: [{ name: 'Name' }, { name: 'Status' }, { name: 'Message', priority: 1 }],
    rows: [{ cells: ['db', 'Pending', '0/1 disks fit\nsecond line'], object: { metadata: { namespace: 'team-a', name: 'db' } } }],
  };
  t.deepEqual(claimTableRows([page], { wide: false, allNamespaces: false, noHeaders: false }), [
    ['NAME', 'STATUS'],
    ['db', 'Pending'],
  ]);
  t.deepEqual(claimTableRows([page], { wide: true, allNamespaces: true, noHeaders: false }), [
    ['NAMESPACE', 'NAME', 'STATUS', 'MESSAGE'],
    ['team-a', 'db', 'Pending', '0/1 disks fit...'],
  ]);
  t.deepEqual(claimTableRows([page, { ...page, rows: [{ cells: ['x', null, null] }] }], { wide: false, allNamespaces: false, noHeaders: true }), [
    ['db', 'Pending'],
    ['x', ''],
  ]);
  t.deepEqual(claimTableRows([{ ...page, rows: [] }], { wide: false, allNamespaces: false, noHeaders: false }), []);
});

test('completion offers the claim commands, their -o values and reclaim policies', async (t) => {
  const ask = async (...words: string[]) => {
    let out = '';
    await complete({ out: (s) => void (out += s), err: () => {}, progress: () => {} }, words, COMMANDS as CommandSpec[]);
    return out.split('\n').filter((l) => l && !l.startsWith(':'));
  };
  t.deepEqual(await ask('cla'), ['claim', 'claims']);
  t.deepEqual(await ask('claim', 'db', '--reclaim-policy', ''), ['Delete', 'Retain']);
  t.deepEqual(await ask('claim', 'db', '-o', ''), ['name', 'yaml', 'json']);
  t.deepEqual(await ask('claims', '-o', ''), ['wide', 'name', 'yaml', 'json']);
  t.true((await ask('claim', 'db', '--')).includes('--min-capacity'));
});
