// kubectl nodedisks status [NAME…]: per disk, desired vs reported vs the controller's view, in words;
// with no name, a summary per node.
import type { CommandSpec } from '../args.ts';
import { AUTO_OWNER, CONDITION, LABEL_AUTO_RESERVE } from '../../api/constants.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { durationFlag, type Session } from '../context.ts';
import { age, iec, table } from '../format.ts';
import { selected, resolveTargets, type SelectionFlags } from '../select.ts';
import { SELECTION_FLAGS } from './list.ts';

export interface StatusArgs extends SelectionFlags {
  names: string[];
  'stale-after'?: string | undefined;
}

function owner(nd: NodeDisk): string {
  const d = nd.spec.desired;
  if (d?.state !== 'Reserved') return 'not reserved';
  if (d.owner === AUTO_OWNER) {
    const label = nd.metadata.labels?.[LABEL_AUTO_RESERVE];
    return `reserved by the label policy (owner auto${label === 'true' ? `, label ${LABEL_AUTO_RESERVE}=true` : ', label gone: release pending'})`;
  }
  return d.owner ? `reserved by ${d.owner} (manual)` : 'reserved with no owner (manual)';
}

export function describe(nd: NodeDisk, now: number): string {
  const node = nd.status?.node;
  const cond = (type: string) => nd.status?.conditions?.find((c) => c.type === type);
  const ready = cond(CONDITION.ready);
  const accepted = cond(CONDITION.accepted);
  const lines: [string, string][] = [
    ['Node', `${nd.spec.nodeName}${node?.lastSeenTime ? ` (agent last reported ${age(node.lastSeenTime, now)} ago, at ${node.lastSeenTime})` : ' (no report from its agent yet)'}`],
    ['Disk', `${nd.spec.diskID}  ${nd.spec.path}${node?.capacityBytes !== undefined ? `  ${iec(node.capacityBytes)}` : ''}`],
    ['Desired', `${nd.spec.desired?.state ?? 'Available'}: ${owner(nd)}`],
    ['Reported', node?.phase ? `${node.phase}${node.message ? `: ${node.message}` : ''}` : 'nothing yet'],
    ['Ready', ready ? `${ready.status} (${ready.reason}) ${ready.message}` : 'unknown: the controller has not looked at this disk yet'],
  ];
  if (accepted && accepted.status !== 'True') lines.push(['Accepted', `${accepted.status} (${accepted.reason}) ${accepted.message}`]);
  const gen = nd.metadata.generation;
  const observed = nd.status?.controller?.observedGeneration;
  if (gen !== undefined && observed !== undefined && observed < gen) lines.push(['Controller', `has not acted on generation ${gen} yet (observed ${observed})`]);
  const width = Math.max(...lines.map(([k]) => k.length)) + 2;
  return `${nd.metadata.name}\n${lines.map(([k, v]) => `  ${`${k}:`.padEnd(width)}${v}`).join('\n')}\n`;
}

interface NodeSummary {
  disks: number;
  reserved: number;
  available: number;
  missing: number;
  error: number;
  free: number;
  reservedBytes: number;
  lastSeen: number;
}

export const statusCommand: CommandSpec<StatusArgs> = {
  name: 'status',
  summary: 'Explain disks: desired vs reported vs conditions; with no name, a summary per node',
  description:
    'Explain NodeDisks in words: what is desired and who holds the reservation, what the node agent reports and when it last did, and why a disk is not Ready. With no name, a summary per node: disks, reservations, missing and failed disks, free and reserved capacity, and agents that stopped reporting.',
  positionals: [{ name: 'names', describe: 'NodeDisk names', variadic: true }],
  flags: { ...SELECTION_FLAGS, 'stale-after': { type: 'string', default: '15m', describe: 'Flag nodes whose agent has not reported for this long' } },
  examples: [
    ['kubectl nodedisks status', 'Disks, reservations, free and reserved capacity per node'],
    ['kubectl nodedisks status node-disk-node-a-disk1', 'Why a disk is (not) Ready, who holds it, when its node last reported'],
  ],
  run: async (session: Session, args: StatusArgs): Promise<void> => {
    const now = Date.now();
    if (args.names.length) {
      const disks = await resolveTargets(session, args.names, args);
      session.io.out(disks.map((d) => describe(d, now)).join('\n'));
      return;
    }
    const staleMs = durationFlag(args['stale-after'] ?? '15m', '--stale-after');
    const nodes = new Map<string, NodeSummary>();
    for await (const page of selected(session, args)) {
      for (const nd of page) {
        const s = nodes.get(nd.spec.nodeName) ?? { disks: 0, reserved: 0, available: 0, missing: 0, error: 0, free: 0, reservedBytes: 0, lastSeen: 0 };
        const phase = nd.status?.node?.phase;
        const bytes = nd.status?.node?.capacityBytes ?? 0;
        s.disks++;
        if (nd.spec.desired?.state === 'Reserved') {
          s.reserved++;
          s.reservedBytes += bytes;
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
    const rows = [...nodes.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, s]) => [
        name,
        String(s.disks),
        String(s.reserved),
        String(s.available),
        String(s.missing),
        String(s.error),
        iec(s.free),
        iec(s.reservedBytes),
        s.lastSeen ? `${age(new Date(s.lastSeen).toISOString(), now)} ago` : 'never',
        s.lastSeen && now - s.lastSeen <= staleMs ? 'ok' : 'STALE',
      ]);
    session.io.out(table(['NODE', 'DISKS', 'RESERVED', 'AVAILABLE', 'MISSING', 'ERROR', 'FREE', 'RESERVED-CAPACITY', 'LAST-REPORT', 'AGENT'], rows));
  },
};
