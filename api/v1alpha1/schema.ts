// The NodeDisk CustomResourceDefinition, written once here. `npm run generate` renders it to
// kustomize/crd/bases/; test/unit/crd.test.ts fails when the committed YAML drifts from this object
// or when this schema and the TypeScript types in ./types.ts disagree on a field.

import {
  CRD_NAME,
  GROUP,
  KIND,
  LIST_KIND,
  MAX_DISK_ID_LENGTH,
  MAX_MESSAGE_LENGTH,
  MAX_NAME_LENGTH,
  MAX_OWNER_LENGTH,
  MAX_WIPE_TOKEN_LENGTH,
  OWNER_PATTERN,
  PLURAL,
  SHORT_NAME,
  SINGULAR,
  VERSION,
  WIPE_TOKEN_PATTERN,
} from '../constants.ts';
import { DISK_ID_PATTERN, DNS_SUBDOMAIN_PATTERN } from '../names.ts';
import { canonicalNameRule } from './name-rule.ts';
import { DESIRED_STATES, DRIVE_MEDIA, NODE_PHASES } from './types.ts';

/** The subset of OpenAPI v3 (structural schema) this CRD uses. */
export interface SchemaProps {
  type?: 'object' | 'string' | 'integer' | 'boolean' | 'array';
  description?: string;
  format?: string;
  pattern?: string;
  enum?: readonly string[];
  default?: unknown;
  minimum?: number;
  maxLength?: number;
  minLength?: number;
  maxItems?: number;
  required?: readonly string[];
  properties?: Record<string, SchemaProps>;
  items?: SchemaProps;
  additionalProperties?: SchemaProps;
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: readonly string[];
  'x-kubernetes-validations'?: readonly ({ rule: string; reason?: string; fieldPath?: string } & ({ message: string } | { messageExpression: string }))[];
}

export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'date' | 'boolean' | 'number';
  jsonPath: string;
  description?: string;
  priority?: number;
}

export interface CustomResourceDefinition {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: { name: string; labels?: Record<string, string> };
  spec: {
    group: string;
    names: { kind: string; listKind: string; plural: string; singular: string; shortNames: string[]; categories?: string[] };
    scope: 'Cluster' | 'Namespaced';
    versions: {
      name: string;
      served: boolean;
      storage: boolean;
      subresources: { status: Record<string, never> };
      additionalPrinterColumns: PrinterColumn[];
      selectableFields?: { jsonPath: string }[];
      schema: { openAPIV3Schema: SchemaProps };
    }[];
  };
}

const immutable = (field: string) => ({ rule: 'self == oldSelf', message: `${field} is immutable`, reason: 'FieldValueForbidden' });

/** metav1.Condition, as kubebuilder renders it (descriptions in our words). */
export const conditionSchema: SchemaProps = {
  type: 'object',
  description: "One aspect of the NodeDisk's state, in the standard Kubernetes condition shape (metav1.Condition).",
  required: ['type', 'status', 'lastTransitionTime', 'reason', 'message'],
  properties: {
    type: {
      type: 'string',
      description:
        'Which aspect this condition describes: Accepted (the controller accepted the request the labels and spec.desired make) or Ready (what the node agent reports matches spec.desired).',
      maxLength: 316,
      pattern: '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$',
    },
    status: { type: 'string', description: 'True, False, or Unknown (the controller cannot tell, for example when the node agent stopped reporting).', enum: ['True', 'False', 'Unknown'] },
    observedGeneration: {
      type: 'integer',
      description: 'The metadata.generation this condition was computed from; older than metadata.generation means the controller has not looked at the latest spec yet.',
      format: 'int64',
      minimum: 0,
    },
    lastTransitionTime: { type: 'string', description: 'When status last changed (not when the condition was last written).', format: 'date-time' },
    reason: {
      type: 'string',
      description:
        "Why, as one CamelCase word for programs: for Ready PhaseMatchesDesired, Progressing, Wiping, DiskMissing, AgentError, WaitingForAgent or AgentStale; for Accepted the policy's reason (ReservedByOther, InvalidLabelValue when False), or ClaimGone for a reservation whose NodeDiskClaim is gone (Released).",
      minLength: 1,
      maxLength: 1024,
      pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$',
    },
    message: { type: 'string', description: 'Why, in words for people.', maxLength: 32768 },
  },
};

export const nodeDiskSchema: SchemaProps = {
  type: 'object',
  description:
    'NodeDisk is one disk image file (<disk>.img) or one drive the admin chose (drive-<identity>) on one node, found by the node agent, and its reservation. Reserve it with the label localtest.example.com/auto-reserve=true (the controller sets spec.desired for owner auto) or by setting spec.desired yourself (kubectl nodedisks reserve --owner).',
  required: ['spec'],
  'x-kubernetes-validations': [canonicalNameRule],
  properties: {
    apiVersion: { type: 'string', description: 'The versioned schema of this object: localtest.example.com/v1alpha1.' },
    kind: { type: 'string', description: 'The kind of this object: NodeDisk.' },
    // The API server allows no description here (it publishes ObjectMeta's own).
    metadata: { type: 'object' },
    spec: {
      type: 'object',
      description: "The disk's identity, set by the node agent when it creates the NodeDisk and immutable, and spec.desired, the reservation wanted.",
      required: ['nodeName', 'diskID', 'path'],
      'x-kubernetes-validations': [
        {
          rule: "self.diskID.startsWith('drive-') ? self.path.startsWith('/') : self.path.endsWith('/' + self.diskID + '.img')",
          message: "spec.path must be the host path of the disk image, ending with '/<spec.diskID>.img' (or for a drive-<identity> disk, the absolute path of the drive's stable name)",
          fieldPath: '.path',
        },
      ],
      properties: {
        nodeName: {
          type: 'string',
          description: 'Name of the Node that has the disk image file. Immutable.',
          maxLength: MAX_NAME_LENGTH,
          pattern: DNS_SUBDOMAIN_PATTERN,
          'x-kubernetes-validations': [immutable('spec.nodeName')],
        },
        diskID: {
          type: 'string',
          description: "The disk image file's name without .img, unique on its node. Immutable.",
          maxLength: MAX_DISK_ID_LENGTH,
          pattern: DISK_ID_PATTERN,
          'x-kubernetes-validations': [{ rule: "!self.contains('..')", message: "spec.diskID must not contain '..'" }, immutable('spec.diskID')],
        },
        path: {
          type: 'string',
          description: 'Absolute path of the disk image file on the node (<disk dir>/<diskID>.img). Immutable.',
          maxLength: 4096,
          'x-kubernetes-validations': [
            { rule: "self.startsWith('/')", message: 'spec.path must be an absolute path' },
            {
              rule: "!self.split('/').exists(s, s == '..' || s == '.')",
              message: "spec.path must not contain '.' or '..' segments",
            },
            immutable('spec.path'),
          ],
        },
        desired: {
          type: 'object',
          description:
            'The reservation wanted. The controller writes it from the auto-reserve label (owner auto); a person or git writes it for any other owner, and the label policy then leaves it alone. The node agent makes the disk match: a <disk>.img.reserved marker file next to a Reserved disk.',
          default: {},
          'x-kubernetes-validations': [
            {
              rule: "(has(self.state) && self.state == 'Reserved') || !has(self.owner) || self.owner == ''",
              message: 'spec.desired.owner may be set only when spec.desired.state is Reserved',
              fieldPath: '.owner',
            },
          ],
          properties: {
            state: {
              type: 'string',
              description: 'Available (free for anyone to reserve; the default) or Reserved (held by spec.desired.owner).',
              enum: DESIRED_STATES,
              default: 'Available',
            },
            owner: {
              type: 'string',
              description: 'Who holds the reservation: "auto" for the label policy, any other name for a manual reservation. Set only when state is Reserved.',
              maxLength: MAX_OWNER_LENGTH,
              pattern: `^$|${OWNER_PATTERN}`,
            },
            wipe: {
              type: 'string',
              description:
                "A request to wipe the disk before anyone gets it again, named by a token unique to the request (a claim's UID, a UUID). Set with state Available (kubectl nodedisks release --wipe; the controller sets it when a claim with reclaimPolicy Delete lets its disk go). The node agent wipes the image and reports the token in status.node.wipedFor; until then the disk is handed out by nobody, and the API server refuses to reserve it or to drop the request.",
              maxLength: MAX_WIPE_TOKEN_LENGTH,
              pattern: WIPE_TOKEN_PATTERN,
            },
            ownerUID: {
              type: 'string',
              description:
                "The UID of the object the reservation is held for, when the owner names one: the controller writes the NodeDiskClaim's UID with owner claim:<namespace>/<name>, as a PersistentVolume's claimRef records its claim's. A claim created again under the same name is another object and does not get the disk. Cleared with the owner when the disk is released (the admission policies see to it for a claim's).",
              maxLength: 128,
              pattern: '^[A-Za-z0-9-]*$',
            },
          },
        },
      },
    },
    status: {
      type: 'object',
      description: 'What the node agent reports (status.node) and what the controller concludes (status.conditions, status.controller). Each part has one writer.',
      // Served as {} before anyone writes status, so that tools which bind the top-level fields as
      // variables (Flux's health expressions) can test status.conditions (ADR 20).
      default: {},
      properties: {
        node: {
          type: 'object',
          description: 'What the node agent last saw on the node. Written by the node agent only.',
          properties: {
            phase: {
              type: 'string',
              description:
                'The disk as found on the node: Discovered (just found), Available (no reservation marker), Reserved (marker present), Missing (the image file is gone; the NodeDisk and its reservation are kept), Error (see message), Wiping (the agent is wiping the image, as spec.desired.wipe asks).',
              enum: NODE_PHASES,
            },
            capacityBytes: { type: 'integer', description: 'Size of the disk image file in bytes.', format: 'int64', minimum: 0 },
            lastSeenTime: { type: 'string', description: 'When the node agent last reported this disk (at least every heartbeat, 5 minutes by default).', format: 'date-time' },
            message: { type: 'string', description: "The node agent's explanation of the phase, and what to do about an Error.", maxLength: MAX_MESSAGE_LENGTH },
            nodeUID: {
              type: 'string',
              description:
                "The UID of the Node object of the machine this disk was found on, as its agent's token names it. A Node of the same name with another UID is another machine: it does not inherit this NodeDisk's reservation.",
              maxLength: 128,
            },
            wipedFor: {
              type: 'string',
              description: 'The token of the last wipe request (spec.desired.wipe) the node agent carried out: equal to spec.desired.wipe once the disk is wiped and free again.',
              maxLength: MAX_WIPE_TOKEN_LENGTH,
            },
            holdsData: {
              type: 'boolean',
              description:
                'True when the image may hold the bytes of a previous reservation: it was reserved since it was last wiped, or the agent finds bytes written to it (allocated blocks) that no reservation it saw accounts for (one made and released while it was down, an image renamed from a disk that held a volume). A free disk that holds data is handed out as it is, never as a PV; kubectl nodedisks release --wipe wipes it first.',
            },
            drive: {
              type: 'object',
              description:
                'What a drive reports about itself, read from sysfs (absent for a disk image). Its diskID is drive-<identity>, from its WWN, EUI or serial: the kernel name here may change at a reboot, the NodeDisk does not.',
              required: ['device', 'media', 'transport', 'logicalBlockSize', 'physicalBlockSize'],
              properties: {
                device: { type: 'string', description: "The kernel's name for the drive now (nvme0n1, sdb).", maxLength: 64 },
                model: { type: 'string', description: 'The model the drive reports.', maxLength: 128 },
                serial: { type: 'string', description: 'The serial number the drive reports.', maxLength: 128 },
                media: { type: 'string', description: 'nvme, ssd (not rotational) or hdd (rotational).', enum: DRIVE_MEDIA },
                transport: { type: 'string', description: 'How it is attached: nvme, sata, sas, scsi, usb, virtio or other.', maxLength: 16 },
                logicalBlockSize: { type: 'integer', description: 'The smallest unit the drive addresses, in bytes.', minimum: 0 },
                physicalBlockSize: { type: 'integer', description: 'The unit the drive writes in, in bytes.', minimum: 0 },
              },
            },
            health: {
              type: 'object',
              description:
                "The disk's health as the node agent has seen it: False when the kernel saw errors on it (ext4 recorded errors, a drive's failed IO commands), kept after the evidence goes until a person marks it checked (annotation localtest.example.com/health-reviewed, which kubectl nodedisks uncordon writes); absent while nothing was seen, as nothing read yet can tell a disk is healthy. The controller's Healthy condition follows it.",
              required: ['status', 'reason', 'message'],
              properties: {
                status: {
                  type: 'string',
                  description: 'False: failing (see reason and message). True and Unknown are for the drive health reports still to come.',
                  enum: ['True', 'False', 'Unknown'],
                },
                reason: { type: 'string', description: 'FilesystemErrors or IOErrors.', maxLength: 64, pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$' },
                message: { type: 'string', description: 'What was seen, in words, and what to do.', maxLength: MAX_MESSAGE_LENGTH },
                since: { type: 'string', description: 'When the failure was first seen.', format: 'date-time' },
              },
            },
          },
        },
        controller: {
          type: 'object',
          description: "The controller's summary, in the seed's shape. Written by the controller only; its conditions are in status.conditions.",
          properties: {
            accepted: { type: 'boolean', description: 'False when the auto-reserve label asks for something the policy may not do (see the Accepted condition for why).' },
            observedGeneration: { type: 'integer', description: 'The metadata.generation the controller last acted on.', format: 'int64', minimum: 0 },
          },
        },
        observedGeneration: {
          type: 'integer',
          description: 'The metadata.generation that status.conditions describe (written by the controller; kstatus and Flux compare it with metadata.generation).',
          format: 'int64',
          minimum: 0,
        },
        conditions: {
          type: 'array',
          description: "The controller's conclusions, where kubectl wait --for=condition, kstatus, Argo CD and Flux look: Accepted and Ready. Written by the controller only.",
          maxItems: 16,
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-list-map-keys': ['type'],
          items: conditionSchema,
        },
      },
    },
  },
};

export const printerColumns: PrinterColumn[] = [
  { name: 'Node', type: 'string', jsonPath: '.spec.nodeName' },
  { name: 'Disk', type: 'string', jsonPath: '.spec.diskID' },
  { name: 'Desired', type: 'string', jsonPath: '.spec.desired.state' },
  { name: 'Phase', type: 'string', jsonPath: '.status.node.phase' },
  { name: 'Owner', type: 'string', jsonPath: '.spec.desired.owner', priority: 1 },
  { name: 'Capacity', type: 'integer', jsonPath: '.status.node.capacityBytes', priority: 1 },
  // nvme, ssd or hdd for a drive (ADR 44); empty for a disk image.
  { name: 'Media', type: 'string', jsonPath: '.status.node.drive.media', priority: 1 },
  { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status', priority: 1 },
  // The label of kubectl nodedisks cordon (ADR 35): "true" on a disk nobody hands out.
  { name: 'Cordoned', type: 'string', jsonPath: '.metadata.labels.localtest\\.example\\.com/cordoned', priority: 1 },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp', priority: 1 },
];

/** Fields usable in field selectors; `spec.nodeName` lets an agent watch only its own node. */
export const selectableFields = [
  { jsonPath: '.spec.nodeName' },
  { jsonPath: '.spec.diskID' },
  { jsonPath: '.spec.desired.state' },
  // Which disks a holder has, asked of the API server rather than a cache that may lag (the CSI controller
  // after a failover).
  { jsonPath: '.spec.desired.owner' },
  { jsonPath: '.status.node.phase' },
];

export const nodeDiskCRD: CustomResourceDefinition = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: CRD_NAME, labels: { 'app.kubernetes.io/name': 'nodedisks', 'app.kubernetes.io/part-of': 'nodedisks' } },
  spec: {
    group: GROUP,
    names: { kind: KIND, listKind: LIST_KIND, plural: PLURAL, singular: SINGULAR, shortNames: [SHORT_NAME], categories: ['nodedisks'] },
    scope: 'Cluster',
    versions: [
      {
        name: VERSION,
        served: true,
        storage: true,
        subresources: { status: {} },
        additionalPrinterColumns: printerColumns,
        selectableFields,
        schema: { openAPIV3Schema: nodeDiskSchema },
      },
    ],
  },
};
