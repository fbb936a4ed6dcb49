// Whether the agent can do its job now (/readyz), whether its loop is stuck (/healthz), and whether its
// heartbeat may say "this node's reports are current" (ADR 12, ADR 24).
import { ApiError } from '../lib/kube/errors.ts';

/** What the three answers are judged from, read from the agent's pieces at the moment of asking. */
export interface AgentState {
  synced: boolean;
  /** The informer's last list or watch error, until a success. */
  informerError: Error | undefined;
  /** Whether the disk dir was scanned at least once. */
  scanned: boolean;
  /** Why the disk dir cannot be read, while it cannot. */
  dirProblem: string | undefined;
  /** Writes the API server refused (401/403), by diskID, until a reconcile of that disk succeeds. */
  refused: ReadonlyMap<string, string>;
  heartbeat: { lease: string; problem: string | undefined };
  /** Why the work loop is stuck, if it is (see liveness). */
  stuck: string | undefined;
  /** Why this node's UID is not known yet (ADR 35), while it is not. */
  identityProblem?: string | undefined;
}

/**
 * Why the agent is not ready, or undefined: ready means able to do its job now, i.e. synced with the API
 * server and still listing and watching, its disk dir readable, and its last writes not refused.
 */
export function readiness(s: AgentState): string | undefined {
  if (!s.synced) return `not yet synced with the API server${s.informerError ? `: ${describe(s.informerError)}` : ''}`;
  if (s.informerError) return `cannot list or watch NodeDisks: ${describe(s.informerError)}`;
  if (s.dirProblem) return s.dirProblem;
  if (s.identityProblem) return `cannot tell which machine this is (the node's UID): ${s.identityProblem}`;
  if (!s.scanned) return 'disk dir not scanned yet';
  if (s.refused.size > 0) {
    const [diskID, why] = s.refused.entries().next().value!;
    return `the API server refused ${s.refused.size === 1 ? 'a write' : `writes for ${s.refused.size} disks`} of this agent (disk ${diskID}: ${why})`;
  }
  if (s.heartbeat.problem) return `cannot renew the heartbeat Lease ${s.heartbeat.lease}: ${s.heartbeat.problem}`;
  return undefined;
}

/**
 * Why the agent is not healthy, or undefined: its work loop has been on one piece of work (a scan, a
 * disk) for longer than `limitMs`. Waiting for work is healthy.
 */
export function liveness(busySince: number | undefined, limitMs: number, now = Date.now()): string | undefined {
  if (busySince === undefined) return undefined;
  const stuckFor = now - busySince;
  return stuckFor > limitMs ? `work loop has not turned for ${Math.round(stuckFor / 1000)} s` : undefined;
}

/**
 * Whether a heartbeat may say "this node's reports are current": synced and still listing and watching
 * its NodeDisks, the disk dir read and readable, the work loop turning. While it cannot see its NodeDisks
 * (list or watch failing: RBAC revoked, a proxy that closes every watch) it would act on what it last saw,
 * and while the dir cannot be read it would report a look it did not take: the Lease lapses then, and the
 * controller shows the node's disks as stale (ADR 24).
 */
export function mayRenew(s: AgentState): boolean {
  return s.synced && s.informerError === undefined && s.scanned && s.dirProblem === undefined && s.stuck === undefined;
}

/** An error as readiness shows it: the HTTP status of an API refusal, then its message. */
export function describe(err: Error): string {
  return err instanceof ApiError ? `${err.statusCode}${err.reason ? ` ${err.reason}` : ''}: ${err.message}` : err.message;
}
