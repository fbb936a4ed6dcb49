// plugin/kubectl/: kubectl's behaviour, reproduced byte for byte (JSONPath, tab writer, printers, sort, wait --for, list output).
//
// Output of NodeDisks exactly as `kubectl get nodedisks` prints it (test/integration/kubectl-parity.test.ts
// compares the two): the CRD's printer columns (and -o wide), name, json, yaml, jsonpath(-file),
// custom-columns(-file), with --show-labels, -L and --no-headers. A friendlier view is `status`'s job.
import { readFileSync } from 'node:fs';
import { GROUP, SINGULAR } from '../../api/constants.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { printerColumns } from '../../api/v1alpha1/schema.ts';
import { age } from './format.ts';
import { goJson, goText, goValue, sortKeys } from './goformat.ts';
import { compileJsonpath, evaluate, itemwiseTemplate, JsonPathError, parsePath, relaxedPath, type ItemwiseRender } from './jsonpath.ts';
import { TabWriter } from './tabwriter.ts';
import { escapeTerminal, tableCellText } from '../escape.ts';
import { usageError } from '../errors.ts';

/** `nodedisk.localtest.example.com/NAME`, as kubectl names an object in -o name and confirmations. */
export const qualifiedName = (nd: NodeDisk) => `${SINGULAR}.${GROUP}/${nd.metadata.name}`;

type Column = { header: string; steps: ReturnType<typeof parsePath> };

export type OutputFormat =
  | { kind: 'table' | 'wide' | 'json' | 'yaml' | 'name' }
  | { kind: 'jsonpath'; render: (data: unknown) => string; itemwise?: (() => ItemwiseRender) | undefined }
  | { kind: 'custom-columns'; columns: Column[] };

function readFlagFile(path: string, flag: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw usageError(`-o ${flag}: cannot read ${path}: ${(err as Error).message}`);
  }
}

function jsonpathFormat(template: string): OutputFormat {
  // Compiled here, before any request, so a bad template is a usage error (exit 2) like any bad flag.
  try {
    return { kind: 'jsonpath', render: compileJsonpath(template), itemwise: itemwiseTemplate(template) };
  } catch (err) {
    throw usageError(`-o jsonpath: ${(err as Error).message}`);
  }
}

/** NAME:PATH,NAME:PATH (custom-columns=) or a file with a header line and a line of paths (custom-columns-file=). */
function customColumns(pairs: [string, string][]): OutputFormat {
  try {
    return { kind: 'custom-columns', columns: pairs.map(([header, path]) => ({ header, steps: relaxedPath(path) })) };
  } catch (err) {
    throw usageError(`-o custom-columns: ${(err as Error).message}`);
  }
}

export function parseOutput(o: string | undefined): OutputFormat {
  if (o === undefined || o === '') return { kind: 'table' };
  if (o === 'wide' || o === 'json' || o === 'yaml' || o === 'name') return { kind: o };
  const eq = o.indexOf('=');
  const [kind, arg] = eq < 0 ? [o, ''] : [o.slice(0, eq), o.slice(eq + 1)];
  switch (kind) {
    case 'jsonpath':
      return jsonpathFormat(arg);
    case 'jsonpath-file':
      return jsonpathFormat(readFlagFile(arg, kind));
    case 'custom-columns': {
      const pairs = arg.split(',').map((spec): [string, string] => {
        const colon = spec.indexOf(':');
        if (colon < 0) throw usageError(`unexpected custom-columns spec: ${spec}, expected <header>:<json-path-expr>`);
        return [spec.slice(0, colon), spec.slice(colon + 1)];
      });
      return customColumns(pairs);
    }
    case 'custom-columns-file': {
      const lines = readFlagFile(arg, kind)
        .split('\n')
        .filter((l) => l.trim() !== '');
      const headers = lines[0]?.trim().split(/\s+/) ?? [];
      const paths = lines[1]?.trim().split(/\s+/) ?? [];
      if (lines.length !== 2 || headers.length !== paths.length) {
        throw usageError(`-o custom-columns-file: ${arg} must have two lines, the headers and as many JSONPath expressions`);
      }
      return customColumns(headers.map((h, i) => [h, paths[i]!]));
    }
    case 'go-template':
    case 'go-template-file':
    case 'template':
    case 'templatefile':
      throw usageError(`-o ${kind} is not supported by kubectl nodedisks; use -o jsonpath=TEMPLATE or -o custom-columns=HEADER:PATH,… instead`);
  }
  throw usageError(`unknown output format ${JSON.stringify(o)}; use one of wide, json, yaml, name, jsonpath=TEMPLATE, jsonpath-file=FILE, custom-columns=SPEC, custom-columns-file=FILE`);
}

export interface PrintOptions {
  format: OutputFormat;
  /** One name was asked for: json, yaml and jsonpath print that object rather than a List. */
  single: boolean;
  noHeaders: boolean;
  showLabels: boolean;
  /** -L keys: one column each, headed by the key's last segment in upper case. */
  labelColumns: string[];
}

/** go-yaml's layout, as kubectl prints it. */
export const YAML_OPTIONS = { sortKeys: true, seqNoIndent: true, quoteStyle: 'double', lineWidth: -1, noRefs: true } as const;

/** kubectl hides managedFields unless --show-managed-fields. */
export function withoutManagedFields(nd: NodeDisk): NodeDisk {
  const { managedFields: _, ...metadata } = nd.metadata;
  return { ...nd, metadata };
}

const list = (items: NodeDisk[]) => ({ apiVersion: 'v1', items, kind: 'List', metadata: { resourceVersion: '' } });

/** The cell the API server's table conversion makes of a printer column, as kubectl prints it. */
function cell(nd: NodeDisk, type: string, steps: ReturnType<typeof parsePath>, now: number): string {
  const found = evaluate(nd, steps);
  if (found.length === 0) return '';
  const v = found[0];
  if (type === 'date') return typeof v === 'string' ? age(v, now) : '';
  if (type === 'string') return v !== null && typeof v === 'object' ? goJson(v) : goText(v);
  return goText(v);
}

const COLUMNS = printerColumns.map((c) => ({ ...c, steps: parsePath(c.jsonPath) }));

function labelsText(labels: Record<string, string> | undefined): string {
  const keys = Object.keys(labels ?? {}).sort();
  return keys.length ? keys.map((k) => `${k}=${labels![k]}`).join(',') : '<none>';
}

export function tableRows(items: NodeDisk[], o: PrintOptions, withHeader: boolean): string[][] {
  const now = Date.now();
  const wide = o.format.kind === 'wide';
  const columns = COLUMNS.filter((c) => wide || !c.priority);
  const labelHeaders = o.labelColumns.map((k) => k.split('/').pop()!.toUpperCase());
  const header = ['NAME', ...columns.map((c) => c.name.toUpperCase()), ...labelHeaders, ...(o.showLabels ? ['LABELS'] : [])];
  // Escaped as kubectl's table printer escapes every cell: the values come from whoever wrote the object.
  const rows = items.map((nd) =>
    [
      nd.metadata.name ?? '',
      ...columns.map((c) => cell(nd, c.type, c.steps, now)),
      ...o.labelColumns.map((k) => nd.metadata.labels?.[k] ?? ''),
      ...(o.showLabels ? [labelsText(nd.metadata.labels)] : []),
    ].map(tableCellText),
  );
  return withHeader ? [header, ...rows] : rows;
}

export function customColumnRows(items: NodeDisk[], columns: Column[], withHeader: boolean): string[][] {
  const rows = items.map((nd) =>
    columns.map((c) => {
      const found = evaluate(withoutManagedFields(nd), c.steps);
      return found.length ? found.map((v) => escapeTerminal(goValue(v))).join(',') : '<none>';
    }),
  );
  return withHeader ? [columns.map((c) => c.header), ...rows] : rows;
}

/** What a printer remembers between the flushes of a watch: column widths, whether the header is out. */
export class PrintState {
  readonly tab = new TabWriter();
  headerPrinted = false;
  documents = 0;
}

/**
 * Prints the NodeDisks as kubectl get would; an empty table prints nothing (the caller says "No resources
 * found"). A watch passes the same `state` for the first list and for each event after it.
 */
export async function printNodeDisks(items: NodeDisk[], o: PrintOptions, out: (t: string) => void, state = new PrintState()): Promise<void> {
  const f = o.format;
  const header = () => {
    const want = !o.noHeaders && !state.headerPrinted && items.length > 0;
    if (want) state.headerPrinted = true;
    return want;
  };
  const clean = () => items.map(withoutManagedFields);
  const doc = () => (o.single && items.length === 1 ? clean()[0] : list(clean()));
  switch (f.kind) {
    case 'json':
      out(goJson(doc(), '    ') + '\n');
      return;
    case 'yaml':
      // kubectl separates the documents of a watch with ---.
      if (state.documents++ > 0) out('---\n');
      out((await import('js-yaml')).dump(sortKeys(doc()), YAML_OPTIONS));
      return;
    case 'name':
      out(items.map((nd) => `${qualifiedName(nd)}\n`).join(''));
      return;
    case 'jsonpath':
      try {
        out(f.render(doc()));
      } catch (err) {
        if (err instanceof JsonPathError) throw usageError(`-o jsonpath: ${err.message}`);
        throw err;
      }
      return;
    case 'custom-columns':
      out(state.tab.format(customColumnRows(items, f.columns, header())));
      return;
    default:
      if (items.length) out(state.tab.format(tableRows(items, o, header())));
  }
}
