// Who a reservation is for, in the few kinds the programs and the dashboards tell apart.
import { AUTO_OWNER, CLAIM_OWNER_PREFIX, CONDITION, PV_OWNER_PREFIX, REASON_CLAIM_GONE, RECOVERED_OWNER } from './constants.ts';
import type { DesiredSpec, NodeDisk } from './v1alpha1/types.ts';

export const OWNER_KINDS = ['none', 'policy', 'claim', 'volume', 'recovered', 'manual'] as const;
export type OwnerKind = (typeof OWNER_KINDS)[number];

/** `none` for a disk not reserved; otherwise what the owner string says the reservation is. */
export function ownerKind(desired: DesiredSpec | undefined): OwnerKind {
  if ((desired?.state ?? 'Available') !== 'Reserved') return 'none';
  const owner = desired?.owner ?? '';
  if (owner === AUTO_OWNER) return 'policy';
  if (owner === RECOVERED_OWNER) return 'recovered';
  if (owner.startsWith(CLAIM_OWNER_PREFIX)) return 'claim';
  // A PersistentVolume's, provisioned by the CSI driver (ADR 39).
  if (owner.startsWith(PV_OWNER_PREFIX)) return 'volume';
  return 'manual';
}

/** The owner string of a reservation held for the claim `namespace/name`. */
export function claimOwner(namespace: string, name: string): string {
  return `${CLAIM_OWNER_PREFIX}${namespace}/${name}`;
}

/**
 * Whether the controller says, for the generation `nd` is at, that the claim its reservation is for is
 * gone (Accepted, reason ClaimGone): what the claims admission policy reads before it lets a person
 * release a claim's reservation.
 */
export function claimGone(nd: NodeDisk): boolean {
  return !!nd.status?.conditions?.some((c) => c.type === CONDITION.accepted && c.reason === REASON_CLAIM_GONE && c.observedGeneration === nd.metadata.generation);
}

/** The claim `namespace/name` a NodeDisk's owner names, if it is a claim's. */
export function claimKeyOfOwner(owner: string | undefined): string | undefined {
  return owner?.startsWith(CLAIM_OWNER_PREFIX) ? owner.slice(CLAIM_OWNER_PREFIX.length) : undefined;
}
