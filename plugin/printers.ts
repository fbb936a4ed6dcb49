// Output of NodeDisks: kubectl's table (and -o wide), json, yaml, name and jsonpath.
import { CONDITION, GROUP, SINGULAR } from '../api/constants.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import { age, iec, table } from './format.ts';
import { compileJsonpath } from './jsonpath.ts';
import { usageError } from './errors.ts';

/** `nodedisk.localtest.example.com/NAME`, as kubectl names an object in -o name and confirmations. */
export const qualifiedName = (nd: NodeDisk) => `${SINGULAR}.${GROUP}/${nd.metadata.name}`;

export type OutputFormat = { kind: 'table' | 'wide' | 'json' | 'yaml' | 'name' } | { kind: 'jsonpath'; template: string };

export function parseOutput(o: string | undefined): OutputFormat {
  if (o === undefined || o === '') return { kind: 'table' };
  if (o === 'wide' || o === 'json' || o === 'yaml' || o === 'name') return { kind: o };
  const m = /^jsonpath=(.*)$/s.exec(o);
  if (m) {
    // Compiled here, before any request, so a bad template is a usage error (exit 2) like any bad flag.
    try {
      compileJsonpath(m[1]!);
    } catch (err) {
      throw usageError(`-o jsonpath: ${(err as Error).message}`);
    }
    return { kind: 'jsonpath', template: m[1]! };
  }
  throw usageError(`unknown output format ${JSON.stringify(o)}; use one of wide, json, yaml, name, jsonpath=TEMPLATE`);
}

const ready = (nd: NodeDisk) => nd.status?.controller?.conditions?.find((c) => c.type === CONDITION.ready)?.status ?? '<none>';

export function row(nd: NodeDisk, wide: boolean, now: number): string[] {
  const base = [nd.metadata.name ?? '', nd.spec.nodeName, nd.spec.diskID, nd.spec.desired?.state ?? '<none>', nd.status?.node?.phase ?? '<none>'];
  if (!wide) return base;
  const cap = nd.status?.node?.capacityBytes;
  return [...base, nd.spec.desired?.owner || '<none>', cap === undefined ? '<none>' : iec(cap), ready(nd), age(nd.metadata.creationTimestamp, now)];
}

export const HEADER = ['NAME', 'NODE', 'DISK', 'DESIRED', 'PHASE'];
export const WIDE_HEADER = [...HEADER, 'OWNER', 'CAPACITY', 'READY', 'AGE'];

/** A printer fed page by page: tables are aligned per page (as kubectl does with --chunk-size). */
export async function printNodeDisks(pages: AsyncIterable<NodeDisk[]>, format: OutputFormat, out: (t: string) => void, noHeaders = false): Promise<number> {
  let count = 0;
  const now = Date.now();
  if (format.kind === 'json' || format.kind === 'yaml') {
    const items: NodeDisk[] = [];
    for await (const page of pages) items.push(...page);
    count = items.length;
    const list = { apiVersion: 'v1', kind: 'List', metadata: { resourceVersion: '' }, items };
    if (format.kind === 'json') out(JSON.stringify(list, null, 4) + '\n');
    else out((await import('js-yaml')).dump(list, { noRefs: true, lineWidth: -1 }));
    return count;
  }
  const render = format.kind === 'jsonpath' ? compileJsonpath(format.template) : undefined;
  if (render) {
    // kubectl applies the template to the List, so {.items[*]…} works; do the same.
    const items: NodeDisk[] = [];
    for await (const page of pages) items.push(...page);
    out(render({ apiVersion: 'v1', kind: 'List', items }));
    return items.length;
  }
  let first = true;
  for await (const page of pages) {
    count += page.length;
    if (format.kind === 'name') {
      out(page.map((nd) => `${qualifiedName(nd)}\n`).join(''));
      continue;
    }
    if (page.length === 0) continue;
    const wide = format.kind === 'wide';
    out(table(first && !noHeaders ? (wide ? WIDE_HEADER : HEADER) : undefined, page.map((nd) => row(nd, wide, now))));
    first = false;
  }
  return count;
}
