// The claim/NAME form of `kubectl nodedisks status` (./status.ts): a claim's words and, once Bound, the
// PersistentVolumeClaim a pod would use instead (../claim-model.ts), one claim after the other, as `status
// NAME…` prints disks. A Pending claim's status says only what the team's own filters ask; a reader who
// may also list NodeDisks gets every disk counted by why it does not fit, as the controller judges it
// (api/claim-fit.ts).
import { disksFitLine, misfitCountsOf } from '../../api/claim-fit.ts';
import type { AgentView } from '../../api/free-disk.ts';
import type { NodeDiskClaim } from '../../api/v1alpha1/claim-types.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { ApiError } from '../../lib/kube/errors.ts';
import type { Lease } from '../../lib/kube/lease.ts';
import { claimName, describeClaim } from '../claim-model.ts';
import type { Session } from '../context.ts';
import { EXIT, PluginError, usageError } from '../errors.ts';
import { escapeControl } from '../escape.ts';

/** How `status` judges an agent: its heartbeat Leases (or why they cannot be read), else its last report. */
export interface AgentJudge {
  leases: () => Promise<Map<string, Lease> | ApiError>;
  expired: (lease: Lease, now: number) => boolean;
  staleMs: number;
}

/** Every NodeDisk, or undefined when the reader may not list them (a team with namespaced rights only). */
async function allDisks(session: Session): Promise<NodeDisk[] | undefined> {
  const disks: NodeDisk[] = [];
  try {
    for await (const page of session.client().listPages({ pageSize: 500 })) disks.push(...page.items);
  } catch (err) {
    if (err instanceof ApiError && (err.statusCode === 401 || err.statusCode === 403)) return undefined;
    throw err;
  }
  return disks;
}

/** The cluster-wide line for a Pending claim, when the reader may list NodeDisks. */
async function disksFit(session: Session, c: NodeDiskClaim, judge: AgentJudge): Promise<string | undefined> {
  if (c.status?.phase !== 'Pending') return undefined;
  const disks = await allDisks(session);
  if (!disks) return undefined;
  const now = Date.now();
  const leases = await judge.leases();
  const agents: AgentView = {
    now,
    staleAfterMs: judge.staleMs,
    // Leases not readable: each agent is judged by its last report, as the controller does for a node without one.
    ...(leases instanceof ApiError
      ? {}
      : {
          liveness: (node: string) => {
            const lease = leases.get(node);
            return { kind: lease ? (judge.expired(lease, now) ? 'stale' : 'alive') : 'none' } as const;
          },
        }),
  };
  const { total, counts } = misfitCountsOf(c, disks, agents);
  return disksFitLine(c, total, counts);
}

/** Handles `status claim/NAME…` and answers true; answers false when no argument names a claim. */
export async function claimStatus(session: Session, args: string[], namespaceFlag: string | undefined, judge: AgentJudge): Promise<boolean> {
  const names = args.map(claimName);
  if (names.every((n) => n === undefined)) return false;
  if (names.some((n) => n === undefined)) throw usageError('status takes NodeDisk names or claim/NAME, not both at once');
  const namespace = session.namespace(namespaceFlag);
  const texts: string[] = [];
  for (const name of names as string[]) {
    try {
      const c = await session.claims().get(namespace, name);
      texts.push(describeClaim(c, await disksFit(session, c, judge)));
    } catch (err) {
      if (err instanceof ApiError && err.statusCode === 404 && err.status.details?.name) {
        throw new PluginError(`nodediskclaim.localtest.example.com "${name}" not found in namespace ${namespace}; list them with: kubectl nodedisks claims -n ${namespace}`, EXIT.notFound);
      }
      throw err;
    }
  }
  // Every value is text others wrote (the controller's message, a person's selector).
  session.io.out(escapeControl(texts.join('\n'), true));
  return true;
}
