// What the claims binder does next for one claim, as one pure function of what it gathered: the claim, the
// disks reserved for its owner, its namespace's limit, and the candidates (the model is ./policy.ts).
// `Binder.reconcile` (./claim-binder.ts) gathers from its caches, asks `decideClaim` once, performs the one
// write the decision names and emits the event it names; a decision that leaves more to do (a new claim:
// its finalizer, then a disk, then its status) is followed by another gather and decision.
//
// The truth of a binding is the disk's owner and owner UID (docs/adr/0034-node-disk-claims.md): a NodeDisk
// reserved for `claim:<namespace>/<name>` with the claim's UID is that claim's, whatever its status says.
import { ANNOTATION_MAX_DISKS, CLAIM_FINALIZER } from '../api/constants.ts';
import { misfit, tenantPendingLine } from '../api/claim-fit.ts';
import type { AgentView } from '../api/free-disk.ts';
import { claimWipeToken } from '../api/wipe.ts';
import type { NodeDiskClaim, NodeDiskClaimStatus } from '../api/v1alpha1/claim-types.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import { boundStatus, lostStatus, pendingStatus } from './claim-phase.ts';
import type { DiskLimit } from './namespace-limits.ts';

export interface Candidate {
  /** As the cache has it now. */
  disk: NodeDisk;
  /** Another worker is reserving it right now. */
  busy: boolean;
}

export interface ClaimFacts {
  claim: NodeDiskClaim;
  /** `claim:<namespace>/<name>`. */
  owner: string;
  /** The disks reserved for the owner, as the cache has them, by name (this claim's or an earlier one's of the name). */
  reserved: NodeDisk[];
  /** The disk the claim's status names, as the cache has it: what a Lost claim says of it. */
  named: NodeDisk | undefined;
  limit: DiskLimit;
  /** Disks the namespace's claims hold now (retained ones too), and binds of its claims under way. */
  heldInNamespace: number;
  bindsInFlight: number;
  /** The Pending line an earlier look at the same filters found, while no disk or agent has changed since. */
  knownNoFit: string | undefined;
  /** The disks to try, best first (smallest that is big enough, then by name); read only when a disk is to be bound. */
  candidates: Iterable<Candidate>;
  agents: AgentView;
  now: Date;
}

export interface ClaimEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  action: string;
  note: string;
  /** The NodeDisk the event is also about. */
  disk?: NodeDisk;
}

export type ClaimDecision =
  /** Nothing to write. */
  | { kind: 'none' }
  /** Add the controller's finalizer (a claim it has not seen), or remove it (a deleted claim whose disks are let go or kept). */
  | { kind: 'finalizer'; present: boolean; event?: ClaimEvent }
  /** Record the claim's UID on a reservation made before UIDs were recorded: from then on it is this object's. */
  | { kind: 'adopt'; disk: NodeDisk }
  /** Give this disk back (wiped when `wipe`): the claim is deleted, or it holds a second disk. */
  | { kind: 'release'; disk: NodeDisk; why: string; wipe?: string; event?: ClaimEvent }
  /** Reserve this disk for the claim, conditional on the version it was chosen from. */
  | { kind: 'bind'; disk: NodeDisk }
  | StatusDecision
  /** Look again after this long: the disks that fit, or the namespace's last free places, are being bound by other workers. */
  | { kind: 'retry'; afterMs: number };

/**
 * The claim's status: Bound to the disk it keeps, Pending with the line its team reads, or Lost; written
 * only when it differs from what the claim has. `noDiskFits`: every candidate was looked at and none fit.
 */
export interface StatusDecision {
  kind: 'keep' | 'pending' | 'lost';
  status: NodeDiskClaimStatus;
  event?: ClaimEvent;
  noDiskFits?: boolean;
}

/** Whether `nd`, reserved for the claim's owner, is this claim's: its UID, or none recorded and the claim's status names it. */
export function holds(claim: NodeDiskClaim, nd: NodeDisk): boolean {
  const uid = nd.spec.desired?.ownerUID;
  if (uid) return uid === claim.metadata.uid;
  return claim.status?.diskName !== undefined && claim.status.diskName === nd.metadata.name;
}

/** The one next step for a claim. */
export function decideClaim(f: ClaimFacts): ClaimDecision {
  const { claim, owner } = f;
  const held = f.reserved.filter((nd) => nd.spec.desired?.state === 'Reserved' && nd.spec.desired.owner === owner && holds(claim, nd));
  const finalized = claim.metadata.finalizers?.includes(CLAIM_FINALIZER) ?? false;

  if (claim.metadata.deletionTimestamp) {
    if (!finalized) return { kind: 'none' };
    const first = held[0];
    if (claim.spec?.reclaimPolicy === 'Retain') {
      if (!first) return { kind: 'finalizer', present: false };
      const note = `claim deleted with reclaimPolicy Retain: NodeDisk ${first.metadata.name} on node ${first.spec.nodeName} stays reserved for ${owner}`;
      return { kind: 'finalizer', present: false, event: { type: 'Normal', reason: 'Retained', action: 'Retain', note, disk: first } };
    }
    // Delete means what it means for a PersistentVolume: the data goes before the disk is free again.
    if (!first) return { kind: 'finalizer', present: false };
    const note = `claim deleted: NodeDisk ${first.metadata.name} on node ${first.spec.nodeName} released; its node agent wipes it before it is free again`;
    return {
      kind: 'release',
      disk: first,
      why: `claim ${claimKey(claim)} deleted`,
      wipe: claimWipeToken(claim.metadata.uid),
      event: { type: 'Normal', reason: 'Released', action: 'Release', note, disk: first },
    };
  }
  if (!finalized) return { kind: 'finalizer', present: true };
  const unrecorded = held.find((nd) => !nd.spec.desired?.ownerUID);
  if (unrecorded) return { kind: 'adopt', disk: unrecorded };
  // One disk per claim: a second one (a bind whose answer was lost, then tried again) goes back.
  if (held.length > 1) {
    const keep = held.find((nd) => nd.metadata.name === claim.status?.diskName) ?? held[0]!;
    const extra = held.find((nd) => nd !== keep)!;
    return { kind: 'release', disk: extra, why: `claim ${claimKey(claim)} holds ${keep.metadata.name} already` };
  }
  const was = claim.status;
  if (held.length === 1) return withEvent('keep', claim, boundStatus(claim, held[0]!, f.agents, f.now), held[0]);
  if (was?.phase === 'Bound' || was?.phase === 'Lost') {
    // A binding is never moved to another disk by itself: the data is on the one it had.
    const name = was.diskName ?? '';
    const why = f.named ? `NodeDisk ${name} is no longer reserved for this claim (its owner is ${f.named.spec.desired?.owner || 'none'})` : `NodeDisk ${name} is gone`;
    return withEvent('lost', claim, lostStatus(claim, why, f.now), f.named);
  }
  const ns = claim.metadata.namespace ?? '';
  if (f.limit.kind === 'invalid') {
    const line = `the annotation ${ANNOTATION_MAX_DISKS} of namespace ${ns} is ${JSON.stringify(f.limit.value)}, not a whole number: no disk is bound for its claims until a cluster admin corrects it`;
    return withEvent('pending', claim, pendingStatus(claim, line, f.now));
  }
  if (f.limit.kind === 'max') {
    if (f.heldInNamespace >= f.limit.disks) {
      const line = `namespace ${ns} holds ${f.heldInNamespace} of the ${f.limit.disks} disks its annotation ${ANNOTATION_MAX_DISKS} allows (retained disks count too): delete a claim, or ask a cluster admin to free a retained disk or raise the limit`;
      return withEvent('pending', claim, pendingStatus(claim, line, f.now));
    }
    // The last places are being taken by binds under way: their outcome decides this one.
    if (f.heldInNamespace + f.bindsInFlight >= f.limit.disks) return { kind: 'retry', afterMs: 100 };
  }
  if (f.knownNoFit !== undefined) return withEvent('pending', claim, pendingStatus(claim, f.knownNoFit, f.now));
  let busy = false;
  for (const c of f.candidates) {
    if (misfit(claim, c.disk, f.agents) !== undefined) continue;
    if (!c.busy) return { kind: 'bind', disk: c.disk };
    busy = true;
  }
  // Rather than write Pending for a moment while another worker's bind may fail.
  if (busy) return { kind: 'retry', afterMs: 100 };
  return { ...withEvent('pending', claim, pendingStatus(claim, tenantPendingLine(claim), f.now)), noDiskFits: true };
}

function claimKey(claim: NodeDiskClaim): string {
  return `${claim.metadata.namespace ?? ''}/${claim.metadata.name ?? ''}`;
}

/** A status decision with the event its change is worth, as the PV binder's on a PVC: a new phase, or a new Pending line. */
function withEvent(kind: 'keep' | 'pending' | 'lost', claim: NodeDiskClaim, now: NodeDiskClaimStatus, disk?: NodeDisk): StatusDecision {
  const was = claim.status;
  const on = disk ? { disk } : {};
  if (now.phase === 'Bound' && was?.phase !== 'Bound')
    return { kind, status: now, event: { type: 'Normal', reason: 'Bound', action: 'Bind', note: `bound to NodeDisk ${now.diskName} on node ${now.nodeName} (${now.path})`, ...on } };
  if (now.phase === 'Pending' && (was?.phase !== 'Pending' || was.message !== now.message))
    return { kind, status: now, event: { type: 'Warning', reason: 'FailedBinding', action: 'Bind', note: now.message ?? 'no disk fits' } };
  if (now.phase === 'Lost' && was?.phase !== 'Lost')
    return {
      kind,
      status: now,
      event: { type: 'Warning', reason: 'Lost', action: 'Observe', note: `${now.message}: the claim stays Lost until a person acts (it is never moved to another disk)`, ...on },
    };
  return { kind, status: now };
}
