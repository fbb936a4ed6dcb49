// The claims binder's one decision per look (controller/claim-decision.ts), as a table: what the binder
// gathered about a claim, and the step it takes next (the write, and the event that goes with it).
import test from 'ava';
import { CLAIM_FINALIZER } from '../../api/constants.ts';
import type { NodeDiskClaim, NodeDiskClaimSpec, NodeDiskClaimStatus } from '../../api/v1alpha1/claim-types.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { type ClaimDecision, type ClaimFacts, decideClaim } from '../../controller/claim-decision.ts';
import { boundStatus, pendingStatus } from '../../controller/claim-phase.ts';
import { newClaim, newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { claimFacts } from './_claim-facts.ts';

const MiB = 2 ** 20;
const now = Date.parse('2026-12-04T10:00:00Z');
const agents = { now, staleAfterMs: 15 * 60_000, liveness: () => ({ kind: 'alive' as const }) };
const OWNER = 'claim:team-a/db';
const UID = 'uid-db';

function claim(o: { spec?: NodeDiskClaimSpec; status?: NodeDiskClaimStatus; finalizer?: boolean; deleted?: boolean; retain?: boolean } = {}): NodeDiskClaim {
  const c = newClaim('team-a', 'db', { ...o.spec, ...(o.retain ? { reclaimPolicy: 'Retain' as const } : {}) });
  c.metadata.uid = UID;
  c.metadata.generation = 1;
  if (o.finalizer !== false) c.metadata.finalizers = [CLAIM_FINALIZER];
  if (o.deleted) c.metadata.deletionTimestamp = '2026-12-04T09:59:00Z';
  if (o.status) c.status = o.status;
  return c;
}

function disk(id: string, o: { owner?: string; uid?: string | null; bytes?: number } = {}): NodeDisk {
  const nd = newNodeDisk('node-a', id);
  nd.metadata.resourceVersion = '5';
  if (o.owner) nd.spec.desired = { state: 'Reserved', owner: o.owner, ...(o.uid === null ? {} : { ownerUID: o.uid ?? UID }) };
  nd.status = { node: { phase: o.owner ? 'Reserved' : 'Available', capacityBytes: o.bytes ?? 64 * MiB, lastSeenTime: '2026-12-04T09:59:59Z' } };
  return nd;
}

const facts = (c: NodeDiskClaim, o: Partial<ClaimFacts> = {}): ClaimFacts => claimFacts(c, agents, o);

/** The decision in a few words: kind, the disk it names, the reason of its event, the status phase. */
function gist(d: ClaimDecision): string {
  const parts: string[] = [d.kind];
  if (d.kind !== 'keep' && d.kind !== 'pending' && d.kind !== 'lost' && 'disk' in d) parts.push(d.disk.metadata.name!.replace('node-disk-node-a-', ''));
  if (d.kind === 'finalizer') parts.push(d.present ? 'add' : 'remove');
  if (d.kind === 'release' && d.wipe) parts.push(`wipe ${d.wipe}`);
  if (d.kind === 'retry') parts.push(`${d.afterMs}ms`);
  if ('status' in d) parts.push(...(d.status.diskName ? [d.status.diskName.replace('node-disk-node-a-', '')] : []), d.status.phase ?? '');
  if ('event' in d && d.event) parts.push(`event ${d.event.reason}`);
  if ('noDiskFits' in d && d.noDiskFits) parts.push('no disk fits');
  return parts.join(' ');
}

const held = disk('disk1', { owner: OWNER });
const bound = () => boundStatus(claim(), held, agents, new Date(now - 60_000));

const TABLE: [string, ClaimFacts, string][] = [
  ['a claim the controller has not seen gets its finalizer first', facts(claim({ finalizer: false })), 'finalizer add'],
  ['a deleted claim without the finalizer is none of the binder’s business', facts(claim({ finalizer: false, deleted: true }), { reserved: [held] }), 'none'],
  ['a deleted claim (Delete) releases its disk with a wipe first', facts(claim({ deleted: true }), { reserved: [held] }), `release disk1 wipe claim-${UID} event Released`],
  ['a deleted claim holding nothing (any more) lets its finalizer go', facts(claim({ deleted: true })), 'finalizer remove'],
  ['a deleted claim (Retain) keeps its disk reserved and lets its finalizer go', facts(claim({ deleted: true, retain: true }), { reserved: [held] }), 'finalizer remove event Retained'],
  [
    'a reservation from before UIDs were recorded, named in the status, is adopted',
    facts(claim({ status: { phase: 'Bound', diskName: held.metadata.name! } }), { reserved: [disk('disk1', { owner: OWNER, uid: null })] }),
    'adopt disk1',
  ],
  [
    'a reservation without a UID that the status does not name is not this claim’s (created again under the name)',
    facts(claim(), { reserved: [disk('disk1', { owner: OWNER, uid: null })], candidates: [{ disk: disk('disk2'), busy: false }] }),
    'bind disk2',
  ],
  [
    'a reservation of another claim of the name (another UID) is not this one’s',
    facts(claim(), { reserved: [disk('disk1', { owner: OWNER, uid: 'old' })] }),
    'pending Pending event FailedBinding no disk fits',
  ],
  [
    'two disks held: the one the status does not name goes back, unwiped',
    facts(claim({ status: { phase: 'Bound', diskName: disk('disk2').metadata.name! } }), { reserved: [held, disk('disk2', { owner: OWNER })] }),
    'release disk1',
  ],
  ['the disk held: Bound, with the event the first time', facts(claim(), { reserved: [held] }), 'keep disk1 Bound event Bound'],
  ['the disk held, already Bound: Bound again, no event', facts(claim({ status: bound() }), { reserved: [held] }), 'keep disk1 Bound'],
  ['Bound and the disk gone: Lost, never moved', facts(claim({ status: bound() }), { candidates: [{ disk: disk('disk2'), busy: false }] }), 'lost disk1 Lost event Lost'],
  ['Bound and the disk another’s now: Lost', facts(claim({ status: bound() }), { named: disk('disk1', { owner: 'team-x' }) }), 'lost disk1 Lost event Lost'],
  [
    'a namespace limit that is not a number: Pending',
    facts(claim(), { limit: { kind: 'invalid', value: 'ten' }, candidates: [{ disk: disk('disk2'), busy: false }] }),
    'pending Pending event FailedBinding',
  ],
  [
    'a namespace at its limit: Pending',
    facts(claim(), { limit: { kind: 'max', disks: 2 }, heldInNamespace: 2, candidates: [{ disk: disk('disk2'), busy: false }] }),
    'pending Pending event FailedBinding',
  ],
  ['the last place of the namespace being taken by a bind under way: look again soon', facts(claim(), { limit: { kind: 'max', disks: 2 }, heldInNamespace: 1, bindsInFlight: 1 }), 'retry 100ms'],
  [
    'an earlier look found nothing for the same filters: Pending without looking again',
    facts(claim(), { knownNoFit: 'no free disk', candidates: [{ disk: disk('disk2'), busy: false }] }),
    'pending Pending event FailedBinding',
  ],
  [
    'the first candidate that fits is bound (candidates come smallest first)',
    facts(claim({ spec: { minCapacity: '32Mi' } }), {
      candidates: [
        { disk: disk('disk1', { owner: 'team-x' }), busy: false },
        { disk: disk('disk2', { bytes: MiB }), busy: false },
        { disk: disk('disk3'), busy: false },
        { disk: disk('disk4'), busy: false },
      ],
    }),
    'bind disk3',
  ],
  [
    'a fitting disk another worker is binding is passed over for the next',
    facts(claim(), {
      candidates: [
        { disk: disk('disk1'), busy: true },
        { disk: disk('disk2'), busy: false },
      ],
    }),
    'bind disk2',
  ],
  ['only fitting disks other workers are binding: look again soon, not Pending', facts(claim(), { candidates: [{ disk: disk('disk1'), busy: true }] }), 'retry 100ms'],
  ['nothing fits: Pending with the team’s line', facts(claim(), { candidates: [{ disk: disk('disk1', { owner: 'team-x' }), busy: false }] }), 'pending Pending event FailedBinding no disk fits'],
  ['Pending with the same line again: no event', facts(claim({ status: pendingStatus(claim(), 'no free disk', new Date(now - 60_000)) })), 'pending Pending no disk fits'],
];

for (const [name, f, want] of TABLE) {
  test(name, (t) => {
    t.is(gist(decideClaim(f)), want);
  });
}

test('the lines a team reads: its own filters only; the limit and the lost disk in words', (t) => {
  const pending = decideClaim(facts(claim({ spec: { minCapacity: '1Gi', nodeName: 'node-b' } })));
  t.is(pending.kind === 'pending' ? pending.status.message : '', 'no free disk of at least 1Gi on node node-b');
  const limited = decideClaim(facts(claim(), { limit: { kind: 'max', disks: 2 }, heldInNamespace: 2 }));
  t.regex(limited.kind === 'pending' ? (limited.status.message ?? '') : '', /^namespace team-a holds 2 of the 2 disks its annotation localtest\.example\.com\/max-disks allows/);
  const lost = decideClaim(facts(claim({ status: bound() }), { named: disk('disk1', { owner: 'team-x' }) }));
  t.is(lost.kind === 'lost' ? lost.status.message : '', 'NodeDisk node-disk-node-a-disk1 is no longer reserved for this claim (its owner is team-x)');
});

test('candidates are read only when a disk is to be bound', (t) => {
  let read = false;
  const candidates = {
    *[Symbol.iterator]() {
      read = true;
      yield { disk: disk('disk2'), busy: false };
    },
  };
  t.is(decideClaim(facts(claim({ status: bound() }), { reserved: [held], candidates })).kind, 'keep');
  t.false(read, 'a bound claim never reads them');
  t.is(decideClaim(facts(claim(), { candidates })).kind, 'bind');
  t.true(read);
});
