// What the claims binder gathers about a claim, for tests of its decision: nothing held, no limit, no
// candidates, unless the test says otherwise.
import type { AgentView } from '../../api/free-disk.ts';
import { claimOwner } from '../../api/owner.ts';
import type { NodeDiskClaim } from '../../api/v1alpha1/claim-types.ts';
import type { ClaimFacts } from '../../controller/claim-decision.ts';

export function claimFacts(claim: NodeDiskClaim, agents: AgentView, o: Partial<ClaimFacts> = {}): ClaimFacts {
  return {
    claim,
    owner: claimOwner(claim.metadata.namespace ?? '', claim.metadata.name ?? ''),
    reserved: [],
    named: undefined,
    limit: { kind: 'none' },
    heldInNamespace: 0,
    bindsInFlight: 0,
    knownNoFit: undefined,
    candidates: [],
    agents,
    now: new Date(agents.now),
    ...o,
  };
}
