// Whether a NodeDisk fits a NodeDiskClaim, and why not, in the words of the two readers a Pending claim
// has (docs/adr/0034-node-disk-claims.md): the team that owns the claim reads only what its own filters
// ask ("no free disk of at least 1Gi on node m02"), never how many disks the cluster has or who holds
// them; a person who may read NodeDisks (the controller's log, `kubectl nodedisks status claim/NAME`)
// reads every disk counted by the first reason it does not fit ("0/9 disks fit: 4 reserved, …").
// Shared by the controller's binder and the plugin.
import { type AgentView, agentNotAlive, type NotFreeKind, notFreeByRecord } from './free-disk.ts';
import { matchesSelector, selectorWords } from './label-selector.ts';
import { quantityBytes } from './quantity.ts';
import type { NodeDiskClaim } from './v1alpha1/claim-types.ts';
import type { NodeDisk } from './v1alpha1/types.ts';

/** Why a disk does not fit a claim: it is not the one asked for, or may not go to a new holder (./free-disk.ts), or is too small. */
export type Misfit = 'other-disk' | 'other-node' | 'selector' | NotFreeKind | 'too-small';

/** The bytes a claim asks for at least (0 when it names no minCapacity). */
export function minBytes(claim: NodeDiskClaim): number {
  const min = claim.spec?.minCapacity;
  return min !== undefined ? (quantityBytes(min) ?? 0) : 0;
}

/**
 * Why `nd` cannot serve `claim`, or undefined when it fits: the claim's own filters (disk, node, selector),
 * then the one predicate (./free-disk.ts) with the claim's size between its two parts, in the order the
 * controller's index counts them (what the record says, what is too small, whose agent is stale now).
 */
export function misfit(claim: NodeDiskClaim, nd: NodeDisk, agents: AgentView): Misfit | undefined {
  const spec = claim.spec ?? {};
  if (spec.diskName !== undefined && spec.diskName !== nd.metadata.name) return 'other-disk';
  if (spec.nodeName !== undefined && spec.nodeName !== nd.spec.nodeName) return 'other-node';
  if (!matchesSelector(spec.selector, nd.metadata.labels)) return 'selector';
  const why = notFreeByRecord(nd);
  if (why) return why.kind;
  if ((nd.status?.node?.capacityBytes ?? 0) < minBytes(claim)) return 'too-small';
  return agentNotAlive(nd, agents)?.kind;
}

/** Every disk of `disks` counted once, by the first reason it does not fit `claim` (the controller reads the same off its index). */
export function misfitCountsOf(claim: NodeDiskClaim, disks: Iterable<NodeDisk>, agents: AgentView): { total: number; counts: Map<Misfit, number> } {
  let total = 0;
  const counts = new Map<Misfit, number>();
  for (const nd of disks) {
    total++;
    const m = misfit(claim, nd, agents);
    if (m !== undefined) counts.set(m, (counts.get(m) ?? 0) + 1);
  }
  return { total, counts };
}

function misfitWords(m: Misfit, claim: NodeDiskClaim): string {
  switch (m) {
    case 'other-disk':
      return `not ${claim.spec.diskName}`;
    case 'other-node':
      return `on other nodes than ${claim.spec.nodeName}`;
    case 'selector':
      return 'not matching the selector';
    case 'deleting':
      return 'being deleted';
    case 'reserved':
      return 'reserved';
    case 'wiping':
      return 'being wiped';
    case 'labelled':
      return 'labelled for the label policy';
    case 'cordoned':
      return 'cordoned';
    case 'failing':
      return 'failing';
    case 'node-gone':
      return 'on nodes that are gone';
    case 'node-replaced':
      return 'found on a machine replaced since';
    case 'unreported':
      return 'not reported by their agent yet';
    case 'phase':
      return 'not Available on their node';
    case 'unsized':
      return 'empty or of unknown size';
    case 'too-small':
      return `smaller than ${claim.spec.minCapacity}`;
    case 'stale':
      return 'on nodes whose agent is stale';
  }
}

/**
 * The cluster-wide line, for people who may read NodeDisks: `<fit>/<all> disks fit: <count> <why>, …`,
 * the largest count first.
 */
export function disksFitLine(claim: NodeDiskClaim, total: number, counts: ReadonlyMap<Misfit, number>): string {
  if (total === 0) return '0/0 disks fit: there are no NodeDisks';
  const parts = [...counts].map(([m, n]) => ({ n, words: misfitWords(m, claim) })).sort((a, b) => b.n - a.n || a.words.localeCompare(b.words));
  // Some may fit: a claim held back by its namespace's limit, or a disk freed since the claim was looked at.
  const fit = total - parts.reduce((sum, p) => sum + p.n, 0);
  return `${fit}/${total} disks fit${parts.length ? `: ${parts.map((p) => `${p.n} ${p.words}`).join(', ')}` : ''}`;
}

/**
 * The Pending line a team reads on its claim (status, Ready condition, FailedBinding Event): what its own
 * filters ask, and nothing of the other disks. A named disk is "not free for this claim" whether it does
 * not exist, is another team's, or does not match the claim's other filters: the words must not tell
 * which. So the line depends on the claim's spec only, and claims that ask the same read the same.
 */
export function tenantPendingLine(claim: NodeDiskClaim): string {
  const s = claim.spec ?? {};
  if (s.diskName !== undefined) return `disk ${s.diskName} is not free for this claim`;
  const size = s.minCapacity !== undefined ? ` of at least ${s.minCapacity}` : '';
  const node = s.nodeName !== undefined ? ` on node ${s.nodeName}` : '';
  const selector = s.selector !== undefined ? selectorWords(s.selector) : '';
  if (selector !== '') return `no free disk${size}${node} matches the selector ${selector}`;
  return `no free disk${size}${node}`;
}

/** What a claim's choice and its Pending line depend on besides the disks: claims with the same key get the same line. */
export function filterKey(claim: NodeDiskClaim): string {
  const s = claim.spec ?? {};
  return JSON.stringify([s.diskName ?? null, s.nodeName ?? null, s.minCapacity ?? null, s.selector ?? null]);
}
