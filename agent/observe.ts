// What the agent reports: the phase says what is on disk, after the fact.
import type { NodeStatus } from '../api/v1alpha1/types.ts';
import type { DiskFile } from './discover.ts';
import type { MarkerState } from './markers.ts';

export interface Observation {
  file: DiskFile | undefined;
  marker: MarkerState;
  /** The error of the marker change just attempted, if it failed. */
  actionError?: string | undefined;
  hostPath: string;
  /** Capacity last reported, kept while the file is missing. */
  previousCapacity?: number | undefined;
}

export function observedStatus(o: Observation): Omit<NodeStatus, 'lastSeenTime'> {
  if (!o.file) {
    return {
      phase: 'Missing',
      ...(o.previousCapacity !== undefined ? { capacityBytes: o.previousCapacity } : {}),
      message: `disk image ${o.hostPath} is not on the node; the NodeDisk and its reservation are kept`,
    };
  }
  const capacityBytes = o.file.sizeBytes;
  if (o.actionError) return { phase: 'Error', capacityBytes, message: o.actionError };
  if (o.marker.kind === 'invalid') return { phase: 'Error', capacityBytes, message: o.marker.reason };
  if (o.marker.kind === 'present') return { phase: 'Reserved', capacityBytes, message: 'reservation marker present' };
  return { phase: 'Available', capacityBytes, message: 'no reservation marker' };
}

/** Whether a report differs from what the NodeDisk already says (lastSeenTime aside). */
export function statusChanged(current: NodeStatus | undefined, next: Omit<NodeStatus, 'lastSeenTime'>): boolean {
  return current?.phase !== next.phase || current?.capacityBytes !== next.capacityBytes || (current?.message ?? '') !== (next.message ?? '');
}
