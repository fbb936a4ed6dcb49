// The NodeDiskClaim CustomResourceDefinition, written once here (docs/adr/0034). `npm run generate`
// renders it to kustomize/crd/bases/; test/unit/crd.test.ts fails when the committed YAML drifts from this
// object or when this schema and the TypeScript types in ./claim-types.ts disagree on a field.

import {
  CLAIM_CRD_NAME,
  CLAIM_KIND,
  CLAIM_LIST_KIND,
  CLAIM_PLURAL,
  CLAIM_SHORT_NAME,
  CLAIM_SINGULAR,
  GROUP,
  MAX_CLAIM_NAME_LENGTH,
  MAX_MESSAGE_LENGTH,
  MAX_NAME_LENGTH,
  VERSION,
} from '../constants.ts';
import { DNS_SUBDOMAIN_PATTERN } from '../names.ts';
import { CLAIM_PHASES, RECLAIM_POLICIES, SELECTOR_OPERATORS } from './claim-types.ts';
import { conditionSchema, type CustomResourceDefinition, type PrinterColumn, type SchemaProps } from './schema.ts';

const immutable = (field: string) => ({ rule: 'self == oldSelf', message: `${field} is immutable`, reason: 'FieldValueForbidden' });

const claimConditionSchema: SchemaProps = {
  ...conditionSchema,
  description: "One aspect of the claim's state, in the standard Kubernetes condition shape (metav1.Condition).",
  properties: {
    ...conditionSchema.properties,
    type: {
      ...conditionSchema.properties!.type!,
      description: 'Which aspect this condition describes: Bound (the claim holds a disk) or Ready (the node agent reports the reservation marker on the node).',
    },
    reason: {
      ...conditionSchema.properties!.reason!,
      description: 'Why, as one CamelCase word for programs: for Bound Bound, NoDiskFits, DiskGone; for Ready MarkerOnNode, WaitingForMarker, DiskMissing, AgentError, AgentStale.',
    },
  },
};

/** metav1.LabelSelector, as kubebuilder renders it. */
const labelSelectorSchema: SchemaProps = {
  type: 'object',
  description: 'Only NodeDisks whose labels match (a standard label selector: matchLabels and matchExpressions, all must hold). Immutable.',
  'x-kubernetes-validations': [immutable('spec.selector')],
  properties: {
    matchLabels: {
      type: 'object',
      description: 'Labels the NodeDisk must carry with exactly these values.',
      additionalProperties: { type: 'string', maxLength: 63 },
    },
    matchExpressions: {
      type: 'array',
      description: 'Requirements on the NodeDisk labels.',
      maxItems: 16,
      'x-kubernetes-list-type': 'atomic',
      items: {
        type: 'object',
        description: 'A label key, an operator and values.',
        required: ['key', 'operator'],
        'x-kubernetes-validations': [
          {
            rule: "self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) : (!has(self.values) || size(self.values) == 0)",
            message: 'values must be non-empty for In and NotIn, and empty for Exists and DoesNotExist',
          },
        ],
        properties: {
          key: { type: 'string', description: 'The label key.', maxLength: 317 },
          operator: { type: 'string', description: 'In, NotIn, Exists or DoesNotExist.', enum: SELECTOR_OPERATORS },
          values: { type: 'array', description: 'The values for In and NotIn.', maxItems: 64, 'x-kubernetes-list-type': 'atomic', items: { type: 'string', maxLength: 63 } },
        },
      },
    },
  },
};

export const nodeDiskClaimSchema: SchemaProps = {
  type: 'object',
  description:
    "NodeDiskClaim is a team's request, in its own namespace, for one NodeDisk: the controller binds it to a free disk that fits, reserved for owner claim:<namespace>/<name>, and reports the disk's node and path in status. Deleting the claim releases the disk unless spec.reclaimPolicy is Retain.",
  'x-kubernetes-validations': [
    {
      rule: `size(self.metadata.name) <= ${MAX_CLAIM_NAME_LENGTH}`,
      message: `a claim name may be at most ${MAX_CLAIM_NAME_LENGTH} characters: claim:<namespace>/<name> is the owner of its disk, at most ${MAX_NAME_LENGTH}`,
    },
  ],
  properties: {
    apiVersion: { type: 'string', description: 'The versioned schema of this object: localtest.example.com/v1alpha1.' },
    kind: { type: 'string', description: 'The kind of this object: NodeDiskClaim.' },
    metadata: { type: 'object' },
    spec: {
      type: 'object',
      description: 'Which disks may serve the claim (all the fields given must hold), and what happens to the disk when the claim is deleted.',
      default: {},
      properties: {
        nodeName: {
          type: 'string',
          description: 'Only disks of this Node. Immutable.',
          maxLength: MAX_NAME_LENGTH,
          pattern: DNS_SUBDOMAIN_PATTERN,
          'x-kubernetes-validations': [immutable('spec.nodeName')],
        },
        selector: labelSelectorSchema,
        minCapacity: {
          type: 'string',
          description: 'Only disks at least this big, as a Kubernetes quantity (32Mi, 1Gi, 500M). Immutable.',
          maxLength: 64,
          'x-kubernetes-validations': [
            { rule: 'isQuantity(self)', message: 'spec.minCapacity must be a Kubernetes quantity such as 32Mi or 1Gi' },
            { rule: "!isQuantity(self) || !quantity(self).isLessThan(quantity('0'))", message: 'spec.minCapacity must not be negative' },
            immutable('spec.minCapacity'),
          ],
        },
        diskName: {
          type: 'string',
          description: 'This NodeDisk (its metadata.name) and no other. Immutable.',
          maxLength: MAX_NAME_LENGTH,
          pattern: DNS_SUBDOMAIN_PATTERN,
          'x-kubernetes-validations': [immutable('spec.diskName')],
        },
        reclaimPolicy: {
          type: 'string',
          description:
            'When the claim is deleted: Delete releases the disk (the default); Retain keeps it reserved for owner claim:<namespace>/<name>, for an administrator to release. Immutable: a retained disk still counts against the namespace (annotation localtest.example.com/max-disks).',
          enum: RECLAIM_POLICIES,
          default: 'Delete',
          // A team that could switch a claim to Retain before deleting it would keep its disks past any limit.
          'x-kubernetes-validations': [immutable('spec.reclaimPolicy')],
        },
      },
    },
    status: {
      type: 'object',
      description: 'What the controller concluded. Written by the controller only.',
      default: {},
      properties: {
        phase: {
          type: 'string',
          description: 'Pending (no disk yet; message says why), Bound (holds the disk in diskName), Lost (its NodeDisk is gone, or no longer reserved for it).',
          enum: CLAIM_PHASES,
        },
        diskName: { type: 'string', description: 'The NodeDisk the claim is bound to.', maxLength: MAX_NAME_LENGTH },
        nodeName: { type: 'string', description: 'The Node that has the disk: where a pod that uses it must run.', maxLength: MAX_NAME_LENGTH },
        path: { type: 'string', description: 'The host path of the disk image file on that node.', maxLength: 4096 },
        capacityBytes: { type: 'integer', description: 'Size of the disk image file in bytes, as its node agent reports it.', format: 'int64', minimum: 0 },
        message: { type: 'string', description: 'Why the claim is Pending or Lost, in one line.', maxLength: MAX_MESSAGE_LENGTH },
        observedGeneration: { type: 'integer', description: 'The metadata.generation that status describes.', format: 'int64', minimum: 0 },
        conditions: {
          type: 'array',
          description: 'Bound, Ready and (when only a person can mend the claim) Stalled, where kubectl wait --for=condition, kstatus, Argo CD and Flux look.',
          maxItems: 16,
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-list-map-keys': ['type'],
          items: claimConditionSchema,
        },
      },
    },
  },
};

/** Like a PersistentVolumeClaim's: NAME, STATUS, DISK, NODE, CAPACITY, AGE. */
export const claimPrinterColumns: PrinterColumn[] = [
  { name: 'Status', type: 'string', jsonPath: '.status.phase' },
  { name: 'Disk', type: 'string', jsonPath: '.status.diskName' },
  { name: 'Node', type: 'string', jsonPath: '.status.nodeName' },
  { name: 'Capacity', type: 'integer', jsonPath: '.status.capacityBytes' },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  { name: 'Message', type: 'string', jsonPath: '.status.message', priority: 1 },
];

// No category: the NodeDisk CRD's category is named `nodedisks`, and kubectl expands a category before a
// plural, so `kubectl get nodedisks NAME` would look for NAME among the claims too.
export const nodeDiskClaimCRD: CustomResourceDefinition = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: CLAIM_CRD_NAME, labels: { 'app.kubernetes.io/name': 'nodedisks', 'app.kubernetes.io/part-of': 'nodedisks' } },
  spec: {
    group: GROUP,
    names: { kind: CLAIM_KIND, listKind: CLAIM_LIST_KIND, plural: CLAIM_PLURAL, singular: CLAIM_SINGULAR, shortNames: [CLAIM_SHORT_NAME] },
    scope: 'Namespaced',
    versions: [
      {
        name: VERSION,
        served: true,
        storage: true,
        subresources: { status: {} },
        additionalPrinterColumns: claimPrinterColumns,
        selectableFields: [{ jsonPath: '.status.phase' }],
        schema: { openAPIV3Schema: nodeDiskClaimSchema },
      },
    ],
  },
};
