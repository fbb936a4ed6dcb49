// kubectl nodedisks wait NAME…|-l … --for=phase=Reserved|Available|condition=Ready[=False] --timeout=60s
import type { CommandSpec } from '../args.ts';
import { isNodePhase, NODE_PHASES, type NodeDisk } from '../../api/v1alpha1/types.ts';
import { durationFlag, type Session } from '../context.ts';
import { EXIT, PluginError, usageError } from '../errors.ts';
import { qualifiedName } from '../printers.ts';
import { Backoff, sleep } from '../../lib/runtime/backoff.ts';
import { hasSelection, resolveTargets, snapshot, watchSelectors, type SelectionFlags } from '../select.ts';
import { SELECTION_FLAGS } from './list.ts';

export interface WaitArgs extends SelectionFlags {
  names: string[];
  for?: string | undefined;
  timeout?: string | undefined;
}

type Predicate = { describe: string; test: (nd: NodeDisk) => boolean };

export function parseFor(v: string | undefined): Predicate {
  const phase = /^phase=(.+)$/.exec(v ?? '');
  if (phase) {
    const want = phase[1]!;
    if (!isNodePhase(want)) throw usageError(`--for=phase=${want}: the phase is one of ${NODE_PHASES.join(', ')}`);
    return { describe: `phase ${want}`, test: (nd) => nd.status?.node?.phase === want };
  }
  const cond = /^condition=([A-Za-z]+)(?:=(True|False|Unknown|true|false|unknown))?$/.exec(v ?? '');
  if (cond) {
    const type = cond[1]!;
    const status = (cond[2] ?? 'True').replace(/^./, (c) => c.toUpperCase());
    // Like kubectl wait, a condition counts only once the controller has seen the current generation.
    return {
      describe: `condition ${type}=${status}`,
      test: (nd) =>
        (nd.status?.controller?.observedGeneration ?? -1) >= (nd.metadata.generation ?? 0) &&
        nd.status?.conditions?.some((c) => c.type === type && c.status === status) === true,
    };
  }
  throw usageError(`--for must be phase=<Phase> or condition=<Type>[=True|False|Unknown], got ${JSON.stringify(v ?? '')}`);
}

export const waitCommand: CommandSpec<WaitArgs> = {
  name: 'wait',
  summary: 'Wait until disks reach a phase or a condition, like kubectl wait',
  positionals: [{ name: 'names', describe: 'NodeDisk names', variadic: true }],
  flags: {
    ...SELECTION_FLAGS,
    for: { type: 'string', describe: 'phase=Reserved|Available|Missing|Error or condition=Ready[=True|False|Unknown]' },
    timeout: { type: 'string', default: '30s', describe: 'Give up after this long (0 checks once)' },
  },
  examples: [
    ['kubectl nodedisks wait node-disk-node-a-disk1 --for=phase=Reserved --timeout=60s', 'Wait for the marker to be on the node'],
    ['kubectl nodedisks wait -l localtest.example.com/node=node-a --for=condition=Ready', 'Wait until every disk of node-a is Ready'],
  ],
  run: async (session: Session, args: WaitArgs): Promise<void> => {
    const predicate = parseFor(args.for);
    const timeoutMs = args.timeout === '0' ? 0 : durationFlag(args.timeout ?? '30s', '--timeout');
    if (!args.names.length && !hasSelection(args)) throw usageError('wait needs disk names or a selection (-l/--node)');
    const sel = watchSelectors(args.names, args);
    const client = session.client();
    // Named disks are fetched one by one first, so a wrong name is reported as not found.
    const named = args.names.length ? await resolveTargets(session, args.names, args) : [];
    let { items, resourceVersion } = await snapshot(session, sel, args['chunk-size']);
    const targets = args.names.length ? named : items;
    if (targets.length === 0) throw new PluginError('no NodeDisk matches the selection', EXIT.notFound);
    const pending = new Set(targets.map((nd) => nd.metadata.name ?? ''));
    const check = (nd: NodeDisk) => {
      const name = nd.metadata.name ?? '';
      if (pending.has(name) && predicate.test(nd)) {
        session.io.out(`${qualifiedName(nd)} condition met\n`);
        pending.delete(name);
      }
    };
    items.forEach(check);
    if (pending.size === 0) return;
    const deadline = Date.now() + timeoutMs;
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), timeoutMs);
    // A watch that ends at once (410 Gone: its version left the watch cache; the API server restarting)
    // is retried after a growing pause, from a fresh list: never in a tight loop against the API server.
    const backoff = new Backoff({ initialMs: 500, maxMs: 5000 });
    try {
      while (pending.size > 0 && Date.now() < deadline) {
        session.io.progress(`waiting for ${predicate.describe}: ${pending.size} of ${targets.length} disks left`);
        let events = 0;
        try {
          for await (const ev of client.watch({ ...sel, resourceVersion, allowWatchBookmarks: true, timeoutSeconds: Math.max(1, Math.ceil((deadline - Date.now()) / 1000)) }, abort.signal)) {
            if (ev.type === 'ERROR') break; // 410 Gone (or another failure): re-list below
            events++;
            resourceVersion = ev.object.metadata.resourceVersion ?? resourceVersion;
            if (ev.type !== 'BOOKMARK') check(ev.object);
            if (pending.size === 0) break;
          }
        } catch (err) {
          if (abort.signal.aborted) break;
          throw err;
        }
        if (pending.size === 0 || Date.now() >= deadline) break;
        if (events === 0) await sleep(backoff.next(), abort.signal);
        else backoff.reset();
        if (abort.signal.aborted) break;
        ({ items, resourceVersion } = await snapshot(session, sel, args['chunk-size']));
        items.forEach(check);
      }
    } finally {
      clearTimeout(timer);
      session.io.progress('');
    }
    if (pending.size > 0) {
      const names = [...pending];
      throw new PluginError(`timed out after ${args.timeout} waiting for ${predicate.describe} on ${names.join(', ')}; see why with: kubectl nodedisks status ${names.slice(0, 3).join(' ')}`, EXIT.timeout);
    }
  },
};
