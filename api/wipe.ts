// Wiping a disk before it changes hands (docs/adr/0038-wipe-before-a-disk-changes-hands.md): a release may
// carry a wipe request (spec.desired.wipe, a token unique to it); the node agent wipes the image and
// reports the token back (status.node.wipedFor). Until the two agree the disk is free to nobody.
import { randomUUID } from 'node:crypto';
import type { NodeDisk } from './v1alpha1/types.ts';

/** The token of a wipe asked for and not yet reported done, or undefined. */
export function pendingWipe(nd: NodeDisk): string | undefined {
  const token = nd.spec.desired?.wipe;
  if (!token) return undefined;
  return nd.status?.node?.wipedFor === token ? undefined : token;
}

/** Whether the image may hold a previous reservation's bytes: reserved since it was last wiped, as its agent reports. */
export function holdsData(nd: NodeDisk): boolean {
  return nd.status?.node?.holdsData === true;
}

/** A fresh token for a wipe a person asks for (release --wipe, gitops release --wipe). */
export function newWipeToken(): string {
  return randomUUID();
}

/** The token the controller writes when a claim lets its disk go: the claim's UID, unique to that binding. */
export function claimWipeToken(claimUID: string | undefined): string {
  return claimUID ? `claim-${claimUID}` : newWipeToken();
}
