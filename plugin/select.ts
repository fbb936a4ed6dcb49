// Which NodeDisks a command acts on: names, or a label selector and field filters, read page by page.
import { isDesiredState, isNodePhase, type NodeDisk } from '../api/v1alpha1/types.ts';
import { DESIRED_STATES, NODE_PHASES } from '../api/v1alpha1/types.ts';
import { nodeNameProblem } from '../api/names.ts';
import { isApiError } from '../lib/kube/errors.ts';
import { listPages } from '../lib/kube/pager.ts';
import type { Session } from './context.ts';
import type { ServerTable } from './kubectl/list-output.ts';
import { NODEDISKS_PATH } from '../api/client.ts';
import { EXIT, PluginError, usageError } from './errors.ts';

export interface SelectionFlags {
  selector?: string | undefined;
  node?: string | undefined;
  phase?: string | undefined;
  desired?: string | undefined;
  /** kubectl's --field-selector, over the CRD's selectable fields; ANDed with --node/--phase/--desired. */
  'field-selector'?: string | undefined;
  'chunk-size'?: number | undefined;
}

export function fieldSelector(f: SelectionFlags): string | undefined {
  const parts: string[] = [];
  if (f.node !== undefined) {
    const problem = nodeNameProblem(f.node);
    if (problem) throw usageError(`--node: ${problem}`);
    parts.push(`spec.nodeName=${f.node}`);
  }
  if (f.phase !== undefined) {
    if (!isNodePhase(f.phase)) throw usageError(`--phase must be one of ${NODE_PHASES.join(', ')}, got ${JSON.stringify(f.phase)}`);
    parts.push(`status.node.phase=${f.phase}`);
  }
  if (f.desired !== undefined) {
    if (!isDesiredState(f.desired)) throw usageError(`--desired must be one of ${DESIRED_STATES.join(', ')}, got ${JSON.stringify(f.desired)}`);
    parts.push(`spec.desired.state=${f.desired}`);
  }
  if (f['field-selector'] !== undefined && f['field-selector'] !== '') parts.push(f['field-selector']);
  return parts.length ? parts.join(',') : undefined;
}

/** A bad -l is reported by the API server as a 400; say which flag it was. */
function selectorError(err: unknown, selector: string | undefined): never {
  if (isApiError(err, 400) && selector !== undefined) {
    throw new PluginError(`invalid label selector ${JSON.stringify(selector)} (-l): ${err.message}`, EXIT.usage);
  }
  if (isApiError(err, 410)) {
    // Pages already printed cannot be taken back, so do not silently restart: say what happened.
    throw new PluginError(`the list changed too much while it was read page by page (continue token expired: ${err.message}); run the command again, or raise --chunk-size`, EXIT.error);
  }
  throw err;
}

export function hasSelection(f: SelectionFlags): boolean {
  return f.selector !== undefined || f.node !== undefined || f.phase !== undefined || f.desired !== undefined || f['field-selector'] !== undefined;
}

/** Streams matching NodeDisks a page at a time (`--chunk-size`, 500 by default, like kubectl). */
export async function* selected(session: Session, f: SelectionFlags): AsyncGenerator<NodeDisk[]> {
  const client = session.client();
  try {
    for await (const page of client.listPages({ labelSelector: f.selector, fieldSelector: fieldSelector(f), pageSize: f['chunk-size'] ?? 500 })) {
      yield page.items;
    }
  } catch (err) {
    selectorError(err, f.selector);
  }
}

/**
 * The selection page by page (`--chunk-size`), as objects or, with `table`, as the API server's Table
 * without objects (`includeObject=None`, a few dozen bytes a row: what the default table prints).
 */
export async function* selectedPages(session: Session, f: SelectionFlags, table: boolean): AsyncGenerator<{ items?: NodeDisk[]; table?: ServerTable }> {
  const client = session.client();
  const query = { labelSelector: f.selector, fieldSelector: fieldSelector(f), limit: f['chunk-size'] ?? 500 };
  try {
    if (table) {
      const fetch = (cont: string | undefined) =>
        client.rest.request<ServerTable>('GET', NODEDISKS_PATH, { query: { ...query, continue: cont, includeObject: 'None' }, accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' });
      for await (const page of listPages(fetch, { ask: 'early' })) yield { table: page };
    } else {
      for await (const page of listPages((cont) => client.list({ ...query, continue: cont }), { ask: 'early' })) yield { items: page.items };
    }
  } catch (err) {
    selectorError(err, f.selector);
  }
}

/** Which NodeDisks a watch over `names` (or else the selection) must see, as list/watch selectors. */
export function watchSelectors(names: string[], f: SelectionFlags): { labelSelector?: string; fieldSelector?: string } {
  if (names.length === 1) return { fieldSelector: `metadata.name=${names[0]}` };
  if (names.length) return {};
  const fs = fieldSelector(f);
  return { ...(f.selector !== undefined ? { labelSelector: f.selector } : {}), ...(fs !== undefined ? { fieldSelector: fs } : {}) };
}

/**
 * Everything the selectors match, at one resourceVersion (the pages of a list all come from one
 * snapshot): the point a watch must start from. An object's own resourceVersion is no such point: an
 * object nobody changed for a while has a version the watch cache no longer holds (410 Gone).
 */
export async function snapshot(session: Session, sel: { labelSelector?: string; fieldSelector?: string }, pageSize = 500): Promise<{ items: NodeDisk[]; resourceVersion: string }> {
  const items: NodeDisk[] = [];
  let resourceVersion = '';
  try {
    for await (const page of session.client().listPages({ ...sel, pageSize })) {
      resourceVersion ||= page.metadata.resourceVersion ?? '';
      items.push(...page.items);
    }
  } catch (err) {
    selectorError(err, sel.labelSelector);
  }
  return { items, resourceVersion };
}

/**
 * Refuses a name that is not one path segment, with kubectl's words (client-go's Request.Name): `.` and
 * `..` would address the collection (`list .` listed every NodeDisk), `/` and `%` another path.
 */
export function checkNames(names: readonly string[]): void {
  for (const name of names) {
    if (name === '') throw usageError('resource name may not be empty');
    const problems = name === '.' || name === '..' ? [`may not be '${name}'`] : ['/', '%'].filter((c) => name.includes(c)).map((c) => `may not contain '${c}'`);
    if (problems.length) throw usageError(`invalid resource name ${JSON.stringify(name)}: [${problems.join(' ')}]`);
  }
}

/** Named disks (each fetched; a missing one is an error naming it) or the selection. */
export async function resolveTargets(session: Session, names: string[], f: SelectionFlags): Promise<NodeDisk[]> {
  if (names.length && hasSelection(f)) throw usageError('name disks or select them with -l/--node/--phase/--desired, not both');
  checkNames(names);
  if (names.length) {
    const client = session.client();
    const out: NodeDisk[] = [];
    for (const name of names) out.push(await client.get(name));
    return out;
  }
  const out: NodeDisk[] = [];
  for await (const page of selected(session, f)) out.push(...page);
  return out;
}
