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
// - Idempotent: status is computed from the claim and the disks, and written only when it differs.
// - A finalizer on the claim: its deletion (or its namespace's) releases the disk, unless reclaimPolicy is
//   Retain.
// - Events on the claim as the PV binder's on a PVC: Bound, FailedBinding (the Pending line, each time it
//   changes, so no more often than the status is written), Lost, Released or Retained.
import type { Histogram } from '../lib/runtime/prom-client.ts';
import type { NodeDiskClaimClient } from '../api/claim-client.ts';
import type { NodeDiskClient } from '../api/client.ts';
import { disksFitLine, tenantPendingLine } from '../api/claim-fit.ts';
import { ANNOTATION_MAX_DISKS, API_VERSION, CLAIM_FINALIZER, CLAIM_KIND, FIELD_MANAGER } from '../api/constants.ts';
import { claimOwner } from '../api/owner.ts';
import { claimWipeToken } from '../api/wipe.ts';
import type { NodeDiskClaim, NodeDiskClaimStatus } from '../api/v1alpha1/claim-types.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import { isApiError } from '../lib/kube/errors.ts';
import { Informer, keyOfNamespaced } from '../lib/kube/informer.ts';
import { WorkQueue } from '../lib/kube/workqueue.ts';
import type { Logger } from '../lib/runtime/log.ts';
import type { AgentHeartbeats } from './agent-liveness.ts';
import { type EventRecorder, type ObjectRef, refOf } from './events.ts';
import { boundStatus, claimKeyOfOwner, type FitContext, filterKey, lostStatus, minBytes, misfit, misfitCounts, pendingStatus, sameClaimStatus } from './claim-fit.ts';
import { Allocator } from './allocator.ts';
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
  private readonly noFit = new Map<string, { line: string; disks?: string }>();
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

  private ctx(): FitContext {
    const hb = this.o.heartbeats;
    return { now: Date.now(), staleAfterMs: this.o.staleAfterMs, ...(hb ? { liveness: (node: string) => hb.liveness(node) } : {}) };
  }

  /**
   * The disks `claim` holds, by name (as the cache has them: the index only says where to look): reserved
   * for its owner and its UID. A reservation with no UID (written before the binder recorded one) is the
   * claim's only when the claim's own status names that disk: the object that was bound, never one created
   * again under its name (whose status starts empty).
   */
  private held(claim: NodeDiskClaim, owner: string): NodeDisk[] {
    const out: NodeDisk[] = [];
    for (const name of this.index.reservedFor(owner)) {
      const nd = this.o.diskInformer.cache.get(name);
      if (nd?.spec.desired?.state === 'Reserved' && nd.spec.desired.owner === owner && holds(claim, nd)) out.push(nd);
    }
    return out.sort((a, b) => (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''));
  }

  /** The index holds what the cache holds (see Allocator.syncIndex). */
  private syncIndex(): void {
    this.allocator.syncIndex();
  }

  /** One claim; returns ms after which to look again, if it should. */
  async reconcile(key: string): Promise<number | undefined> {
    const claim = this.informer.cache.get(key);
    if (!claim) return undefined;
    // Nothing is judged before both caches are known: a disk would look free, or a binding gone.
    if (!this.o.diskInformer.hasSynced || !this.limits.hasSynced || (this.o.heartbeats && !this.o.heartbeats.hasSynced)) return 1000;
    const ns = claim.metadata.namespace ?? '';
    const name = claim.metadata.name ?? '';
    const owner = claimOwner(ns, name);
    this.syncIndex();
    let held = this.held(claim, owner);

    if (claim.metadata.deletionTimestamp) {
      if (!claim.metadata.finalizers?.includes(CLAIM_FINALIZER)) return undefined;
      if (claim.spec?.reclaimPolicy !== 'Retain') {
        // Delete means what it means for a PersistentVolume: the data goes before the disk is free again.
        const wipe = claimWipeToken(claim.metadata.uid);
        for (const nd of held) {
          if (await this.release(nd, `claim ${key} deleted`, wipe))
            this.event(
              claim,
              nd,
              'Normal',
              'Released',
              'Release',
              `claim deleted: NodeDisk ${nd.metadata.name} on node ${nd.spec.nodeName} released; its node agent wipes it before it is free again`,
            );
        }
      } else if (held.length > 0) {
        this.o.log.info('claim deleted with reclaimPolicy Retain: its disk stays reserved', { claim: key, nodeDisk: held[0]!.metadata.name });
        const nd = held[0]!;
        this.event(claim, nd, 'Normal', 'Retained', 'Retain', `claim deleted with reclaimPolicy Retain: NodeDisk ${nd.metadata.name} on node ${nd.spec.nodeName} stays reserved for ${owner}`);
      }
      await this.setFinalizer(claim, false);
      return undefined;
    }
    if (!claim.metadata.finalizers?.includes(CLAIM_FINALIZER)) await this.setFinalizer(claim, true);
    // A reservation from before the binder recorded the claim's UID gets it now: from then on it is this object's.
    held = await Promise.all(held.map((nd) => (nd.spec.desired?.ownerUID ? nd : this.adopt(claim, owner, nd))));
    held = held.filter((nd) => nd.spec.desired?.state === 'Reserved' && nd.spec.desired.owner === owner && holds(claim, nd));

    // One disk per claim: a second one (a bind whose answer was lost, then tried again) goes back.
    if (held.length > 1) {
      const keep = held.find((nd) => nd.metadata.name === claim.status?.diskName) ?? held[0]!;
      for (const nd of held) if (nd !== keep) await this.release(nd, `claim ${key} holds ${keep.metadata.name} already`);
      held = [keep];
    }

    const ctx = this.ctx();
    const now = new Date(ctx.now);
    let status: NodeDiskClaimStatus;
    if (held.length === 1) {
      status = boundStatus(claim, held[0]!, ctx, now);
    } else if (claim.status?.phase === 'Bound' || claim.status?.phase === 'Lost') {
      // A binding is never moved to another disk by itself: the data is on the one it had.
      const was = claim.status.diskName ?? '';
      const nd = this.o.diskInformer.cache.get(was);
      const why = nd ? `NodeDisk ${was} is no longer reserved for this claim (its owner is ${nd.spec.desired?.owner || 'none'})` : `NodeDisk ${was} is gone`;
      status = lostStatus(claim, why, now);
    } else {
      const bound = await this.bind(claim, owner, ctx);
      if (bound.disk) status = boundStatus(claim, bound.disk, ctx, now);
      else if (bound.retryMs !== undefined) return bound.retryMs;
      else status = pendingStatus(claim, bound.message, now);
    }
    if (!sameClaimStatus(claim.status, status)) {
      const updated = await this.o.claims.applyStatus({ apiVersion: API_VERSION, kind: CLAIM_KIND, metadata: { name, namespace: ns }, status }, { fieldManager: FIELD_MANAGER.controller });
      this.informer.storeOwnWrite(updated);
      // The cluster-wide count goes to the log, for the people who may read NodeDisks, never to the team.
      const disks = status.phase === 'Pending' ? { disks: this.disksFit(claim, ctx) } : {};
      if (status.phase !== claim.status?.phase || status.message !== claim.status?.message)
        this.o.log.info(`claim ${status.phase}`, { claim: key, nodeDisk: status.diskName, message: status.message, ...disks });
      this.phaseEvent(updated, claim.status, status);
    }
    return undefined;
  }

  /** The event a status change is worth: a new phase, or a new Pending line. */
  private phaseEvent(claim: NodeDiskClaim, was: NodeDiskClaimStatus | undefined, now: NodeDiskClaimStatus): void {
    const disk = now.diskName !== undefined ? this.o.diskInformer.cache.get(now.diskName) : undefined;
    if (now.phase === 'Bound' && was?.phase !== 'Bound') {
      const created = Date.parse(claim.metadata.creationTimestamp ?? '');
      if ((was?.phase === undefined || was.phase === 'Pending') && !Number.isNaN(created)) this.o.bindSeconds?.observe(Math.max(0, Date.now() - created) / 1000);
      this.event(claim, disk, 'Normal', 'Bound', 'Bind', `bound to NodeDisk ${now.diskName} on node ${now.nodeName} (${now.path})`);
    } else if (now.phase === 'Pending' && (was?.phase !== 'Pending' || was.message !== now.message)) {
      this.event(claim, undefined, 'Warning', 'FailedBinding', 'Bind', now.message ?? 'no disk fits');
    } else if (now.phase === 'Lost' && was?.phase !== 'Lost') {
      this.event(claim, disk, 'Warning', 'Lost', 'Observe', `${now.message}: the claim stays Lost until a person acts (it is never moved to another disk)`);
    }
  }

  /** Best effort, and not waited for: a binding is never slowed by its event. */
  private event(claim: NodeDiskClaim, nd: NodeDisk | undefined, type: 'Normal' | 'Warning', reason: string, action: string, note: string): void {
    if (!this.o.events) return;
    const related: ObjectRef | undefined = nd ? refOf(nd) : undefined;
    void this.o.events.recordAbout(refOf(claim, CLAIM_KIND), related, type, reason, action, note);
  }

  /**
   * Reserves a disk that fits for `owner`, or says why none does. `retryMs` when the only fitting disks are
   * being bound by other workers right now (look again soon rather than write Pending for a moment).
   */
  private async bind(claim: NodeDiskClaim, owner: string, ctx: FitContext): Promise<{ disk?: NodeDisk; message: string; retryMs?: number }> {
    const spec = claim.spec ?? {};
    const filter = filterKey(claim);
    const min = minBytes(claim);
    const ns = claim.metadata.namespace ?? '';
    const outcome = await this.allocator.reserve({
      holder: { owner, ownerUID: claim.metadata.uid ?? '' },
      // The namespace's limit first: from here to the write's start nothing is awaited, so the count and
      // the binds under way are the truth for this worker and the others.
      admit: () => {
        const limit = this.limits.limit(ns);
        if (limit.kind === 'invalid')
          return {
            message: `the annotation ${ANNOTATION_MAX_DISKS} of namespace ${ns} is ${JSON.stringify(limit.value)}, not a whole number: no disk is bound for its claims until a cluster admin corrects it`,
          };
        if (limit.kind === 'max') {
          const holds = this.index.reservedForNamespace(ns);
          if (holds >= limit.disks)
            return {
              message: `namespace ${ns} holds ${holds} of the ${limit.disks} disks its annotation ${ANNOTATION_MAX_DISKS} allows (retained disks count too): delete a claim, or ask a cluster admin to free a retained disk or raise the limit`,
            };
          if (holds + (this.inFlightByNamespace.get(ns) ?? 0) >= limit.disks) return { message: '', retryMs: 100 };
        }
        if (this.noFitGeneration !== this.index.generation) {
          this.noFit.clear();
          this.noFitGeneration = this.index.generation;
        }
        const known = this.noFit.get(filter);
        return known !== undefined ? { message: known.line } : undefined;
      },
      // The smallest free disk that is big enough, then by name: as the PV binder, a claim gets no more than
      // it asked for, and the large disks stay for the claims that need them; among equal disks, a node's
      // are handed out in a predictable order (as reserve does).
      candidates: () => {
        if (spec.diskName === undefined) return this.index.candidates(min, spec.nodeName);
        const named = this.o.diskInformer.cache.get(spec.diskName);
        return named ? [named] : [];
      },
      fits: (nd) => misfit(claim, nd, ctx) === undefined,
      writing: (started) => {
        const n = (this.inFlightByNamespace.get(ns) ?? 0) + (started ? 1 : -1);
        if (n > 0) this.inFlightByNamespace.set(ns, n);
        else this.inFlightByNamespace.delete(ns);
      },
    });
    switch (outcome.kind) {
      case 'reserved':
        this.o.log.info('claim bound', { claim: keyOfNamespaced(claim), nodeDisk: outcome.disk.metadata.name, node: outcome.disk.spec.nodeName });
        return { disk: outcome.disk, message: '' };
      case 'refused':
        return { message: outcome.message, ...(outcome.retryMs !== undefined ? { retryMs: outcome.retryMs } : {}) };
      case 'busy':
        return { message: '', retryMs: 100 };
      case 'conflicts':
        return { message: '', retryMs: 200 };
      case 'none': {
        const message = tenantPendingLine(claim);
        this.noFit.set(filter, { line: message });
        return { message };
      }
    }
  }

  /** Why no disk fits `claim`, every disk counted (`0/9 disks fit: …`), once per filter and index generation. */
  private disksFit(claim: NodeDiskClaim, ctx: FitContext): string {
    const filter = filterKey(claim);
    const entry = this.noFit.get(filter);
    if (entry?.disks !== undefined && this.noFitGeneration === this.index.generation) return entry.disks;
    const { total, counts } = misfitCounts(claim, this.index, ctx);
    const disks = disksFitLine(claim, total, counts);
    if (entry && this.noFitGeneration === this.index.generation) entry.disks = disks;
    return disks;
  }

  /** Records the claim's UID on a reservation it holds from before UIDs were recorded. */
  private async adopt(claim: NodeDiskClaim, owner: string, nd: NodeDisk): Promise<NodeDisk> {
    const adopted = await this.allocator.adopt(nd, { owner, ownerUID: claim.metadata.uid ?? '' });
    if (adopted.spec.desired?.ownerUID === claim.metadata.uid) this.o.log.info('recorded the claim UID on its reservation', { claim: keyOfNamespaced(claim), nodeDisk: nd.metadata.name });
    return adopted;
  }

  /** Back to Available (with a wipe request if `wipe`), if still reserved as `nd` says. True when this released it. */
  private release(nd: NodeDisk, why: string, wipe?: string): Promise<boolean> {
    return this.allocator.release(nd, { why, ...(wipe ? { wipe } : {}) });
  }

  /** Adds or removes the controller's finalizer, by server-side apply of it alone (other finalizers stay). */
  private async setFinalizer(claim: NodeDiskClaim, present: boolean): Promise<void> {
    const metadata = { name: claim.metadata.name ?? '', namespace: claim.metadata.namespace ?? '', ...(present ? { finalizers: [CLAIM_FINALIZER] } : {}) };
    const updated = await this.o.claims.apply({ apiVersion: API_VERSION, kind: CLAIM_KIND, metadata }, { fieldManager: FIELD_MANAGER.controller });
    if (present || updated.metadata.finalizers?.length) this.informer.storeOwnWrite(updated);
  }
}

/** Whether `nd`, reserved for the claim's owner, is this claim's: its UID, or none recorded and the claim's status names it. */
export function holds(claim: NodeDiskClaim, nd: NodeDisk): boolean {
  const uid = nd.spec.desired?.ownerUID;
  if (uid) return uid === claim.metadata.uid;
  return claim.status?.diskName !== undefined && claim.status.diskName === nd.metadata.name;
}
