// The claims binder: binds each NodeDiskClaim to one free NodeDisk that fits, as the PersistentVolume
// binder binds a PVC, and releases the disk when the claim is deleted (docs/adr/0034-node-disk-claims.md).
//
// - The truth of a binding is the disk's owner and owner UID: a NodeDisk reserved for
//   `claim:<namespace>/<name>` with the claim's UID is that claim's, whatever the claim's status says (so a
//   restarted controller finds its bindings where it left them, and never hands a disk to two claims). A
//   claim created again under the same name is another object: the old one's retained disk is not its.
// - Binding is a server-side apply of spec.desired {Reserved, owner} conditional on the resourceVersion the
//   disk was chosen from: if anyone (a person, the label policy, another claim) wrote the disk since, the
//   API server refuses it and the claim chooses again from a fresh read (ADR 11).
// - Each look at a claim gathers what its caches say, asks ./claim-decision.ts (a pure function) for the
//   one next step, and performs it: one write and the event the decision names. A step that leaves more
//   to do (finalizer, then disk, then status) is followed by another gather, in the same look.
// - Idempotent: status is computed from the claim and the disks, and written only when it differs.
// - A finalizer on the claim: its deletion (or its namespace's) releases the disk, unless reclaimPolicy is
//   Retain.
// - Events on the claim as the PV binder's on a PVC: Bound, FailedBinding (the Pending line, each time it
//   changes, so no more often than the status is written), Lost, Released or Retained.
import type { Histogram } from '../lib/runtime/prom-client.ts';
import type { NodeDiskClaimClient } from '../api/claim-client.ts';
import type { NodeDiskClient } from '../api/client.ts';
import { disksFitLine, filterKey, minBytes } from '../api/claim-fit.ts';
import { API_VERSION, CLAIM_FINALIZER, CLAIM_KIND, FIELD_MANAGER } from '../api/constants.ts';
import type { AgentView } from '../api/free-disk.ts';
import { claimKeyOfOwner, claimOwner } from '../api/owner.ts';
import type { NodeDiskClaim } from '../api/v1alpha1/claim-types.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import { isApiError } from '../lib/kube/errors.ts';
import { Informer, keyOfNamespaced } from '../lib/kube/informer.ts';
import { WorkQueue } from '../lib/kube/workqueue.ts';
import type { Logger } from '../lib/runtime/log.ts';
import type { AgentHeartbeats } from './agent-liveness.ts';
import { type EventRecorder, refOf } from './events.ts';
import { Allocator, MAX_ATTEMPTS } from './allocator.ts';
import { type Candidate, type ClaimDecision, type ClaimEvent, type ClaimFacts, decideClaim, holds } from './claim-decision.ts';
import { misfitCounts } from './claim-misfit-counts.ts';
import { sameClaimStatus } from './claim-phase.ts';
import type { FreeDiskIndex } from './free-disk-index.ts';
import { NamespaceLimits } from './namespace-limits.ts';

export interface BinderOptions {
  claims: NodeDiskClaimClient;
  disks: NodeDiskClient;
  /** The controller's NodeDisk informer: the binder reads its cache and stores its own writes in it. */
  diskInformer: Informer<NodeDisk>;
  heartbeats?: Pick<AgentHeartbeats, 'hasSynced' | 'liveness'>;
  /** For a node with no heartbeat Lease: a report older than this is stale. */
  staleAfterMs: number;
  workers: number;
  log: Logger;
  /** Events on the claims (none without). */
  events?: EventRecorder;
  /** Seconds from a claim's creation to its first Bound. */
  bindSeconds?: Pick<Histogram, 'observe'>;
  /** Sync through the streaming watch-list where the API server offers it (the default). */
  watchList?: boolean;
  /** A claim is gone (`claim:<namespace>/<name>`): the NodeDisks reserved for it say whether they are Released. */
  onClaimGone?: (owner: string) => void;
}

/** Steps of one look at a claim (a new claim takes three: finalizer, disk, status); past them it is looked at again later. */
const MAX_STEPS = 12;

export class Binder {
  readonly queue = new WorkQueue({ baseDelayMs: 200, maxDelayMs: 5 * 60_000 });
  readonly informer: Informer<NodeDiskClaim>;
  private readonly o: BinderOptions;
  /** Binds under way by namespace: two workers never take a namespace past its limit together. */
  private readonly inFlightByNamespace = new Map<string, number>();
  /** How many disks each namespace's claims may hold (annotation localtest.example.com/max-disks). */
  readonly limits: NamespaceLimits;
  /** NodeDisks changed since the last flush (one pass over the claims for all of them). */
  private readonly changedDisks = new Set<string>();
  private anyDiskChanged = false;
  private flushScheduled = false;
  private failing: { key: string; error: string } | undefined;
  /** Hands out and takes back disks, from the index of free disks (shared with the CSI driver's code). */
  readonly allocator: Allocator;
  /** The NodeDisks by what a claim asks of them: a bind looks at candidates only, not at every NodeDisk. */
  get index(): FreeDiskIndex {
    return this.allocator.index;
  }
  /**
   * Claim filters (filterKey) no disk fits, for the index's generation they were found at: the claims
   * that ask the same share one look (and one count over the disks, for the log) until a disk or an
   * agent changes. The Pending line itself depends on the filter only (api/claim-fit.ts).
   */
  private readonly noFit = new Map<string, string>();
  /** The cluster-wide line (`0/9 disks fit: …`) for those filters, for the log, counted once per generation too. */
  private readonly noFitCounts = new Map<string, string>();
  private noFitGeneration = -1;

  constructor(o: BinderOptions) {
    this.o = o;
    this.allocator = new Allocator({ disks: o.disks, diskInformer: o.diskInformer, fieldManager: FIELD_MANAGER.controller, log: o.log });
    this.informer = new Informer<NodeDiskClaim>(
      {
        list: (l) => o.claims.list(undefined, l),
        watch: (w, s) => o.claims.watch(undefined, w, s),
        watchList: (w, s) => o.claims.watch(undefined, w, s),
      },
      {
        onUpsert: (c) => this.queue.add(keyOfNamespaced(c)),
        // Gone: its reconcile finds nothing to do, and a failure it had no longer makes us unready.
        onDelete: (c) => {
          this.queue.add(keyOfNamespaced(c));
          o.onClaimGone?.(claimOwner(c.metadata.namespace ?? '', c.metadata.name ?? ''));
        },
        onSync: () => {
          for (const key of this.informer.cache.keys()) this.queue.add(key, 'sweep');
        },
      },
      { log: o.log.with({ loop: 'claims-informer' }), key: keyOfNamespaced, ...(o.watchList === false ? { watchList: false } : {}) },
    );
    this.limits = new NamespaceLimits({
      rest: o.claims.rest,
      log: o.log,
      // A limit raised (or set): the namespace's claims without a disk look again.
      onChange: (ns) => {
        for (const [key, c] of this.informer.cache) if (c.metadata.namespace === ns && c.status?.phase !== 'Bound' && c.status?.phase !== 'Lost') this.queue.add(key);
      },
      ...(o.watchList === false ? { watchList: false } : {}),
    });
  }

  /**
   * A NodeDisk changed (or is gone): the claim it is reserved for, the claim whose status names it, and
   * every claim without a disk look again, once per tick for all the disks that changed together.
   */
  diskChanged(name?: string): void {
    if (name !== undefined) {
      this.changedDisks.add(name);
      this.index.update(name, this.o.diskInformer.cache.get(name));
    } else this.index.touch();
    this.anyDiskChanged = true;
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.flushScheduled = false;
    const changed = new Set(this.changedDisks);
    this.changedDisks.clear();
    const any = this.anyDiskChanged;
    this.anyDiskChanged = false;
    const owners = new Set<string>();
    for (const name of changed) {
      const key = claimKeyOfOwner(this.o.diskInformer.cache.get(name)?.spec.desired?.owner);
      if (key !== undefined) owners.add(key);
    }
    for (const [key, c] of this.informer.cache) {
      const bound = c.status?.phase === 'Bound' || c.status?.phase === 'Lost';
      if ((any && !bound) || owners.has(key) || (c.status?.diskName !== undefined && changed.has(c.status.diskName))) this.queue.add(key);
    }
  }

  /**
   * The claim a NodeDisk's reservation is for, in words, when that claim is gone: no claim of the name, or
   * one that does not hold the disk (another UID: created again under the name). Undefined when the disk
   * is not reserved for a claim, or its claim is there.
   */
  claimGoneOf(nd: NodeDisk): string | undefined {
    const d = nd.spec.desired;
    const key = d?.state === 'Reserved' ? claimKeyOfOwner(d.owner) : undefined;
    if (key === undefined) return undefined;
    const claim = this.informer.cache.get(key);
    if (claim && holds(claim, nd)) return undefined;
    return d?.ownerUID ? `NodeDiskClaim ${key} (UID ${d.ownerUID})` : `NodeDiskClaim ${key}`;
  }

  /** The NodeDisks reserved for `owner`, by name (the index's word: a guide for what to look at again). */
  reservedFor(owner: string): ReadonlySet<string> {
    return this.index.reservedFor(owner);
  }

  readiness(): string | undefined {
    if (!this.informer.hasSynced) return `claims informer not synced${this.informer.error ? `: ${this.informer.error.message}` : ''}`;
    if (this.informer.error) return `cannot list or watch NodeDiskClaims: ${this.informer.error.message}`;
    const limits = this.limits.readiness();
    if (limits) return limits;
    if (this.failing) return `the last write for claim ${this.failing.key} failed: ${this.failing.error}`;
    return undefined;
  }

  async run(signal: AbortSignal): Promise<void> {
    const informerDone = this.informer.run(signal);
    const limitsDone = this.limits.run(signal);
    signal.addEventListener('abort', () => this.queue.shutDown(), { once: true });
    const workers = Array.from({ length: this.o.workers }, () => this.worker(signal));
    await Promise.all([informerDone, limitsDone, ...workers]);
  }

  private async worker(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const key = await this.queue.get();
      if (key === undefined) return;
      try {
        const again = await this.reconcile(key);
        this.queue.forget(key);
        if (this.failing?.key === key) this.failing = undefined;
        if (again !== undefined) this.queue.addAfter(key, again);
      } catch (err) {
        if (signal.aborted) return;
        if (isApiError(err, 404)) {
          this.queue.forget(key);
        } else {
          this.failing = { key, error: (err as Error).message };
          const delay = this.queue.addRateLimited(key);
          this.o.log.warn('claim reconcile failed; retrying', { claim: key, error: (err as Error).message, retryInMs: delay });
        }
      } finally {
        this.queue.done(key);
      }
    }
  }

  private agents(): AgentView {
    const hb = this.o.heartbeats;
    return { now: Date.now(), staleAfterMs: this.o.staleAfterMs, ...(hb ? { liveness: (node: string) => hb.liveness(node) } : {}) };
  }

  /** One claim: gather, decide, act, until a step leaves nothing more to do now; returns ms after which to look again, if it should. */
  async reconcile(key: string): Promise<number | undefined> {
    let conflicts = 0;
    for (let step = 0; step < MAX_STEPS; step++) {
      const claim = this.informer.cache.get(key);
      if (!claim) return undefined;
      // Nothing is judged before both caches are known: a disk would look free, or a binding gone.
      if (!this.o.diskInformer.hasSynced || !this.limits.hasSynced || (this.o.heartbeats && !this.o.heartbeats.hasSynced)) return 1000;
      // From here to the bind's write nothing is awaited: the namespace's count and the binds under way
      // are the truth for this worker and the others.
      const facts = this.gather(claim);
      const next = await this.act(claim, facts, decideClaim(facts));
      if (next === 'conflict') {
        if (++conflicts >= MAX_ATTEMPTS) return 200;
      } else if (next !== 'again') return next;
    }
    return 1000;
  }

  /** What the caches say about a claim: the disks reserved for it, its namespace's limit, the candidates. */
  private gather(claim: NodeDiskClaim): ClaimFacts {
    this.allocator.syncIndex();
    const ns = claim.metadata.namespace ?? '';
    const owner = claimOwner(ns, claim.metadata.name ?? '');
    const cache = this.o.diskInformer.cache;
    const reserved: NodeDisk[] = [];
    for (const name of this.index.reservedFor(owner)) {
      const nd = cache.get(name);
      if (nd) reserved.push(nd);
    }
    reserved.sort((a, b) => (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''));
    if (this.noFitGeneration !== this.index.generation) {
      this.noFit.clear();
      this.noFitCounts.clear();
      this.noFitGeneration = this.index.generation;
    }
    const agents = this.agents();
    const diskName = claim.status?.diskName;
    return {
      claim,
      owner,
      reserved,
      named: diskName !== undefined ? cache.get(diskName) : undefined,
      limit: this.limits.limit(ns),
      heldInNamespace: this.index.reservedForNamespace(ns),
      bindsInFlight: this.inFlightByNamespace.get(ns) ?? 0,
      knownNoFit: this.noFit.get(filterKey(claim)),
      candidates: this.candidates(claim),
      agents,
      now: new Date(agents.now),
    };
  }

  /**
   * The smallest free disk that is big enough, then by name: as the PV binder, a claim gets no more than it
   * asked for, and the large disks stay for the claims that need them; among equal disks, a node's are
   * handed out in a predictable order (as reserve does). Lazy: a bound claim never reads them.
   */
  private *candidates(claim: NodeDiskClaim): Iterable<Candidate> {
    const spec = claim.spec ?? {};
    const cache = this.o.diskInformer.cache;
    const seen = spec.diskName !== undefined ? [cache.get(spec.diskName)] : this.index.candidates(minBytes(claim), spec.nodeName);
    for (const s of seen) {
      const disk = s && cache.get(s.metadata.name ?? '');
      if (disk) yield { disk, busy: this.allocator.busy(disk.metadata.name ?? '') };
    }
  }

  /** Performs one decision: 'again' when there is more to do now, 'conflict' when a bind lost its disk to another writer. */
  private async act(claim: NodeDiskClaim, facts: ClaimFacts, d: ClaimDecision): Promise<number | undefined | 'again' | 'conflict'> {
    const key = keyOfNamespaced(claim);
    switch (d.kind) {
      case 'none':
        return undefined;
      case 'retry':
        return d.afterMs;
      case 'finalizer':
        if (d.event?.reason === 'Retained') this.o.log.info('claim deleted with reclaimPolicy Retain: its disk stays reserved', { claim: key, nodeDisk: d.event.disk?.metadata.name });
        this.event(claim, d.event);
        await this.setFinalizer(claim, d.present);
        return d.present ? 'again' : undefined;
      case 'adopt': {
        const adopted = await this.allocator.adopt(d.disk, { owner: facts.owner, ownerUID: claim.metadata.uid ?? '' });
        if (adopted.spec.desired?.ownerUID === claim.metadata.uid) this.o.log.info('recorded the claim UID on its reservation', { claim: key, nodeDisk: d.disk.metadata.name });
        return 'again';
      }
      case 'release': {
        if (!(await this.allocator.release(d.disk, { why: d.why, ...(d.wipe ? { wipe: d.wipe } : {}) }))) return 200;
        this.event(claim, d.event);
        return 'again';
      }
      case 'bind': {
        const ns = claim.metadata.namespace ?? '';
        this.inFlightByNamespace.set(ns, (this.inFlightByNamespace.get(ns) ?? 0) + 1);
        let disk: NodeDisk | undefined;
        try {
          disk = await this.allocator.reserveDisk(d.disk, { owner: facts.owner, ownerUID: claim.metadata.uid ?? '' });
        } finally {
          const n = (this.inFlightByNamespace.get(ns) ?? 1) - 1;
          if (n > 0) this.inFlightByNamespace.set(ns, n);
          else this.inFlightByNamespace.delete(ns);
        }
        if (!disk) return 'conflict';
        this.o.log.info('claim bound', { claim: key, nodeDisk: disk.metadata.name, node: disk.spec.nodeName });
        return 'again';
      }
      default: {
        const status = d.status;
        if (d.noDiskFits && status.message !== undefined) this.noFit.set(filterKey(claim), status.message);
        if (sameClaimStatus(claim.status, status)) return undefined;
        const metadata = { name: claim.metadata.name ?? '', namespace: claim.metadata.namespace ?? '' };
        const updated = await this.o.claims.applyStatus({ apiVersion: API_VERSION, kind: CLAIM_KIND, metadata, status }, { fieldManager: FIELD_MANAGER.controller });
        this.informer.storeOwnWrite(updated);
        // The cluster-wide count goes to the log, for the people who may read NodeDisks, never to the team.
        const disks = status.phase === 'Pending' ? { disks: this.disksFit(claim, facts.agents) } : {};
        if (status.phase !== claim.status?.phase || status.message !== claim.status?.message)
          this.o.log.info(`claim ${status.phase}`, { claim: key, nodeDisk: status.diskName, message: status.message, ...disks });
        const created = Date.parse(claim.metadata.creationTimestamp ?? '');
        if (d.event?.reason === 'Bound' && (claim.status?.phase === undefined || claim.status.phase === 'Pending') && !Number.isNaN(created))
          this.o.bindSeconds?.observe(Math.max(0, Date.now() - created) / 1000);
        this.event(updated, d.event);
        return undefined;
      }
    }
  }

  /** Best effort, and not waited for: a binding is never slowed by its event. */
  private event(claim: NodeDiskClaim, e: ClaimEvent | undefined): void {
    if (!this.o.events || !e) return;
    void this.o.events.recordAbout(refOf(claim, CLAIM_KIND), e.disk ? refOf(e.disk) : undefined, e.type, e.reason, e.action, e.note);
  }

  /** Why no disk fits `claim`, every disk counted (`0/9 disks fit: …`), once per filter and index generation. */
  private disksFit(claim: NodeDiskClaim, agents: AgentView): string {
    const filter = filterKey(claim);
    const known = this.noFitCounts.get(filter);
    if (known !== undefined && this.noFitGeneration === this.index.generation) return known;
    const { total, counts } = misfitCounts(claim, this.index, agents);
    const disks = disksFitLine(claim, total, counts);
    if (this.noFitGeneration === this.index.generation) this.noFitCounts.set(filter, disks);
    return disks;
  }

  /** Adds or removes the controller's finalizer, by server-side apply of it alone (other finalizers stay). */
  private async setFinalizer(claim: NodeDiskClaim, present: boolean): Promise<void> {
    const metadata = { name: claim.metadata.name ?? '', namespace: claim.metadata.namespace ?? '', ...(present ? { finalizers: [CLAIM_FINALIZER] } : {}) };
    const updated = await this.o.claims.apply({ apiVersion: API_VERSION, kind: CLAIM_KIND, metadata }, { fieldManager: FIELD_MANAGER.controller });
    if (present || updated.metadata.finalizers?.length) this.informer.storeOwnWrite(updated);
  }
}
