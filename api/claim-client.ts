// Typed NodeDiskClaim operations over the REST client (the namespaced sibling of ./client.ts). Writers use
// server-side apply with their own field manager, as for NodeDisks.

import { type API_VERSION, type CLAIM_KIND, CLAIM_PLURAL, GROUP, VERSION } from './constants.ts';
import type { ApplyOptions, ListOptions } from './client.ts';
import type { NodeDiskClaim, NodeDiskClaimList } from './v1alpha1/claim-types.ts';
import { CONTENT_TYPE, type Query, type RestClient } from '../lib/kube/rest.ts';
import { watch, type WatchEvent } from '../lib/kube/watch.ts';

/** The claims of `namespace`, or of every namespace when it is undefined (list and watch only). */
export function claimsPath(namespace: string | undefined): string {
  const base = `/apis/${GROUP}/${VERSION}`;
  return namespace === undefined ? `${base}/${CLAIM_PLURAL}` : `${base}/namespaces/${encodeURIComponent(namespace)}/${CLAIM_PLURAL}`;
}

/** A partial claim for server-side apply: only the fields the writer owns. */
export interface NodeDiskClaimApply {
  apiVersion: typeof API_VERSION;
  kind: typeof CLAIM_KIND;
  metadata: { name: string; namespace: string; finalizers?: string[]; resourceVersion?: string };
  spec?: NodeDiskClaim['spec'];
  status?: NodeDiskClaim['status'];
}

function listQuery(o: ListOptions): Query {
  return { labelSelector: o.labelSelector, fieldSelector: o.fieldSelector, limit: o.limit, continue: o.continue, resourceVersion: o.resourceVersion };
}

function applyQuery(o: ApplyOptions): Query {
  return { fieldManager: o.fieldManager, force: o.force ? true : undefined, dryRun: o.dryRun ? 'All' : undefined };
}

export class NodeDiskClaimClient {
  readonly rest: RestClient;
  constructor(rest: RestClient) {
    this.rest = rest;
  }

  private one(namespace: string, name: string, sub = ''): string {
    return `${claimsPath(namespace)}/${encodeURIComponent(name)}${sub}`;
  }

  get(namespace: string, name: string): Promise<NodeDiskClaim> {
    return this.rest.request<NodeDiskClaim>('GET', this.one(namespace, name));
  }

  /** Claims of one namespace, or of all of them (namespace undefined). */
  list(namespace: string | undefined, o: ListOptions = {}): Promise<NodeDiskClaimList> {
    return this.rest.request<NodeDiskClaimList>('GET', claimsPath(namespace), { query: listQuery(o) });
  }

  create(body: NodeDiskClaim, o: { fieldManager: string; dryRun?: boolean }): Promise<NodeDiskClaim> {
    return this.rest.request<NodeDiskClaim>('POST', claimsPath(body.metadata.namespace ?? 'default'), {
      body,
      query: { fieldManager: o.fieldManager, dryRun: o.dryRun ? 'All' : undefined },
    });
  }

  delete(namespace: string, name: string): Promise<unknown> {
    return this.rest.request<unknown>('DELETE', this.one(namespace, name));
  }

  /** Server-side apply of the main resource (metadata and spec). */
  apply(body: NodeDiskClaimApply, o: ApplyOptions): Promise<NodeDiskClaim> {
    return this.rest.request<NodeDiskClaim>('PATCH', this.one(body.metadata.namespace, body.metadata.name), { body, contentType: CONTENT_TYPE.apply, query: applyQuery(o) });
  }

  /** Server-side apply of the status subresource. */
  applyStatus(body: NodeDiskClaimApply, o: ApplyOptions): Promise<NodeDiskClaim> {
    return this.rest.request<NodeDiskClaim>('PATCH', this.one(body.metadata.namespace, body.metadata.name, '/status'), {
      body,
      contentType: CONTENT_TYPE.apply,
      query: applyQuery(o),
    });
  }

  watch(namespace: string | undefined, o: ListOptions & { allowWatchBookmarks?: boolean; timeoutSeconds?: number }, signal?: AbortSignal): AsyncGenerator<WatchEvent<NodeDiskClaim>> {
    return watch<NodeDiskClaim>(this.rest, claimsPath(namespace), { ...listQuery(o), allowWatchBookmarks: o.allowWatchBookmarks, timeoutSeconds: o.timeoutSeconds }, signal);
  }
}
