import { readFileSync } from 'node:fs';
import test from 'ava';
import { CLAIM_CRD_FILE, claimCrdYaml, crdYaml, CRD_FILE } from '../../api/crd-yaml.ts';
import { nodeDiskClaimSchema } from '../../api/v1alpha1/claim-schema.ts';
import { nodeDiskSchema, type SchemaProps } from '../../api/v1alpha1/schema.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { fullNodeDisk, fullNodeDiskClaim } from '../../hack/lib/nodedisks.ts';

test('the committed CRD is what api/v1alpha1/schema.ts generates (run npm run generate)', (t) => {
  t.is(readFileSync(`${REPO_ROOT}/${CRD_FILE}`, 'utf8'), crdYaml());
});

test('the committed NodeDiskClaim CRD is what api/v1alpha1/claim-schema.ts generates (run npm run generate)', (t) => {
  t.is(readFileSync(`${REPO_ROOT}/${CLAIM_CRD_FILE}`, 'utf8'), claimCrdYaml());
});

/** Paths of every leaf field of a JSON value (array items as []). */
function valuePaths(v: unknown, prefix = ''): string[] {
  if (Array.isArray(v)) return v.flatMap((item) => valuePaths(item, `${prefix}[]`));
  if (v !== null && typeof v === 'object') {
    return Object.entries(v).flatMap(([k, child]) => valuePaths(child, prefix ? `${prefix}.${k}` : k));
  }
  return [prefix];
}

function schemaPaths(s: SchemaProps, prefix = ''): string[] {
  if (s.type === 'array' && s.items) return schemaPaths(s.items, `${prefix}[]`);
  if (s.properties && Object.keys(s.properties).length > 0) {
    return Object.entries(s.properties).flatMap(([k, child]) => schemaPaths(child, prefix ? `${prefix}.${k}` : k));
  }
  return [prefix];
}

test('the CRD schema and the TypeScript types describe the same fields', (t) => {
  const sample: NodeDisk = fullNodeDisk();
  const fromType = valuePaths({ spec: sample.spec, status: sample.status }).sort();
  const fromSchema = schemaPaths(nodeDiskSchema)
    .filter((p) => p.startsWith('spec') || p.startsWith('status'))
    .sort();
  t.deepEqual([...new Set(fromType)], fromSchema);
});

test('the NodeDiskClaim schema and its TypeScript types describe the same fields', (t) => {
  const sample = fullNodeDiskClaim();
  // A map's keys are data, not fields: matchLabels is one field of the schema.
  const fromType = valuePaths({ spec: sample.spec, status: sample.status }).map((p) => p.replace(/^(spec\.selector\.matchLabels)\..*$/, '$1'));
  const fromSchema = schemaPaths(nodeDiskClaimSchema)
    .filter((p) => p.startsWith('spec') || p.startsWith('status'))
    .sort();
  t.deepEqual([...new Set(fromType)].sort(), fromSchema);
});
