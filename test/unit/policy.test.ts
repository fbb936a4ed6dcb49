import test from 'ava';
import { decide } from '../../controller/policy.ts';
import type { DesiredSpec, NodeDisk } from '../../api/v1alpha1/types.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';

function disk(label: string | undefined, desired?: DesiredSpec): NodeDisk {
  const nd = newNodeDisk('node-a', 'disk1');
  if (label !== undefined) nd.metadata.labels = { ...nd.metadata.labels, 'localtest.example.com/auto-reserve': label };
  if (desired) nd.spec.desired = desired;
  return nd;
}

test('label true on an Available disk reserves it for auto', (t) => {
  const d = decide(disk('true', { state: 'Available' }));
  t.is(d.action, 'reserve');
  t.deepEqual(d.action === 'reserve' ? d.desired : undefined, { state: 'Reserved', owner: 'auto' });
});

test('label true on a disk with no desired yet reserves it', (t) => {
  t.is(decide(disk('true')).action, 'reserve');
});

test('label true on an auto reservation changes nothing', (t) => {
  t.deepEqual(decide(disk('true', { state: 'Reserved', owner: 'auto' })), { action: 'none' });
});

test('label true on somebody else’s reservation is refused with the owner named', (t) => {
  const d = decide(disk('true', { state: 'Reserved', owner: 'alice' }));
  t.is(d.action, 'none');
  t.true(d.note?.conflict);
  t.is(d.note?.reason, 'ReservedByOther');
  t.regex(d.note?.message ?? '', /owner "alice"/);
});

test('a reservation with no owner counts as manual', (t) => {
  const d = decide(disk('true', { state: 'Reserved' }));
  t.is(d.action, 'none');
  t.regex(d.note?.message ?? '', /manual reservation with no owner/);
});

test('label removed releases an auto reservation and clears the owner', (t) => {
  const d = decide(disk(undefined, { state: 'Reserved', owner: 'auto' }));
  t.is(d.action, 'release');
  t.deepEqual(d.action === 'release' ? d.desired : undefined, { state: 'Available' });
  t.regex(d.note?.message ?? '', /was removed/);
});

test('a label that is not "true" also releases an auto reservation', (t) => {
  const d = decide(disk('yes', { state: 'Reserved', owner: 'auto' }));
  t.is(d.action, 'release');
  t.regex(d.note?.message ?? '', /is "yes", not "true"/);
});

test('label removed never touches a manual reservation', (t) => {
  t.deepEqual(decide(disk(undefined, { state: 'Reserved', owner: 'alice' })), { action: 'none' });
});

test('an unknown label value on an Available disk is reported, not acted on', (t) => {
  const d = decide(disk('yes', { state: 'Available' }));
  t.is(d.action, 'none');
  t.is(d.note?.reason, 'InvalidLabelValue');
});

test('label "false" is simply "not reserved"', (t) => {
  t.deepEqual(decide(disk('false', { state: 'Available' })), { action: 'none' });
});
