// How many disks each namespace's claims may hold: the annotation localtest.example.com/max-disks on the
// Namespace, which a cluster admin sets and a team with namespaced rights cannot change (no built-in
// namespaced role updates Namespaces). See docs/adr/0034-node-disk-claims.md.
//
// Read by an informer over the Namespaces as metadata only, keeping each one's annotation alone: a
// bind then costs no request, and a raised limit wakes the namespace's Pending claims at once (a GET per
// bind would cost one request per bind and wake nobody). The cache is one short entry per namespace.
import { ANNOTATION_MAX_DISKS } from '../api/constants.ts';
import { Informer } from '../lib/kube/informer.ts';
import type { RestClient } from '../lib/kube/rest.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { watch } from '../lib/kube/watch.ts';
import type { Logger } from '../lib/runtime/log.ts';

const NAMESPACES_PATH = '/api/v1/namespaces';
const AS_METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';
const AS_METADATA = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json';

export interface NamespaceLimitsOptions {
  rest: RestClient;
  log: Logger;
  /** A namespace's limit changed (or it appeared with one): its Pending claims need another look. */
  onChange: (namespace: string) => void;
  /** false: the informer lists in pages instead of the streaming watch-list (--no-watch-list). */
  watchList?: boolean;
}

/** A namespace's limit: none, a number of disks, or an annotation that is not a whole number. */
export type DiskLimit = { kind: 'none' } | { kind: 'max'; disks: number } | { kind: 'invalid'; value: string };

/** What is kept of a Namespace: its name, version and the limit annotation. */
export function leanNamespace(ns: KubeObject): KubeObject {
  const { name, resourceVersion } = ns.metadata;
  const limit = ns.metadata.annotations?.[ANNOTATION_MAX_DISKS];
  return {
    metadata: {
      ...(name !== undefined ? { name } : {}),
      ...(resourceVersion !== undefined ? { resourceVersion } : {}),
      ...(limit !== undefined ? { annotations: { [ANNOTATION_MAX_DISKS]: limit } } : {}),
    },
  };
}

/** The limit an annotation value sets. */
export function parseLimit(value: string | undefined): DiskLimit {
  if (value === undefined) return { kind: 'none' };
  const v = value.trim();
  return /^\d{1,9}$/.test(v) ? { kind: 'max', disks: Number(v) } : { kind: 'invalid', value };
}

export class NamespaceLimits {
  readonly informer: Informer<KubeObject>;

  constructor(o: NamespaceLimitsOptions) {
    const limitOf = (ns: KubeObject | undefined) => ns?.metadata.annotations?.[ANNOTATION_MAX_DISKS];
    this.informer = new Informer<KubeObject>(
      {
        list: (l) => o.rest.request('GET', NAMESPACES_PATH, { query: l, accept: AS_METADATA_LIST }),
        watch: (w, signal) => watch<KubeObject>(o.rest, NAMESPACES_PATH, w, signal, AS_METADATA),
        watchList: (w, signal) => watch<KubeObject>(o.rest, NAMESPACES_PATH, w, signal, AS_METADATA),
      },
      {
        onUpsert: (ns, old) => {
          if (limitOf(ns) !== limitOf(old)) o.onChange(ns.metadata.name ?? '');
        },
      },
      { log: o.log.with({ loop: 'namespaces' }), transform: leanNamespace, ...(o.watchList === false ? { watchList: false } : {}) },
    );
  }

  get hasSynced(): boolean {
    return this.informer.hasSynced;
  }

  readiness(): string | undefined {
    if (!this.informer.hasSynced) return `Namespaces not synced${this.informer.error ? `: ${this.informer.error.message}` : ''}`;
    if (this.informer.error) return `cannot list or watch Namespaces: ${this.informer.error.message}`;
    return undefined;
  }

  async run(signal: AbortSignal): Promise<void> {
    await this.informer.run(signal);
  }

  limit(namespace: string): DiskLimit {
    return parseLimit(this.informer.cache.get(namespace)?.metadata.annotations?.[ANNOTATION_MAX_DISKS]);
  }
}
