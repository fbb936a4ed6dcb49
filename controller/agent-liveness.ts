// Which node agents are alive, from their heartbeat Leases (ADR 24): list+watch of the Leases labelled
// localtest.example.com/agent-heartbeat in the system namespace. A node's disks are stale once its Lease
// has not been renewed for its leaseDurationSeconds, as the node lifecycle controller judges a kubelet's
// node lease. The node is the Lease's holderIdentity, and only in the Lease named for that node
// (node-disks-agent-<node>): the admission policy lets an agent hold only its own node's Lease under that
// name, while a Lease of another name holding a node (written by anyone with Lease rights in the
// namespace) makes no node alive.
//
// Time: a renewal is timed by when this controller *saw* renewTime change, on its monotonic clock, so no
// agreement between clocks is needed while running. Only a Lease seen for the first time (at start, or a
// new node) is aged from its renewTime by the wall clock: otherwise a restarted controller would call a
// long-dead agent alive for a whole lease duration, and write every one of its disks twice.
//
// A fresh ↔ stale change (found by a timer at the expiry, or a renewal of a stale Lease) calls `onChange`
// with the nodes concerned, batched, so the controller re-reconciles their disks: no write of the agent's
// is needed for staleness to show, and renewals that change nothing cost nothing.
import { HEARTBEAT_LABEL_VALUE, LABEL_HEARTBEAT, heartbeatLeaseNode } from '../api/heartbeat-lease.ts';
import { leasesPath, type Lease } from '../lib/kube/lease.ts';
import { Informer } from '../lib/kube/informer.ts';
import type { RestClient } from '../lib/kube/rest.ts';
import { watch } from '../lib/kube/watch.ts';
import type { Logger } from '../lib/runtime/log.ts';
import { TickBatch } from '../lib/runtime/tick-batch.ts';

/** What a node's heartbeat says about its agent's reports. */
export type AgentLiveness =
  | { kind: 'alive' }
  | { kind: 'stale'; lease: string; renewTime: string; durationSeconds: number }
  /** No heartbeat Lease for the node (an agent from before ADR 24): judged by status.node.lastSeenTime. */
  | { kind: 'none' };

export interface HeartbeatsOptions {
  rest: RestClient;
  namespace: string;
  log: Logger;
  /** Nodes whose verdict changed: their disks need another look. */
  onChange: (nodes: ReadonlySet<string>) => void;
  /** Monotonic ms (performance.now) and wall ms (Date.now), replaceable in tests. */
  monotonic?: () => number;
  wall?: () => number;
  /** false: the informer lists in pages instead of the streaming watch-list (--no-watch-list). */
  watchList?: boolean;
}

interface Seen {
  lease: string;
  renewTime: string;
  durationMs: number;
  /** Monotonic ms when this renewTime was first seen (or its age, for a first sight). */
  observedAt: number;
  stale: boolean;
  timer: NodeJS.Timeout | undefined;
}

/** Leases without a leaseDurationSeconds are judged by the kubelet's node lease duration. */
const DEFAULT_DURATION_MS = 40_000;

export class AgentHeartbeats {
  readonly informer: Informer<Lease>;
  private readonly o: HeartbeatsOptions;
  private readonly nodes = new Map<string, Seen>();
  /** Lease name → node it was held by, so a deleted (or re-held) Lease forgets the right node. */
  private readonly holders = new Map<string, string>();
  /** One pass over the NodeDisks for all the nodes that changed together. */
  private readonly batch: TickBatch<string>;
  private readonly monotonic: () => number;
  private readonly wall: () => number;

  constructor(o: HeartbeatsOptions) {
    this.o = o;
    this.batch = new TickBatch((nodes) => this.o.onChange(nodes));
    this.monotonic = o.monotonic ?? (() => performance.now());
    this.wall = o.wall ?? (() => Date.now());
    const path = leasesPath(o.namespace);
    const labelSelector = `${LABEL_HEARTBEAT}=${HEARTBEAT_LABEL_VALUE}`;
    this.informer = new Informer<Lease>(
      {
        list: (l) => o.rest.request('GET', path, { query: { ...l, labelSelector } }),
        watch: (w, signal) => watch<Lease>(o.rest, path, { ...w, labelSelector }, signal),
        watchList: (w, signal) => watch<Lease>(o.rest, path, { ...w, labelSelector }, signal),
      },
      { onUpsert: (lease) => this.observe(lease), onDelete: (lease) => this.forget(lease) },
      { log: o.log.with({ loop: 'heartbeats' }), ...(o.watchList === false ? { watchList: false } : {}) },
    );
  }

  get hasSynced(): boolean {
    return this.informer.hasSynced;
  }

  /** Why the controller cannot judge agents' liveness, or undefined. */
  readiness(): string | undefined {
    if (!this.informer.hasSynced) return `heartbeat Leases not synced${this.informer.error ? `: ${this.informer.error.message}` : ''}`;
    if (this.informer.error) return `cannot list or watch the agents' heartbeat Leases in ${this.o.namespace}: ${this.informer.error.message}`;
    return undefined;
  }

  async run(signal: AbortSignal): Promise<void> {
    try {
      await this.informer.run(signal);
    } finally {
      for (const seen of this.nodes.values()) clearTimeout(seen.timer);
    }
  }

  /** How many nodes and Leases this keeps an entry for (they go with their Lease). */
  get tracked(): { heartbeats: number; heartbeat_leases: number } {
    return { heartbeats: this.nodes.size, heartbeat_leases: this.holders.size };
  }

  liveness(node: string): AgentLiveness {
    const seen = this.nodes.get(node);
    if (!seen) return { kind: 'none' };
    if (!this.expired(seen)) return { kind: 'alive' };
    return { kind: 'stale', lease: `${this.o.namespace}/${seen.lease}`, renewTime: seen.renewTime, durationSeconds: seen.durationMs / 1000 };
  }

  /**
   * Each node's heartbeat age: seconds since this controller saw its Lease renewed (for a Lease seen once
   * only, since its renewTime), on the clock the verdicts use, for the dashboard's heartbeat panel.
   */
  ages(): { node: string; ageSeconds: number }[] {
    const now = this.monotonic();
    return [...this.nodes].map(([node, seen]) => ({ node, ageSeconds: Math.max(0, now - seen.observedAt) / 1000 }));
  }

  private expired(seen: Seen): boolean {
    return this.monotonic() - seen.observedAt > seen.durationMs;
  }

  /** A Lease added or changed. */
  observe(lease: Lease): void {
    const name = lease.metadata.name ?? '';
    const node = heartbeatLeaseNode(lease);
    const before = this.holders.get(name);
    if (before !== undefined && before !== node) this.forget(lease);
    if (!node) return;
    this.holders.set(name, node);
    const renewTime = lease.spec?.renewTime ?? '';
    const durationMs = (lease.spec?.leaseDurationSeconds ?? DEFAULT_DURATION_MS / 1000) * 1000;
    const prev = this.nodes.get(node);
    let observedAt: number;
    if (prev && prev.renewTime === renewTime) observedAt = prev.observedAt;
    else if (prev) observedAt = this.monotonic();
    else {
      const age = this.wall() - Date.parse(renewTime);
      observedAt = this.monotonic() - (Number.isFinite(age) ? Math.max(0, age) : durationMs + 1);
    }
    clearTimeout(prev?.timer);
    const seen: Seen = { lease: name, renewTime, durationMs, observedAt, stale: false, timer: undefined };
    seen.stale = this.expired(seen);
    this.nodes.set(node, seen);
    this.arm(node, seen);
    if (!prev || prev.stale !== seen.stale) {
      if (prev?.stale) this.o.log.info('node agent renewed its heartbeat again', { node, lease: name });
      this.changed(node);
    }
  }

  /** A Lease deleted: its node has no heartbeat any more. */
  forget(lease: Lease): void {
    const name = lease.metadata.name ?? '';
    const node = this.holders.get(name);
    this.holders.delete(name);
    if (node === undefined) return;
    const seen = this.nodes.get(node);
    if (seen?.lease !== name) return;
    clearTimeout(seen.timer);
    this.nodes.delete(node);
    this.changed(node);
  }

  /** Looks again when the Lease would expire: that is when the node's disks turn stale. */
  private arm(node: string, seen: Seen): void {
    if (seen.stale) return;
    const inMs = Math.max(0, seen.observedAt + seen.durationMs - this.monotonic()) + 50;
    seen.timer = setTimeout(() => this.check(node), inMs);
    seen.timer.unref();
  }

  /** The expiry timer: a Lease not renewed since makes its node stale. */
  check(node: string): void {
    const seen = this.nodes.get(node);
    if (!seen || seen.stale) return;
    if (!this.expired(seen)) {
      this.arm(node, seen);
      return;
    }
    seen.stale = true;
    this.o.log.warn('node agent heartbeat expired; its disks are stale', { node, lease: seen.lease, renewTime: seen.renewTime, leaseDurationSeconds: seen.durationMs / 1000 });
    this.changed(node);
  }

  private changed(node: string): void {
    this.batch.add(node);
  }
}
