// kubectl nodedisks status [NAME…]: per disk, desired vs reported vs the controller's view, in words;
// with no name, a summary per node.
import type { CommandSpec } from '../args.ts';
import { AUTO_OWNER, CLAIM_OWNER_PREFIX, CONDITION, CORDONED_VALUE, DEFAULT_SYSTEM_NAMESPACE, LABEL_AUTO_RESERVE, LABEL_CORDONED, PV_OWNER_PREFIX } from '../../api/constants.ts';
import { claimGone } from '../../api/owner.ts';
import { failing } from '../../api/free-disk.ts';
import { HEARTBEAT_LABEL_VALUE, LABEL_HEARTBEAT, heartbeatLeaseNode } from '../../api/heartbeat-lease.ts';
import { leasesPath, type Lease } from '../../lib/kube/lease.ts';
import { ApiError } from '../../lib/kube/errors.ts';
import { listPages } from '../../lib/kube/pager.ts';
import type { DriveFacts, NodeDisk } from '../../api/v1alpha1/types.ts';
import { holdsData, pendingWipe } from '../../api/wipe.ts';
import { durationFlag, type Session } from '../context.ts';
import { escapeControl } from '../escape.ts';
import { age, iec } from '../kubectl/format.ts';
import { table } from '../kubectl/tabwriter.ts';
import { selected, resolveTargets, type SelectionFlags } from '../select.ts';
import { NAMESPACE_FLAG } from './claim.ts';
import { claimStatus } from './claim-status.ts';
import { SELECTION_FLAGS } from './flags.ts';
import { goneBecause } from './prune.ts';

export interface StatusArgs extends SelectionFlags {
  names: string[];
  namespace?: string | undefined;
  'stale-after'?: string | undefined;
  'agent-lease-namespace'?: string | undefined;
}

/** The role that lets a person read the heartbeat Leases (kustomize/rbac/user_roles.yaml). */
export const HEARTBEAT_ROLE = 'nodedisks-heartbeat-viewer';
/** A Lease without leaseDurationSeconds lasts as long as a kubelet's node lease, as the controller judges it. */
const DEFAULT_LEASE_SECONDS = 40;

/**
 * The agents' heartbeat Leases (ADR 24) by node (their holderIdentity, in the Lease named for it), as the controller reads them
 * (controller/agent-liveness.ts); or why they could not be read. Liveness is taken from these, not from
 * status.node.lastSeenTime, which moves only when a report changes: on a quiet cluster it is old while
 * every agent is alive.
 */
async function heartbeatLeases(session: Session, namespace: string): Promise<Map<string, Lease> | ApiError> {
  const byNode = new Map<string, Lease>();
  const fetch = (cont: string | undefined): Promise<{ items?: Lease[]; metadata?: { continue?: string } }> =>
    session.restClient().request('GET', leasesPath(namespace), { query: { labelSelector: `${LABEL_HEARTBEAT}=${HEARTBEAT_LABEL_VALUE}`, limit: '500', ...(cont ? { continue: cont } : {}) } });
  try {
    for await (const page of listPages(fetch)) {
      for (const lease of page.items ?? []) {
        // Only a Lease named for its holder speaks for it, as for the controller.
        const node = heartbeatLeaseNode(lease);
        if (node) byNode.set(node, lease);
      }
    }
  } catch (err) {
    // Forbidden, or no Lease API at all: the Leases cannot be read, which status says rather than guess.
    if (err instanceof ApiError && (err.statusCode === 401 || err.statusCode === 403 || err.statusCode === 404)) return err;
    throw err;
  }
  return byNode;
}

/** Whether a heartbeat Lease has lapsed: not renewed for its leaseDurationSeconds (by this machine's clock). */
export function leaseExpired(lease: Lease, now: number): boolean {
  const renewed = Date.parse(lease.spec?.renewTime ?? '');
  const seconds = lease.spec?.leaseDurationSeconds ?? DEFAULT_LEASE_SECONDS;
  return !Number.isFinite(renewed) || now - renewed > seconds * 1000;
}

/**
 * A node's agent as the controller judges it: by its heartbeat Lease; a node without one (an agent from
 * before heartbeats) by its last report. When the Leases may not be read, that is said, not guessed.
 * `column` is the summary's AGENT, `words` the line of `status NAME`.
 */
export function agentVerdict(leases: Map<string, Lease> | ApiError, node: string, lastSeen: number, now: number, staleMs: number): { column: 'ok' | 'STALE' | 'unknown'; words: string } {
  if (leases instanceof ApiError) return { column: 'unknown', words: `unknown: cannot read the agents' heartbeat Leases (the ${HEARTBEAT_ROLE} Role grants it)` };
  const lease = leases.get(node);
  if (lease) {
    const renewed = lease.spec?.renewTime ?? '';
    if (!leaseExpired(lease, now)) return { column: 'ok', words: `alive: heartbeat renewed ${age(renewed, now)} ago` };
    const lapse = lease.spec?.leaseDurationSeconds ?? DEFAULT_LEASE_SECONDS;
    return {
      column: 'STALE',
      words: Number.isFinite(Date.parse(renewed)) ? `STALE: heartbeat not renewed for ${age(renewed, now)} (it lapses after ${lapse}s)` : 'STALE: its heartbeat Lease was never renewed',
    };
  }
  const seen = lastSeen ? new Date(lastSeen).toISOString() : '';
  if (lastSeen && now - lastSeen <= staleMs) return { column: 'ok', words: `alive: no heartbeat Lease, but a report ${age(seen, now)} ago` };
  return { column: 'STALE', words: lastSeen ? `STALE: no heartbeat Lease, and no report for ${age(seen, now)}` : 'STALE: no heartbeat Lease, and no report yet' };
}

function owner(nd: NodeDisk): string {
  const d = nd.spec.desired;
  if (d?.state !== 'Reserved') return 'not reserved';
  if (d.owner === AUTO_OWNER) {
    const label = nd.metadata.labels?.[LABEL_AUTO_RESERVE];
    return `reserved by the label policy (owner auto${label === 'true' ? `, label ${LABEL_AUTO_RESERVE}=true` : ', label gone: release pending'})`;
  }
  if (d.owner?.startsWith(CLAIM_OWNER_PREFIX)) {
    const claim = `NodeDiskClaim ${d.owner.slice(CLAIM_OWNER_PREFIX.length)}${d.ownerUID ? ` (UID ${d.ownerUID})` : ''}`;
    return claimGone(nd)
      ? `reserved for ${claim}, which is gone: Released, the disk keeps its data; kubectl nodedisks release ${nd.metadata.name} wipes and frees it (--keep-data frees it with the data)`
      : `reserved for ${claim}`;
  }
  if (d.owner?.startsWith(PV_OWNER_PREFIX)) {
    // The CSI driver's: a person cannot release it, the volume's deletion does (docs/adr/0039).
    const uid = d.ownerUID ? ` (PVC UID ${d.ownerUID})` : '';
    return `reserved for PersistentVolume ${d.owner.slice(PV_OWNER_PREFIX.length)}${uid} by the CSI driver: released, wiped first, when the volume is deleted`;
  }
  return d.owner ? `reserved by ${d.owner} (manual)` : 'reserved with no owner (manual)';
}

/** What the image may hold, when it matters: being wiped, or free with an earlier owner's bytes (ADR 38). */
function dataWords(nd: NodeDisk): string | undefined {
  const wipe = pendingWipe(nd);
  if (wipe !== undefined) return `being wiped (wipe request ${wipe}): free to nobody until its node agent reports it wiped`;
  if (holdsData(nd) && nd.spec.desired?.state !== 'Reserved') {
    return `holds the data of an earlier reservation (not wiped since): the next owner gets it as it is; kubectl nodedisks release ${nd.metadata.name} --wipe wipes it first`;
  }
  return undefined;
}

/** A drive's facts in one line: what it is, how it is attached, and its kernel name now. */
function driveWords(d: DriveFacts): string {
  const model = d.model ? ` ${d.model}` : '';
  const serial = d.serial ? ` (serial ${d.serial})` : '';
  return `${d.media} over ${d.transport}:${model}${serial}, ${d.device} now, blocks of ${d.logicalBlockSize} B (${d.physicalBlockSize} B physical)`;
}

export function describe(nd: NodeDisk, now: number, agent?: string): string {
  const node = nd.status?.node;
  const cond = (type: string) => nd.status?.conditions?.find((c) => c.type === type);
  const ready = cond(CONDITION.ready);
  const accepted = cond(CONDITION.accepted);
  const lines: [string, string][] = [
    ['Node', `${nd.spec.nodeName}${node?.lastSeenTime ? ` (agent last reported ${age(node.lastSeenTime, now)} ago, at ${node.lastSeenTime})` : ' (no report from its agent yet)'}`],
    ...(agent ? ([['Agent', agent]] as [string, string][]) : []),
    ['Disk', `${nd.spec.diskID}  ${nd.spec.path}${node?.capacityBytes !== undefined ? `  ${iec(node.capacityBytes)}` : ''}`],
    ...(node?.drive ? ([['Drive', driveWords(node.drive)]] as [string, string][]) : []),
    ['Desired', `${nd.spec.desired?.state ?? 'Available'}: ${owner(nd)}`],
    ['Reported', node?.phase ? `${node.phase}${node.message ? `: ${node.message}` : ''}` : 'nothing yet'],
    ['Ready', ready ? `${ready.status} (${ready.reason}) ${ready.message}` : 'unknown: the controller has not looked at this disk yet'],
  ];
  if (nd.metadata.labels?.[LABEL_CORDONED] === CORDONED_VALUE) {
    lines.push([
      'Cordoned',
      `yes (label ${LABEL_CORDONED}=true): handed out by nobody${nd.spec.desired?.state === 'Reserved' ? '; its reservation stays' : ''}; kubectl nodedisks uncordon puts it back`,
    ]);
  }
  const health = node?.health;
  if (health) {
    const handed = failing(nd) ? 'handed out by nobody until a person checks it (kubectl nodedisks uncordon marks it checked)' : 'marked checked by a person: it may be handed out';
    lines.push(['Health', `${health.status} (${health.reason}${health.since ? `, since ${health.since}` : ''}) ${health.message}${health.status === 'False' ? `; ${handed}` : ''}`]);
  }
  const data = dataWords(nd);
  if (data) lines.push(['Data', data]);
  if (accepted && accepted.status !== 'True') lines.push(['Accepted', `${accepted.status} (${accepted.reason}) ${accepted.message}`]);
  const gen = nd.metadata.generation;
  const observed = nd.status?.controller?.observedGeneration;
  if (gen !== undefined && observed !== undefined && observed < gen) lines.push(['Controller', `has not acted on generation ${gen} yet (observed ${observed})`]);
  const width = Math.max(...lines.map(([k]) => k.length)) + 2;
  // Every value is text others wrote (the agent's message, the controller's condition, a person's owner):
  // no control character of theirs reaches the terminal, nor a line break that would fake a line of ours.
  return `${escapeControl(nd.metadata.name ?? '')}\n${lines.map(([k, v]) => `  ${`${k}:`.padEnd(width)}${escapeControl(v)}`).join('\n')}\n`;
}

interface NodeSummary {
  disks: number;
  reserved: number;
  available: number;
  missing: number;
  error: number;
  cordoned: number;
  free: number;
  reservedBytes: number;
  lastSeen: number;
  /** The controller judged the node gone or another machine (ADR 35): its disks are not available. */
  gone: boolean;
}

export const statusCommand: CommandSpec<StatusArgs> = {
  name: 'status',
  summary: 'Explain disks: desired vs reported vs conditions; with no name, a summary per node',
  description:
    "Explain NodeDisks, or NodeDiskClaims named claim/NAME, in words. For a claim: what it asks, and why it is Pending; once Bound and Ready, the node, the disk and the disk image's path, and the PersistentVolumeClaim of StorageClass nodedisks through which a pod gets a node-local disk (no pod mounts a claim's disk). For a disk: what is desired and who holds the reservation, what the node agent reports and when it last did, whether it is cordoned, and why a disk is not Ready. With no name, a summary per node: disks, reservations, missing, failed and cordoned disks, free and reserved capacity, and agents that stopped reporting (judged by their heartbeat Leases, as the controller judges them), or GONE for a node the controller found gone.",
  positionals: [{ name: 'names', describe: 'NodeDisk names', variadic: true }],
  flags: {
    ...SELECTION_FLAGS,
    'stale-after': { type: 'string', default: '15m', describe: 'For a node without a heartbeat Lease (an agent from before heartbeats): flag it when its agent has not reported for this long' },
    'agent-lease-namespace': { type: 'string', default: DEFAULT_SYSTEM_NAMESPACE, describe: "Namespace of the agents' heartbeat Leases (where NodeDisks is installed)" },
    namespace: { ...NAMESPACE_FLAG, describe: `For claim/NAME: ${NAMESPACE_FLAG.describe}` },
  },
  examples: [
    ['kubectl nodedisks status', 'Disks, reservations, free and reserved capacity per node'],
    ['kubectl nodedisks status node-disk-node-a-disk1', 'Why a disk is (not) Ready, who holds it, when its node last reported'],
    ['kubectl nodedisks status claim/db -n team-a', 'Why a claim is Pending; once Bound, where its disk is'],
  ],
  run: async (session: Session, args: StatusArgs): Promise<void> => {
    const staleMs = durationFlag(args['stale-after'] ?? '15m', '--stale-after');
    const leaseNamespace = args['agent-lease-namespace'] || DEFAULT_SYSTEM_NAMESPACE;
    if (await claimStatus(session, args.names, args.namespace, { leases: () => heartbeatLeases(session, leaseNamespace), expired: leaseExpired, staleMs })) return;
    const now = Date.now();
    if (args.names.length) {
      const disks = await resolveTargets(session, args.names, args);
      const leases = disks.length > 0 ? await heartbeatLeases(session, leaseNamespace) : new Map<string, Lease>();
      const lastSeen = (nd: NodeDisk) => (nd.status?.node?.lastSeenTime ? Date.parse(nd.status.node.lastSeenTime) : 0);
      session.io.out(disks.map((d) => describe(d, now, agentVerdict(leases, d.spec.nodeName, lastSeen(d), now, staleMs).words)).join('\n'));
      return;
    }
    const nodes = new Map<string, NodeSummary>();
    const released: string[] = [];
    for await (const page of selected(session, args)) {
      for (const nd of page) {
        if (claimGone(nd)) released.push(nd.metadata.name ?? '');
        const s = nodes.get(nd.spec.nodeName) ?? { disks: 0, reserved: 0, available: 0, missing: 0, error: 0, cordoned: 0, free: 0, reservedBytes: 0, lastSeen: 0, gone: false };
        const phase = nd.status?.node?.phase;
        const bytes = nd.status?.node?.capacityBytes ?? 0;
        s.disks++;
        if (nd.spec.desired?.state === 'Reserved') {
          s.reserved++;
          s.reservedBytes += bytes;
        } else if (goneBecause(nd) !== undefined) {
          // Of a machine that is gone: nothing to hand out (kubectl nodedisks prune removes it).
          s.gone = true;
        } else if (nd.metadata.labels?.[LABEL_CORDONED] === CORDONED_VALUE) {
          // Out of service: neither available nor free capacity, whatever its phase.
          s.cordoned++;
        } else if (phase === 'Available') {
          s.available++;
          s.free += bytes;
        }
        if (phase === 'Missing') s.missing++;
        if (phase === 'Error') s.error++;
        const seen = nd.status?.node?.lastSeenTime ? Date.parse(nd.status.node.lastSeenTime) : 0;
        s.lastSeen = Math.max(s.lastSeen, seen);
        nodes.set(nd.spec.nodeName, s);
      }
    }
    if (nodes.size === 0) {
      session.io.err('No resources found\n');
      return;
    }
    const leases = await heartbeatLeases(session, leaseNamespace);
    const rows = [...nodes.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, s]) => [
        escapeControl(name),
        String(s.disks),
        String(s.reserved),
        String(s.available),
        String(s.missing),
        String(s.error),
        String(s.cordoned),
        iec(s.free),
        iec(s.reservedBytes),
        s.lastSeen ? `${age(new Date(s.lastSeen).toISOString(), now)} ago` : 'never',
        s.gone ? 'GONE' : agentVerdict(leases, name, s.lastSeen, now, staleMs).column,
      ]);
    session.io.out(table(['NODE', 'DISKS', 'RESERVED', 'AVAILABLE', 'MISSING', 'ERROR', 'CORDONED', 'FREE', 'RESERVED-CAPACITY', 'LAST-REPORT', 'AGENT'], rows));
    // Reservations nobody uses any more, with data on them: a person decides (release, or keep).
    if (released.length > 0) {
      const names = released.sort().join(', ');
      const line = `${released.length} reserved for a NodeDiskClaim that is gone (Released, data kept): ${names}; kubectl nodedisks status NAME says whose, kubectl nodedisks release NAME frees it`;
      session.io.out(`\n${escapeControl(line)}\n`);
    }
    if (leases instanceof ApiError) {
      session.io.err(
        escapeControl(
          `AGENT is unknown: cannot read the agents' heartbeat Leases in namespace ${leaseNamespace} (${leases.message}); ` +
            `ask your cluster admin for the ${HEARTBEAT_ROLE} Role there (kubectl create rolebinding -n ${leaseNamespace} ${HEARTBEAT_ROLE}-$USER --role=${HEARTBEAT_ROLE} --user=$USER), ` +
            'or pass --agent-lease-namespace if NodeDisks is installed in another namespace',
        ) + '\n',
      );
    }
  },
};
