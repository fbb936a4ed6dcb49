// What the agent reports: the phase says what is on disk, after the fact.
import { FINALIZER, RECOVERED_OWNER } from '../api/constants.ts';
import type { DriveFacts, NodeStatus } from '../api/v1alpha1/types.ts';
import { sameHealth } from './disk-health.ts';
import type { DiskFile } from './discover.ts';
import { whyNotTaken } from './drive-scan.ts';
import type { MarkerState } from './markers.ts';

export interface Observation {
  /** The NodeDisk's name, for the commands the messages suggest. */
  name: string;
  file: DiskFile | undefined;
  marker: MarkerState;
  /** The error of the marker change just attempted, if it failed. */
  actionError?: string | undefined;
  hostPath: string;
  /** Capacity last reported, kept while the file is missing. */
  previousCapacity?: number | undefined;
  /** spec.desired.owner, to explain a reservation the agent recovered from the node. */
  owner?: string | undefined;
  /** The NodeDisk is being deleted and our finalizer holds it while a reservation exists. */
  deletionHeld?: boolean;
  /** Other files of the disk dir whose names make this NodeDisk's name: ignored, this disk keeps it. */
  rivals?: string[] | undefined;
  /** spec.desired says Reserved: a drive mounted by its holder is in use, not refused. */
  held?: boolean;
  /** A drive's facts last reported, kept while it is missing. */
  previousDrive?: DriveFacts | undefined;
}

export function observedStatus(o: Observation): Omit<NodeStatus, 'lastSeenTime'> {
  const status = baseStatus(o);
  const notes: string[] = [];
  if (o.owner === RECOVERED_OWNER && (status.phase === 'Reserved' || o.marker.kind === 'present')) {
    notes.push(
      `the reservation was found on the node with no NodeDisk holding it (its NodeDisk was deleted past its finalizer, or the CRD was reinstalled) and restored for owner ${RECOVERED_OWNER}: ` +
        `release it with kubectl nodedisks release ${o.name} --force, or hand it to its owner with kubectl nodedisks reserve ${o.name} --owner <owner> --force`,
    );
  }
  if (o.rivals?.length) {
    // Said here, on the disk that keeps the name, without changing its phase: the disk is fine, the newcomer is not.
    const files = o.rivals.join(', ');
    notes.push(
      `${o.rivals.length === 1 ? `file ${files} in the disk dir makes` : `files ${files} in the disk dir make`} this NodeDisk's name too and ${o.rivals.length === 1 ? 'is' : 'are'} ignored (this NodeDisk stays with ${o.hostPath}): rename ${o.rivals.length === 1 ? 'it' : 'them'}`,
    );
  }
  if (o.deletionHeld) {
    notes.push(`deletion is held by finalizer ${FINALIZER} until the reservation is released (kubectl nodedisks release ${o.name}); the marker stays meanwhile`);
  }
  return notes.length ? { ...status, message: [status.message, ...notes].join('; ') } : status;
}

function baseStatus(o: Observation): Omit<NodeStatus, 'lastSeenTime'> {
  if (!o.file) {
    return {
      phase: 'Missing',
      ...(o.previousCapacity !== undefined ? { capacityBytes: o.previousCapacity } : {}),
      ...(o.previousDrive !== undefined ? { drive: o.previousDrive } : {}),
      message: o.previousDrive
        ? `drive ${o.hostPath} is not on the node (pulled, failed, or no longer chosen by the agent's --drive); the NodeDisk and its reservation are kept`
        : `disk image ${o.hostPath} is not on the node; the NodeDisk and its reservation are kept`,
    };
  }
  const found = { ...o, file: o.file };
  const drive = o.file.drive;
  if (drive) {
    const status = imageOrDriveStatus(found);
    const why = whyNotTaken(drive, o.held === true);
    // Refusals keep a free drive from anyone; a reserved one is its holder's to use as it likes.
    if (why.length && status.phase === 'Available')
      return { ...status, phase: 'Error', message: `drive ${o.hostPath} (${drive.facts.device}) is not taken: ${why.join('; ')}`, drive: drive.facts };
    return { ...status, drive: drive.facts };
  }
  return imageOrDriveStatus(found);
}

function imageOrDriveStatus(o: Observation & { file: DiskFile }): Omit<NodeStatus, 'lastSeenTime'> {
  const capacityBytes = o.file.sizeBytes;
  const what = o.file.drive ? 'drive' : 'disk image';
  if (o.actionError) return { phase: 'Error', capacityBytes, message: o.actionError };
  if (o.marker.kind === 'invalid') return { phase: 'Error', capacityBytes, message: o.marker.reason };
  if (capacityBytes === 0) {
    // Not a usable disk: Error keeps it out of every "free disk" choice (the plugin offers only Available ones).
    return {
      phase: 'Error',
      capacityBytes,
      message: o.file.drive
        ? `${what} ${o.hostPath} reports no size (no medium?) and cannot be used${o.marker.kind === 'present' ? '; reservation marker present' : ''}`
        : `disk image ${o.hostPath} is empty (0 bytes) and cannot be used; give it a size (truncate -s <size> ${o.hostPath})${o.marker.kind === 'present' ? '; reservation marker present' : ''}`,
    };
  }
  if (o.marker.kind === 'present') return { phase: 'Reserved', capacityBytes, message: o.marker.wrong ? `reservation marker present, but it ${o.marker.wrong}` : 'reservation marker present' };
  return { phase: 'Available', capacityBytes, message: 'no reservation marker' };
}

/** Whether a report differs from what the NodeDisk already says (lastSeenTime aside). */
export function statusChanged(current: NodeStatus | undefined, next: Omit<NodeStatus, 'lastSeenTime'>): boolean {
  return (
    current?.phase !== next.phase ||
    current?.capacityBytes !== next.capacityBytes ||
    (current?.message ?? '') !== (next.message ?? '') ||
    (current?.nodeUID ?? '') !== (next.nodeUID ?? '') ||
    (current?.wipedFor ?? '') !== (next.wipedFor ?? '') ||
    (current?.holdsData === true) !== (next.holdsData === true) ||
    !sameDriveFacts(current?.drive, next.drive) ||
    !sameHealth(current?.health, next.health)
  );
}

/** Field by field: the API server gives an object's fields back in its own order, not the order written. */
function sameDriveFacts(a: DriveFacts | undefined, b: DriveFacts | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  const keys = new Set([...Object.keys(a), ...Object.keys(b)] as (keyof DriveFacts)[]);
  return [...keys].every((k) => a[k] === b[k]);
}
