// docs/reference/api.md, from the CRD objects the API server is given (api/v1alpha1/schema.ts and
// claim-schema.ts, rendered by api/generate-crd.ts): for each served version of NodeDisk and NodeDiskClaim
// the field tree as `kubectl explain --recursive` prints it, then each field with its type, description,
// allowed values, default and validations, the printer columns and the names.
import { nodeDiskClaimCRD } from '../../api/v1alpha1/claim-schema.ts';
import { type CustomResourceDefinition, nodeDiskCRD, type SchemaProps } from '../../api/v1alpha1/schema.ts';
import type { GeneratedFile } from '../lib/generated-files.ts';
import { anchor, code, inline, table, textBlock } from './markdown.ts';

export const API_REFERENCE = 'docs/reference/api.md';

/** The type as kubectl explain names it: <string>, <Object>, <[]Object>, <map[string]string>, <ObjectMeta>. */
export function explainType(path: string, s: SchemaProps): string {
  if (path === 'metadata') return 'ObjectMeta';
  if (s.type === 'array') return `[]${s.items ? explainType('', s.items) : 'Object'}`;
  if (s.type === 'object' && s.additionalProperties && !s.properties) return `map[string]${explainType('', s.additionalProperties)}`;
  if (s.type === 'object' || s.type === undefined) return 'Object';
  return s.type;
}

interface Field {
  path: string;
  name: string;
  depth: number;
  schema: SchemaProps;
  required: boolean;
}

/** Every field under `s`, depth first in the order kubectl explain uses (alphabetical). */
function fields(s: SchemaProps, prefix = '', depth = 0): Field[] {
  const props = s.type === 'array' ? s.items?.properties : s.properties;
  const required = new Set(s.type === 'array' ? s.items?.required : s.required);
  if (!props) return [];
  return Object.keys(props)
    .sort()
    .flatMap((name) => {
      const schema = props[name]!;
      const path = prefix ? `${prefix}.${name}` : name;
      return [{ path, name, depth, schema, required: required.has(name) }, ...(path === 'metadata' ? [] : fields(schema, path, depth + 1))];
    });
}

/** The FIELDS part of `kubectl explain <kind> --recursive`. */
function explainTree(root: SchemaProps): string {
  return fields(root)
    .map((f) => `${'  '.repeat(f.depth + 1)}${f.name}\t<${explainType(f.path, f.schema)}>${f.required ? ' -required-' : ''}`)
    .join('\n');
}

/** A messageExpression's words: its first and last string literals, what the computed part goes between. */
function computedMessage(expr: string): string {
  const literals = [...expr.matchAll(/'((?:[^'\\]|\\.)*)'/g)].map((m) => m[1]!);
  if (literals.length === 0) return 'a message the rule computes';
  return literals.length === 1 ? literals[0]! : `${literals[0]!.trim()} … ${literals.at(-1)!.replace(/^[,;]?\s*/, '')}`;
}

function constraints(s: SchemaProps): string[] {
  const out: string[] = [];
  if (s.enum) out.push(`one of ${s.enum.map(code).join(', ')}`);
  if (s.default !== undefined) out.push(`default ${code(JSON.stringify(s.default))}`);
  if (s.format) out.push(`format ${code(s.format)}`);
  if (s.pattern) out.push(`pattern ${code(s.pattern)}`);
  if (s.minLength !== undefined) out.push(`at least ${s.minLength} character${s.minLength === 1 ? '' : 's'}`);
  if (s.maxLength !== undefined) out.push(`at most ${s.maxLength} characters`);
  if (s.minimum !== undefined) out.push(`minimum ${s.minimum}`);
  if (s.maxItems !== undefined) out.push(`at most ${s.maxItems} items`);
  if (s['x-kubernetes-list-type']) {
    const keys = s['x-kubernetes-list-map-keys'];
    out.push(`list type ${code(s['x-kubernetes-list-type'])}${keys ? ` keyed by ${keys.map(code).join(', ')}` : ''}`);
  }
  const items = s.type === 'array' ? s.items : s.additionalProperties;
  if (items && !items.properties) {
    const inner = constraints(items).filter((c) => !c.startsWith('list type'));
    if (inner.length) out.push(`each ${s.type === 'array' ? 'item' : 'value'}: ${inner.join(', ')}`);
  }
  for (const v of s['x-kubernetes-validations'] ?? []) out.push(`rule: ${inline('message' in v ? v.message : computedMessage(v.messageExpression))}`);
  return out;
}

function fieldTable(root: SchemaProps): string {
  return table(
    ['field', 'type', 'required', 'description', 'values and rules'],
    [{ path: '', schema: root, required: false }, ...fields(root)].map((f) => [
      f.path ? code(f.path) : 'the object',
      code(`<${'name' in f ? explainType(f.path, f.schema) : 'Object'}>`),
      f.required ? 'yes' : '',
      inline(f.path === 'metadata' ? 'Standard object metadata (ObjectMeta).' : (f.schema.description ?? '')),
      constraints(f.schema).join('; '),
    ]),
  );
}

function versionSection(crd: CustomResourceDefinition, v: CustomResourceDefinition['spec']['versions'][number]): string {
  const { group, names } = crd.spec;
  const root = v.schema.openAPIV3Schema;
  const head = `${names.kind} ${group}/${v.name}`;
  const explain = [`GROUP:      ${group}`, `KIND:       ${names.kind}`, `VERSION:    ${v.name}`, '', 'FIELDS:', explainTree(root)].join('\n');
  return [
    `### ${head}`,
    `Served${v.storage ? ', the storage version' : ''}. ${inline(root.description ?? '')}`,
    `\`kubectl explain ${names.plural} --recursive --api-version=${group}/${v.name}\` prints this field tree:`,
    textBlock(explain),
    '**Fields**',
    fieldTable(root),
    '**Columns** of `kubectl get` (priority 1: with `-o wide` only)',
    table(
      ['column', 'type', 'JSONPath', 'priority'],
      v.additionalPrinterColumns.map((c) => [c.name.toUpperCase(), c.type, code(c.jsonPath), String(c.priority ?? 0)]),
    ),
    ...(v.selectableFields?.length
      ? [`**Field selectors** (\`--field-selector\`): ${v.selectableFields.map((f) => code(f.jsonPath.replace(/^\./, ''))).join(', ')}, and ${code('metadata.name')}.`]
      : []),
  ].join('\n\n');
}

function kindSection(crd: CustomResourceDefinition): string {
  const { names, group, scope } = crd.spec;
  const served = crd.spec.versions.filter((v) => v.served);
  return [
    `## ${names.kind}`,
    table(
      ['', ''],
      [
        ['CRD', code(crd.metadata.name)],
        ['scope', scope === 'Cluster' ? 'cluster-scoped' : 'namespaced'],
        ['kind, list kind', `${code(names.kind)}, ${code(names.listKind)}`],
        ['plural, singular', `${code(names.plural)}, ${code(names.singular)}`],
        ['short names', names.shortNames.map(code).join(', ')],
        ...(names.categories?.length ? [['categories', names.categories.map(code).join(', ')]] : []),
        ['served versions', served.map((v) => `${code(`${group}/${v.name}`)}${v.storage ? ' (storage)' : ''}`).join(', ')],
      ],
    ),
    ...served.map((v) => versionSection(crd, v)),
  ].join('\n\n');
}

/** The page's text. */
export function apiReference(crds: CustomResourceDefinition[] = [nodeDiskCRD, nodeDiskClaimCRD]): string {
  const page = [
    '<!-- Generated by `npm run generate` from api/v1alpha1/ (hack/docs/api-reference.ts): do not edit. -->',
    '# NodeDisk and NodeDiskClaim reference',
    `The resources' fields as the API server serves and checks them: the same schema the CRDs in kustomize/crd/bases/ carry, so this page says what \`kubectl explain\` says. Who writes which field: [docs/design.md](../design.md#who-writes-what).`,
    crds.map((c) => `- [${c.spec.names.kind}](#${anchor(c.spec.names.kind)})`).join('\n'),
    ...crds.map(kindSection),
  ];
  return `${page.join('\n\n')}\n`;
}

export function apiReferenceFiles(): GeneratedFile[] {
  return [{ path: API_REFERENCE, content: apiReference() }];
}
