// The label policy of docs/design.md, as a pure function of one NodeDisk:
// - label auto-reserve=true            → spec.desired = {Reserved, auto}
// - label absent or not "true", owner auto → spec.desired = {Available}, owner cleared
// - a reservation by anyone else is never changed; when the label asks for it, say why it had no effect;
// - a disk that may not be handed out (its node is gone) is not reserved by the label: say why.
import { ANNOTATION_WIPE_ON_RELEASE, AUTO_OWNER, AUTO_RESERVE_VALUE, LABEL_AUTO_RESERVE, WIPE_ON_RELEASE_VALUE } from '../api/constants.ts';
import type { DesiredSpec, NodeDisk } from '../api/v1alpha1/types.ts';

export type PolicyDecision = { action: 'none'; note?: PolicyNote } | { action: 'reserve'; desired: DesiredSpec; note: PolicyNote } | { action: 'release'; desired: DesiredSpec; note: PolicyNote };

export interface PolicyNote {
  /** CamelCase, for Events and conditions. */
  reason: string;
  message: string;
  /** The label asked for something the policy may not do. */
  conflict?: boolean;
}

/** Why a free disk may not be reserved by the label now, in CamelCase and in words ("node x is gone"). */
export interface Refusal {
  reason: string;
  message: string;
}

export function decide(nd: NodeDisk, refusal?: Refusal): PolicyDecision {
  const label = nd.metadata.labels?.[LABEL_AUTO_RESERVE];
  const wantsReservation = label === AUTO_RESERVE_VALUE;
  const state = nd.spec.desired?.state ?? 'Available';
  const owner = nd.spec.desired?.owner ?? '';

  if (wantsReservation) {
    if (state === 'Reserved' && owner === AUTO_OWNER) return { action: 'none' };
    if (state === 'Reserved') {
      const who = owner === '' ? 'a manual reservation with no owner' : `owner ${JSON.stringify(owner)}`;
      return {
        action: 'none',
        note: {
          reason: 'ReservedByOther',
          message: `label ${LABEL_AUTO_RESERVE}=true has no effect: the disk is already reserved by ${who}; release that reservation first`,
          conflict: true,
        },
      };
    }
    if (refusal) {
      return { action: 'none', note: { reason: refusal.reason, message: `label ${LABEL_AUTO_RESERVE}=true has no effect: ${refusal.message}`, conflict: true } };
    }
    return {
      action: 'reserve',
      desired: { state: 'Reserved', owner: AUTO_OWNER },
      note: { reason: 'AutoReserved', message: `label ${LABEL_AUTO_RESERVE}=true: reserved for owner ${AUTO_OWNER}` },
    };
  }

  if (state === 'Reserved' && owner === AUTO_OWNER) {
    const why = label === undefined ? 'was removed' : `is ${JSON.stringify(label)}, not "true"`;
    // The seed's release keeps the bytes; the annotation asks for a wipe, with a token unique to this
    // release (the version it is decided from), so the next owner never reads them (ADR 38).
    if (nd.metadata.annotations?.[ANNOTATION_WIPE_ON_RELEASE] === WIPE_ON_RELEASE_VALUE) {
      return {
        action: 'release',
        desired: { state: 'Available', wipe: `auto-${nd.metadata.resourceVersion ?? '0'}` },
        note: { reason: 'AutoReleased', message: `label ${LABEL_AUTO_RESERVE} ${why}: auto reservation released, to be wiped first (annotation ${ANNOTATION_WIPE_ON_RELEASE})` },
      };
    }
    return {
      action: 'release',
      desired: { state: 'Available' },
      note: { reason: 'AutoReleased', message: `label ${LABEL_AUTO_RESERVE} ${why}: auto reservation released` },
    };
  }
  if (label !== undefined && label !== 'false') {
    return {
      action: 'none',
      note: { reason: 'InvalidLabelValue', message: `label ${LABEL_AUTO_RESERVE}=${JSON.stringify(label)} is treated as not set: use "true" to reserve`, conflict: true },
    };
  }
  return { action: 'none' };
}
