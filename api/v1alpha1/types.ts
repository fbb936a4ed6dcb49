// The NodeDisk resource, in exactly the seed's shape (see docs/design.md). These types describe
// the JSON the API server stores; the CRD schema in ./schema.ts is tested against them.

import type { Condition, ListMeta, ObjectMeta as KubeObjectMeta } from '../../lib/kube/types.ts';
import type { API_VERSION, KIND, LIST_KIND } from '../constants.ts';

export const DESIRED_STATES = ['Available', 'Reserved'] as const;
export type DesiredState = (typeof DESIRED_STATES)[number];

/** What the agent found on disk, after the fact. */
export const NODE_PHASES = ['Discovered', 'Available', 'Reserved', 'Missing', 'Error', 'Wiping'] as const;
export type NodePhase = (typeof NODE_PHASES)[number];

/** metav1.Condition, and the part of metav1.ManagedFieldsEntry the programs read (to name who owns a field). */
export type { Condition, ConditionStatus, ManagedFieldsEntry } from '../../lib/kube/types.ts';

/** The part of metav1.ObjectMeta a NodeDisk uses (it is cluster-scoped: no namespace). */
export type ObjectMeta = Omit<KubeObjectMeta, 'namespace'>;

export interface DesiredSpec {
  state?: DesiredState;
  owner?: string;
  /**
   * A wipe request, named by a token unique to it: the agent wipes the image and reports the token in
   * status.node.wipedFor; until then the disk is free to nobody (ADR 38).
   */
  wipe?: string;
  /** The UID of the object the reservation is for, when the owner names one (a claim's: `claim:<ns>/<name>`). */
  ownerUID?: string;
}

export interface NodeDiskSpec {
  /** Identity: set by the agent at creation, immutable. */
  nodeName: string;
  diskID: string;
  /** Host path of the `.img` file. */
  path: string;
  /** Intent, written by the controller (label policy) or by a person (manual reservation). */
  desired?: DesiredSpec;
}

export const DRIVE_MEDIA = ['nvme', 'ssd', 'hdd'] as const;
export type DriveMedia = (typeof DRIVE_MEDIA)[number];

/** What a drive reports about itself (ADR 44); absent for a disk image. */
export interface DriveFacts {
  /** The kernel's name for it now (`nvme0n1`, `sdb`): it may change at a reboot; the diskID does not. */
  device: string;
  model?: string;
  serial?: string;
  media: DriveMedia;
  /** nvme, sata, sas, scsi, usb, virtio or other. */
  transport: string;
  logicalBlockSize: number;
  physicalBlockSize: number;
}

/**
 * A disk's health as its node agent has seen it (agent/disk-health.ts): False when the kernel saw errors on
 * it, kept until a person reviews it; absent otherwise, as nothing read yet can tell a disk is healthy.
 */
export interface DiskHealth {
  status: 'True' | 'False' | 'Unknown';
  /** CamelCase, as a condition's: FilesystemErrors, IOErrors. */
  reason: string;
  message: string;
  /** When the failure was first seen (RFC 3339); absent when there is none. */
  since?: string;
}

/** Written by the agent only. */
export interface NodeStatus {
  phase?: NodePhase;
  capacityBytes?: number;
  lastSeenTime?: string;
  message?: string;
  /** The UID of the Node object of the machine whose agent reports this disk (ADR 35). */
  nodeUID?: string;
  /** The token of the last wipe request (spec.desired.wipe) the agent carried out (ADR 38). */
  wipedFor?: string;
  /** True when the image may hold a previous owner's bytes: reserved since it was last wiped (or found reserved). */
  holdsData?: boolean;
  /** The drive's facts, for a drive. */
  drive?: DriveFacts;
  /** The disk's health as the agent has seen it. */
  health?: DiskHealth;
}

/** Written by the controller only: the seed's two fields (its conditions are at status.conditions, ADR 20). */
export interface ControllerStatus {
  accepted?: boolean;
  observedGeneration?: number;
}

export interface NodeDiskStatus {
  /** The agent's report. */
  node?: NodeStatus;
  /** The controller's: the seed's fields. */
  controller?: ControllerStatus;
  /** The controller's: the generation its conditions describe, where kstatus and Flux look for it. */
  observedGeneration?: number;
  /** The controller's: Accepted and Ready, where kubectl wait, kstatus, Argo CD and Flux look for them. */
  conditions?: Condition[];
}

export interface NodeDisk {
  apiVersion: typeof API_VERSION;
  kind: typeof KIND;
  metadata: ObjectMeta;
  spec: NodeDiskSpec;
  status?: NodeDiskStatus;
}

export interface NodeDiskList {
  apiVersion: typeof API_VERSION;
  kind: typeof LIST_KIND;
  metadata: ListMeta;
  items: NodeDisk[];
}

export function isDesiredState(v: unknown): v is DesiredState {
  return typeof v === 'string' && (DESIRED_STATES as readonly string[]).includes(v);
}

export function isNodePhase(v: unknown): v is NodePhase {
  return typeof v === 'string' && (NODE_PHASES as readonly string[]).includes(v);
}
