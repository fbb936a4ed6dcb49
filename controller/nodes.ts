// Which Nodes exist, for the node lifecycle (ADR 35): list+watch of the cluster's Nodes as metadata only
// (PartialObjectMetadata, as client-go's metadata informer asks for them), so a kubelet's status updates
// cost the controller a few hundred bytes each, not a whole Node. The cache holds one small entry per Node
// that exists, and the informer drops the entry of a deleted Node: nothing here grows with churn.
//
// A NodeDisk whose spec.nodeName names no Node is on a node that is gone, but only once the first list
// has completed: before that every node would look gone (hasSynced).
//
// Since when a node is gone (what the grace period before unreserved disks are deleted counts from) is
// kept in memory, on the wall clock: from the Node's deletion seen here, or from the first time a
// reconcile asked about a node this controller never saw. A restarted controller (or a new leader) starts
// the grace again: a longer wait, never a shorter one. It is kept only for nodes some NodeDisk still
// names (trackDisk counts them), so entries of gone nodes go with their last NodeDisk.
import { Informer } from '../lib/kube/informer.ts';
import type { RestClient } from '../lib/kube/rest.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { watch } from '../lib/kube/watch.ts';
import type { Logger } from '../lib/runtime/log.ts';
import { TickBatch } from '../lib/runtime/tick-batch.ts';

const NODES_PATH = '/api/v1/nodes';
const AS_METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';
const AS_METADATA = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json';

export interface NodesOptions {
  rest: RestClient;
  log: Logger;
  /** Nodes that appeared, disappeared or were replaced (a new UID): their disks need another look. */
  onChange: (nodes: ReadonlySet<string>) => void;
  /** Wall-clock ms, replaceable in tests. */
  wall?: () => number;
  /** false: the informer lists in pages instead of the streaming watch-list (--no-watch-list). */
  watchList?: boolean;
}

/** What is kept of a Node: its name, UID and version. */
export function leanNode(node: KubeObject): KubeObject {
  const { name, uid, resourceVersion } = node.metadata;
  return { metadata: { ...(name !== undefined ? { name } : {}), ...(uid !== undefined ? { uid } : {}), ...(resourceVersion !== undefined ? { resourceVersion } : {}) } };
}

export class Nodes {
  readonly informer: Informer<KubeObject>;
  private readonly o: NodesOptions;
  /** One pass over the NodeDisks for all the nodes that changed together. */
  private readonly batch: TickBatch<string>;
  /** How many cached NodeDisks name each node (only nodes with at least one). */
  private readonly disks = new Map<string, number>();
  /** Wall-clock ms since when each node with NodeDisks has had no Node object. */
  private readonly goneAt = new Map<string, number>();
  private readonly wall: () => number;

  constructor(o: NodesOptions) {
    this.o = o;
    this.batch = new TickBatch((nodes) => this.o.onChange(nodes));
    this.wall = o.wall ?? (() => Date.now());
    this.informer = new Informer<KubeObject>(
      {
        list: (l) => o.rest.request('GET', NODES_PATH, { query: l, accept: AS_METADATA_LIST }),
        watch: (w, signal) => watch<KubeObject>(o.rest, NODES_PATH, w, signal, AS_METADATA),
        watchList: (w, signal) => watch<KubeObject>(o.rest, NODES_PATH, w, signal, AS_METADATA),
      },
      {
        // A Node's updates (its kubelet's status) change nothing here: only a new Node or a new UID does.
        onUpsert: (node, old) => {
          const name = node.metadata.name ?? '';
          if (!old) this.goneAt.delete(name);
          if (!old || old.metadata.uid !== node.metadata.uid) this.changed(name);
        },
        onDelete: (node) => {
          const name = node.metadata.name ?? '';
          if (this.disks.has(name)) this.goneAt.set(name, this.wall());
          this.changed(name);
        },
      },
      { log: o.log.with({ loop: 'nodes' }), transform: leanNode, ...(o.watchList === false ? { watchList: false } : {}) },
    );
  }

  get hasSynced(): boolean {
    return this.informer.hasSynced;
  }

  /** Why the controller cannot judge which nodes are gone, or undefined. */
  readiness(): string | undefined {
    if (!this.informer.hasSynced) return `Nodes not synced${this.informer.error ? `: ${this.informer.error.message}` : ''}`;
    if (this.informer.error) return `cannot list or watch Nodes: ${this.informer.error.message}`;
    return undefined;
  }

  async run(signal: AbortSignal): Promise<void> {
    await this.informer.run(signal);
  }

  /** The UID of the Node of that name, or undefined when no such Node exists (judge only once synced). */
  uid(node: string): string | undefined {
    return this.informer.cache.get(node)?.metadata.uid;
  }

  exists(node: string): boolean {
    return this.informer.cache.has(node);
  }

  /** Since when (wall-clock ms) the node has had no Node object; call only for a node that has none. */
  goneSince(node: string): number {
    let at = this.goneAt.get(node);
    if (at === undefined) {
      at = this.wall();
      if (this.disks.has(node)) this.goneAt.set(node, at);
    }
    return at;
  }

  /** A NodeDisk naming `node` entered (+1) or left (-1) the controller's cache. */
  trackDisk(node: string, delta: 1 | -1): void {
    const n = (this.disks.get(node) ?? 0) + delta;
    if (n > 0) {
      this.disks.set(node, n);
      return;
    }
    this.disks.delete(node);
    this.goneAt.delete(node);
  }

  /** How many nodes this keeps state for (for tests: it must not grow with churn). */
  get tracked(): { nodes: number; disksByNode: number; goneSince: number } {
    return { nodes: this.informer.cache.size, disksByNode: this.disks.size, goneSince: this.goneAt.size };
  }

  private changed(node: string): void {
    this.batch.add(node);
  }
}
