// Typed NodeDisk operations over the REST client: the only way the three programs touch NodeDisks.
// Writers use server-side apply with their own field manager (docs/design.md, "Who writes what").

import { type API_VERSION, GROUP, type KIND, PLURAL, VERSION } from './constants.ts';
import type { NodeDisk, NodeDiskList } from './v1alpha1/types.ts';
import { listPages } from '../lib/kube/pager.ts';
import { CONTENT_TYPE, type Query, type RestClient } from '../lib/kube/rest.ts';
import { watch, type WatchEvent } from '../lib/kube/watch.ts';

export const NODEDISKS_PATH = `/apis/${GROUP}/${VERSION}/${PLURAL}`;

export interface ListOptions {
  labelSelector?: string;
  fieldSelector?: string;
  limit?: number;
  continue?: string;
  resourceVersion?: string;
}

export type JsonPatchOp = { op: 'add' | 'replace' | 'test'; path: string; value: unknown } | { op: 'remove'; path: string };

export interface ApplyOptions {
  fieldManager: string;
  force?: boolean;
  dryRun?: boolean;
}

/** A partial NodeDisk for server-side apply: only the fields the writer owns. */
export interface NodeDiskApply {
  apiVersion: typeof API_VERSION;
  kind: typeof KIND;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string>; resourceVersion?: string };
  spec?: Partial<NodeDisk['spec']>;
  status?: NodeDisk['status'];
}

/** The part of a meta.k8s.io/v1 Table that listNames reads. */
interface NameTable {
  metadata?: { continue?: string };
  columnDefinitions?: { name: string }[];
  rows?: { cells: unknown[] }[];
}

function listQuery(o: ListOptions): Query {
  return {
    labelSelector: o.labelSelector,
    fieldSelector: o.fieldSelector,
    limit: o.limit,
    continue: o.continue,
    resourceVersion: o.resourceVersion,
  };
}

function applyQuery(o: ApplyOptions): Query {
  return { fieldManager: o.fieldManager, force: o.force ? true : undefined, dryRun: o.dryRun ? 'All' : undefined };
}

export class NodeDiskClient {
  readonly rest: RestClient;
  constructor(rest: RestClient) {
    this.rest = rest;
  }

  get(name: string): Promise<NodeDisk> {
    return this.rest.request<NodeDisk>('GET', `${NODEDISKS_PATH}/${encodeURIComponent(name)}`);
  }

  list(o: ListOptions = {}): Promise<NodeDiskList> {
    return this.rest.request<NodeDiskList>('GET', NODEDISKS_PATH, { query: listQuery(o) });
  }

  /** One page as the server's JSON text (the controller's informer reads its continue token unparsed). */
  listText(o: ListOptions = {}): Promise<string> {
    return this.rest.requestText('GET', NODEDISKS_PATH, { query: listQuery(o) });
  }

  /** Every page of a list, `pageSize` at a time, so large clusters are not loaded in one response. */
  listPages(o: ListOptions & { pageSize?: number } = {}): AsyncGenerator<NodeDiskList> {
    return listPages((cont) => this.list({ ...o, limit: o.pageSize ?? 500, continue: cont }));
  }

  /**
   * One page of names only: the API server's Table of NodeDisks without the objects (kubectl get's own
   * form), a few dozen bytes a row instead of the whole object, so tens of thousands are cheap to page.
   * `column` picks another printer column instead of Name (Node, for node names).
   */
  async listNames(o: ListOptions, column = 'Name'): Promise<{ names: string[]; continue?: string }> {
    const table = await this.rest.request<NameTable>('GET', NODEDISKS_PATH, {
      query: { ...listQuery(o), includeObject: 'None' },
      accept: 'application/json;as=Table;v=v1;g=meta.k8s.io',
    });
    const col = Math.max(
      0,
      (table.columnDefinitions ?? []).findIndex((c) => c.name === column),
    );
    const names = (table.rows ?? []).map((r) => String(r.cells[col] ?? '')).filter(Boolean);
    return { names, ...(table.metadata?.continue ? { continue: table.metadata.continue } : {}) };
  }

  create(body: NodeDisk, o: { fieldManager: string; dryRun?: boolean }): Promise<NodeDisk> {
    return this.rest.request<NodeDisk>('POST', NODEDISKS_PATH, {
      body,
      query: { fieldManager: o.fieldManager, dryRun: o.dryRun ? 'All' : undefined },
    });
  }

  /** Server-side apply of the main resource (metadata and spec). */
  apply(body: NodeDiskApply, o: ApplyOptions): Promise<NodeDisk> {
    return this.rest.request<NodeDisk>('PATCH', `${NODEDISKS_PATH}/${encodeURIComponent(body.metadata.name)}`, {
      body,
      contentType: CONTENT_TYPE.apply,
      query: applyQuery(o),
    });
  }

  /** Server-side apply of the status subresource. */
  applyStatus(body: NodeDiskApply, o: ApplyOptions): Promise<NodeDisk> {
    return this.rest.request<NodeDisk>('PATCH', `${NODEDISKS_PATH}/${encodeURIComponent(body.metadata.name)}/status`, {
      body,
      contentType: CONTENT_TYPE.apply,
      query: applyQuery(o),
    });
  }

  /** A JSON merge patch (used for labels, which people own). */
  mergePatch(name: string, patch: unknown, o: { fieldManager: string; dryRun?: boolean }): Promise<NodeDisk> {
    return this.rest.request<NodeDisk>('PATCH', `${NODEDISKS_PATH}/${encodeURIComponent(name)}`, {
      body: patch,
      contentType: CONTENT_TYPE.merge,
      query: { fieldManager: o.fieldManager, dryRun: o.dryRun ? 'All' : undefined },
    });
  }

  /** A JSON Patch (RFC 6902): the one way to remove a field that other managers also own. */
  jsonPatch(name: string, ops: readonly JsonPatchOp[], o: { fieldManager: string; dryRun?: boolean }): Promise<NodeDisk> {
    return this.rest.request<NodeDisk>('PATCH', `${NODEDISKS_PATH}/${encodeURIComponent(name)}`, {
      body: ops,
      contentType: CONTENT_TYPE.jsonPatch,
      query: { fieldManager: o.fieldManager, dryRun: o.dryRun ? 'All' : undefined },
    });
  }

  /**
   * Deletes the NodeDisk only if it is still the version given (preconditions: the API server answers
   * 409 Conflict if it changed since, 404 if it is gone), so a decision taken on one version cannot delete
   * a newer one.
   */
  delete(name: string, o: { preconditions?: { uid?: string; resourceVersion?: string }; dryRun?: boolean } = {}): Promise<unknown> {
    return this.rest.request('DELETE', `${NODEDISKS_PATH}/${encodeURIComponent(name)}`, {
      // With a body the API server reads every option from it, the query's dryRun included: it goes here.
      body: { apiVersion: 'v1', kind: 'DeleteOptions', ...(o.preconditions ? { preconditions: o.preconditions } : {}), ...(o.dryRun ? { dryRun: ['All'] } : {}) },
    });
  }

  /** A watch; with sendInitialEvents (and resourceVersionMatch NotOlderThan) a streaming watch-list (KEP-3157). */
  watch(
    o: ListOptions & { allowWatchBookmarks?: boolean; timeoutSeconds?: number; sendInitialEvents?: boolean; resourceVersionMatch?: 'NotOlderThan' },
    signal?: AbortSignal,
  ): AsyncGenerator<WatchEvent<NodeDisk>> {
    const { allowWatchBookmarks, timeoutSeconds, sendInitialEvents, resourceVersionMatch } = o;
    return watch<NodeDisk>(this.rest, NODEDISKS_PATH, { ...listQuery(o), allowWatchBookmarks, timeoutSeconds, sendInitialEvents, resourceVersionMatch }, signal);
  }
}
