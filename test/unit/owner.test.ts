import test from 'ava';
import { OWNER_PATTERN } from '../../api/constants.ts';
import { claimOwner, ownerKind } from '../../api/owner.ts';

test('ownerKind tells the label policy, claims, PersistentVolumes, recovered markers and people apart', (t) => {
  t.is(ownerKind(undefined), 'none');
  t.is(ownerKind({ state: 'Available', owner: 'auto' }), 'none');
  t.is(ownerKind({ state: 'Reserved', owner: 'auto' }), 'policy');
  t.is(ownerKind({ state: 'Reserved', owner: 'recovered-from-node' }), 'recovered');
  t.is(ownerKind({ state: 'Reserved', owner: claimOwner('team-db', 'data') }), 'claim');
  t.is(ownerKind({ state: 'Reserved', owner: 'pv:pvc-0b8e2f4c-5d1a-4c3e-9f6a-2b7d8e9f0a1b' }), 'volume');
  t.is(ownerKind({ state: 'Reserved', owner: 'team-db' }), 'manual');
  t.is(ownerKind({ state: 'Reserved' }), 'manual');
});

test('a claim owner names the namespace and the claim and passes the owner pattern', (t) => {
  const owner = claimOwner('team-db', 'data');
  t.is(owner, 'claim:team-db/data');
  t.regex(owner, new RegExp(OWNER_PATTERN));
});
