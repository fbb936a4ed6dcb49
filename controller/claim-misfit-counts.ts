// How many disks do not fit a claim and why, read off the binder's index for the cluster-wide line the
// controller logs (the per-disk judgement and the words are api/claim-fit.ts's, shared with the plugin).
import { type Misfit, minBytes, misfit } from '../api/claim-fit.ts';
import type { AgentView } from '../api/free-disk.ts';
import type { NodeDiskClaim } from '../api/v1alpha1/claim-types.ts';
import type { FreeDiskIndex } from './free-disk-index.ts';

/**
 * Every disk the index holds counted once, by the first reason it does not fit `claim` (as `misfit`
 * judges), for the cluster-wide line (api/claim-fit.ts disksFitLine) that the controller
 * logs. Without a selector most of it is read off the index's counts: what is
 * on other nodes, what is not free and why, what is free but too small; only the free disks big enough
 * are looked at one by one (for their agent). A selector can only be judged disk by disk, on the claim's
 * node if it names one.
 */
export function misfitCounts(claim: NodeDiskClaim, index: FreeDiskIndex, agents: AgentView): { total: number; counts: Map<Misfit, number> } {
  const spec = claim.spec ?? {};
  const total = index.count();
  const counts = new Map<Misfit, number>();
  const add = (m: Misfit | undefined, n = 1) => {
    if (m !== undefined && n > 0) counts.set(m, (counts.get(m) ?? 0) + n);
  };
  if (spec.diskName !== undefined) {
    const nd = index.disk(spec.diskName);
    add('other-disk', total - (nd ? 1 : 0));
    if (nd) add(misfit(claim, nd, agents));
    return { total, counts };
  }
  const node = spec.nodeName;
  if (node !== undefined) add('other-node', total - index.count(node));
  if (spec.selector !== undefined) {
    for (const nd of index.disks(node)) add(misfit(claim, nd, agents));
    return { total, counts };
  }
  for (const [kind, n] of index.notFreeCounts(node)) add(kind, n);
  const min = minBytes(claim);
  add('too-small', index.freeSmallerThan(min, node));
  for (const nd of index.candidates(min, node)) add(misfit(claim, nd, agents));
  return { total, counts };
}
