// kubectl nodedisks wait NAME…|-l …|--all --for=delete|create|condition=X[=v]|jsonpath='{…}'[=v]|phase=P
// --timeout=30s|0|-1: kubectl wait's forms and output (one "<kind>.<group>/<name> condition met" line per
// disk, in the order kubectl prints them), on one list + watch for all disks rather than one per disk.
import type { CommandSpec } from '../args.ts';
import { GROUP, SINGULAR } from '../../api/constants.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { durationFlag, type Session } from '../context.ts';
import { EXIT, PluginError, usageError } from '../errors.ts';
import { isApiError } from '../../lib/kube/errors.ts';
import { Backoff, sleep } from '../../lib/runtime/backoff.ts';
import { checkNames, hasSelection, snapshot, watchSelectors, type SelectionFlags } from '../select.ts';
import { parseFor, parseWaitTimeout } from '../kubectl/wait-for.ts';
import { SELECTION_FLAGS } from './flags.ts';

export interface WaitArgs extends SelectionFlags {
  names: string[];
  for?: string | undefined;
  timeout?: string | undefined;
  all?: boolean | undefined;
}

/** Per disk: met or not, and (for --for=delete) the uid it had, so a re-created namesake counts as gone. */
interface Target {
  name: string;
  uid?: string | undefined;
  met: boolean;
}

export const waitCommand: CommandSpec<WaitArgs> = {
  name: 'wait',
  summary: 'Wait until disks are deleted, or reach a condition, a JSONPath value or a phase, like kubectl wait',
  description:
    "Takes kubectl wait's forms: --for=delete, --for=create, --for=condition=Ready (or =Ready=false), --for=jsonpath='{.status.node.phase}'=Reserved (or without =value: until the field exists), plus --for=phase=<Phase>. Prints \"nodedisk.localtest.example.com/<name> condition met\" per disk, in the order of the names (or of the list). --timeout=0 checks once; a negative timeout waits for a week, as kubectl does.",
  positionals: [{ name: 'names', describe: 'NodeDisk names', variadic: true }],
  flags: {
    ...SELECTION_FLAGS,
    all: { type: 'boolean', default: false, describe: 'Wait for every NodeDisk (of the selection, with -l/--node)' },
    for: { type: 'string', describe: "delete, create, condition=<Type>[=<value>], jsonpath='{<path>}'[=<value>] or phase=<Phase>" },
    timeout: { type: 'string', default: '30s', describe: 'Give up after this long (0 checks once; negative: a week)' },
  },
  examples: [
    ['kubectl nodedisks wait node-disk-node-a-disk1 --for=phase=Reserved --timeout=60s', 'Wait for the marker to be on the node'],
    ['kubectl nodedisks wait --all --for=condition=Ready', 'Wait until every disk is Ready (as kubectl wait --for=condition=Ready nodedisk --all)'],
    ["kubectl nodedisks wait -l localtest.example.com/node=node-a --for=jsonpath='{.spec.desired.state}'=Available", 'Wait until every disk of node-a is released'],
    ['kubectl nodedisks wait node-disk-node-a-disk1 --for=delete --timeout=-1', 'Wait, without a limit, until the NodeDisk is gone'],
  ],
  run: async (session: Session, args: WaitArgs): Promise<void> => {
    const waitFor = parseFor(args.for);
    const timeoutRaw = args.timeout ?? '30s';
    const timeoutMs = parseWaitTimeout(timeoutRaw, (v) => durationFlag(v, '--timeout'));
    const selecting = hasSelection(args) || args.all === true;
    if (args.names.length && selecting) throw usageError('name disks or select them with -l/--node/--all, not both');
    if (!args.names.length && !selecting) throw usageError('wait needs disk names, a selection (-l/--node) or --all');
    if (waitFor.kind === 'create' && !args.names.length) throw usageError('--for=create needs disk names: it waits for named NodeDisks to appear');
    checkNames(args.names);
    const sel = watchSelectors(args.names, args);
    const client = session.client();

    // Named disks are fetched one by one first, so a wrong name is reported as not found (as kubectl does),
    // except where a missing disk is what is waited for: gone already (delete; kubectl skips it silently)
    // or not there yet (create).
    const targets: Target[] = [];
    for (const name of args.names) {
      try {
        const nd = await client.get(name);
        targets.push({ name, uid: nd.metadata.uid, met: waitFor.kind === 'create' });
      } catch (err) {
        if (!isApiError(err, 404) || waitFor.kind === 'state') throw err;
        if (waitFor.kind === 'create') targets.push({ name, met: false });
      }
    }
    let { items, resourceVersion } = await snapshot(session, sel, args['chunk-size']);
    if (!args.names.length) for (const nd of items) targets.push({ name: nd.metadata.name ?? '', uid: nd.metadata.uid, met: false });
    if (targets.length === 0) {
      if (waitFor.kind === 'delete') return; // nothing left to wait for, as kubectl wait --for=delete
      throw new PluginError('no NodeDisk matches the selection', EXIT.notFound);
    }

    // kubectl waits for one object after the other and prints each as it is done, so its lines come in
    // the targets' order; printing the met prefix as it grows gives the same lines in the same order.
    let printed = 0;
    const flush = () => {
      for (; printed < targets.length && targets[printed]!.met; printed++) session.io.out(`${SINGULAR}.${GROUP}/${targets[printed]!.name} condition met\n`);
    };
    const byName = new Map<string, Target[]>();
    for (const t of targets) byName.set(t.name, [...(byName.get(t.name) ?? []), t]);
    const seen = (nd: NodeDisk, deleted = false) => {
      for (const t of byName.get(nd.metadata.name ?? '') ?? []) {
        if (t.met) continue;
        if (waitFor.kind === 'delete') t.met = deleted || (t.uid !== undefined && nd.metadata.uid !== t.uid);
        else if (waitFor.kind === 'create') t.met = !deleted;
        else t.met = !deleted && waitFor.test(nd);
      }
    };
    /** A full list: the disks in it are seen; for --for=delete, the ones not in it are gone. */
    const seenAll = (list: NodeDisk[]) => {
      const present = new Set(list.map((nd) => nd.metadata.name ?? ''));
      if (waitFor.kind === 'delete') for (const t of targets) if (!present.has(t.name)) t.met = true;
      for (const nd of list) seen(nd);
    };
    const pending = () => targets.filter((t) => !t.met);
    seenAll(items);
    flush();
    if (pending().length === 0) return;

    const deadline = Date.now() + timeoutMs;
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), timeoutMs);
    // A watch that ends at once (410 Gone: its version left the watch cache; the API server restarting)
    // is retried after a growing pause, from a fresh list: never in a tight loop against the API server.
    const backoff = new Backoff({ initialMs: 500, maxMs: 5000 });
    try {
      while (timeoutMs > 0 && pending().length > 0 && Date.now() < deadline) {
        session.io.progress(`waiting for ${waitFor.describe}: ${pending().length} of ${targets.length} disks left`);
        let events = 0;
        try {
          for await (const ev of client.watch({ ...sel, resourceVersion, allowWatchBookmarks: true, timeoutSeconds: Math.max(1, Math.ceil((deadline - Date.now()) / 1000)) }, abort.signal)) {
            if (ev.type === 'ERROR') break; // 410 Gone (or another failure): re-list below
            events++;
            resourceVersion = ev.object.metadata.resourceVersion ?? resourceVersion;
            if (ev.type !== 'BOOKMARK') seen(ev.object, ev.type === 'DELETED');
            flush();
            if (pending().length === 0) break;
          }
        } catch (err) {
          if (abort.signal.aborted) break;
          throw err;
        }
        if (pending().length === 0 || Date.now() >= deadline) break;
        if (events === 0) await sleep(backoff.next(), abort.signal);
        else backoff.reset();
        if (abort.signal.aborted) break;
        ({ items, resourceVersion } = await snapshot(session, sel, args['chunk-size']));
        seenAll(items);
        flush();
      }
    } finally {
      clearTimeout(timer);
      session.io.progress('');
    }
    const left = pending().map((t) => t.name);
    // --timeout=0: kubectl checks every disk once and prints each met one, the unmet ones in between
    // aside. (With a timeout, it waits for one disk after the other: a disk it did not reach in time, like
    // those after the first unmet one, is not printed, as the prefix above.)
    if (timeoutMs === 0) for (const t of targets.slice(printed)) if (t.met) session.io.out(`${SINGULAR}.${GROUP}/${t.name} condition met\n`);
    if (left.length > 0) {
      const why = `see why with: kubectl nodedisks status ${left.slice(0, 3).join(' ')}`;
      if (timeoutMs === 0) throw new PluginError(`${waitFor.describe} not met for ${left.join(', ')} (--timeout=0 checks once); ${why}`, EXIT.timeout);
      throw new PluginError(`timed out after ${timeoutRaw} waiting for ${waitFor.describe} on ${left.join(', ')}; ${why}`, EXIT.timeout);
    }
  },
};
