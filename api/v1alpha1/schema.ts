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
  PLURAL,
  SHORT_NAME,
  SINGULAR,
  VERSION,
} from '../constants.ts';
import { DISK_ID_PATTERN, DNS_SUBDOMAIN_PATTERN } from '../names.ts';
import { canonicalNameRule } from './name-rule.ts';
import { DESIRED_STATES, NODE_PHASES } from './types.ts';

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
      selectableFields: { jsonPath: string }[];
      schema: { openAPIV3Schema: SchemaProps };
    }[];
  };
}

const immutable = (field: string) => ({ rule: 'self == oldSelf', message: `${field} is immutable`, reason: 'FieldValueForbidden' });

/** metav1.Condition, as kubebuilder renders it. */
const conditionSchema: SchemaProps = {
  type: 'object',
  required: ['type', 'status', 'lastTransitionTime', 'reason', 'message'],
  properties: {
    type: {
      type: 'string',
      maxLength: 316,
      pattern: '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$',
    },
    status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
    observedGeneration: { type: 'integer', format: 'int64', minimum: 0 },
    lastTransitionTime: { type: 'string', format: 'date-time' },
    reason: { type: 'string', minLength: 1, maxLength: 1024, pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$' },
    message: { type: 'string', maxLength: 32768 },
  },
};

export const nodeDiskSchema: SchemaProps = {
  type: 'object',
  description: 'NodeDisk is one disk image file on one node, and its reservation.',
  required: ['spec'],
  'x-kubernetes-validations': [canonicalNameRule],
  properties: {
    apiVersion: { type: 'string' },
    kind: { type: 'string' },
    metadata: { type: 'object' },
    spec: {
      type: 'object',
      required: ['nodeName', 'diskID', 'path'],
      'x-kubernetes-validations': [
        {
          rule: "self.path.endsWith('/' + self.diskID + '.img')",
          message: "spec.path must be the host path of the disk image: it must end with '/<spec.diskID>.img'",
          fieldPath: '.path',
        },
      ],
      properties: {
        nodeName: {
          type: 'string',
          description: 'Node that has the disk. Immutable.',
          maxLength: MAX_NAME_LENGTH,
          pattern: DNS_SUBDOMAIN_PATTERN,
          'x-kubernetes-validations': [immutable('spec.nodeName')],
        },
        diskID: {
          type: 'string',
          description: 'Disk image file name without .img. Immutable.',
          maxLength: MAX_DISK_ID_LENGTH,
          pattern: DISK_ID_PATTERN,
          'x-kubernetes-validations': [
            { rule: "!self.contains('..')", message: "spec.diskID must not contain '..'" },
            immutable('spec.diskID'),
          ],
        },
        path: {
          type: 'string',
          description: 'Host path of the disk image file. Immutable.',
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
          description: 'Intent: the label policy (owner auto) or a person (any other owner) sets it.',
          default: {},
          'x-kubernetes-validations': [
            {
              rule: "(has(self.state) && self.state == 'Reserved') || !has(self.owner) || self.owner == ''",
              message: 'spec.desired.owner may be set only when spec.desired.state is Reserved',
              fieldPath: '.owner',
            },
          ],
          properties: {
            state: { type: 'string', enum: DESIRED_STATES, default: 'Available' },
            owner: {
              type: 'string',
              description: 'Who holds the reservation: "auto" for the label policy.',
              maxLength: MAX_OWNER_LENGTH,
              pattern: '^$|^[A-Za-z0-9]([-A-Za-z0-9_.:@/]*[A-Za-z0-9])?$',
            },
          },
        },
      },
    },
    status: {
      type: 'object',
      properties: {
        node: {
          type: 'object',
          description: 'Written by the node agent only.',
          properties: {
            phase: { type: 'string', enum: NODE_PHASES },
            capacityBytes: { type: 'integer', format: 'int64', minimum: 0 },
            lastSeenTime: { type: 'string', format: 'date-time' },
            message: { type: 'string', maxLength: MAX_MESSAGE_LENGTH },
          },
        },
        controller: {
          type: 'object',
          description: 'Written by the controller only.',
          properties: {
            accepted: { type: 'boolean' },
            observedGeneration: { type: 'integer', format: 'int64', minimum: 0 },
            conditions: {
              type: 'array',
              maxItems: 16,
              'x-kubernetes-list-type': 'map',
              'x-kubernetes-list-map-keys': ['type'],
              items: conditionSchema,
            },
          },
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
  { name: 'Ready', type: 'string', jsonPath: '.status.controller.conditions[?(@.type=="Ready")].status', priority: 1 },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp', priority: 1 },
];

/** Fields usable in field selectors; `spec.nodeName` lets an agent watch only its own node. */
export const selectableFields = [
  { jsonPath: '.spec.nodeName' },
  { jsonPath: '.spec.diskID' },
  { jsonPath: '.spec.desired.state' },
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

