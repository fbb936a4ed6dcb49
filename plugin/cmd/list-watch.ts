// kubectl nodedisks list -w / --watch-only: like kubectl get -w, the list first (unless --watch-only),
// then one row (or object) per change, lined up under the first table, until interrupted.
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { endedAtOnce } from '../../lib/kube/watch.ts';
import { Backoff, sleep } from '../../lib/runtime/backoff.ts';
import type { Session } from '../context.ts';
import { EXIT, PluginError } from '../errors.ts';
import { PrintState, printNodeDisks, type PrintOptions } from '../kubectl/printers.ts';
import { snapshot, watchSelectors, type SelectionFlags } from '../select.ts';

export async function watchList(session: Session, names: string[], f: SelectionFlags, o: PrintOptions, watchOnly: boolean): Promise<void> {
  const sel = watchSelectors(names, f);
  const wanted = (nd: NodeDisk) => names.length === 0 || names.includes(nd.metadata.name ?? '');
  const state = new PrintState();
  let { items, resourceVersion } = await snapshot(session, sel, f['chunk-size']);
  if (!watchOnly) {
    const first = items.filter(wanted);
    const tabular = o.format.kind === 'table' || o.format.kind === 'wide' || o.format.kind === 'custom-columns';
    // As kubectl -w: a table for the list; any other format prints each object on its own (no List).
    if (tabular) await printNodeDisks(first, o, session.io.out, state);
    else for (const nd of first) await printNodeDisks([nd], { ...o, single: true }, session.io.out, state);
  }
  const client = session.client();
  // A watch that ends at once with no event (a proxy closing long requests) is not re-opened at once.
  const backoff = new Backoff({ initialMs: 500, maxMs: 30_000 });
  for (;;) {
    const opened = Date.now();
    let events = 0;
    // The API server ends a watch after a while: carry on from the last version seen, as a long -w must.
    for await (const ev of client.watch({ ...sel, resourceVersion, allowWatchBookmarks: true })) {
      events++;
      if (ev.type === 'ERROR') {
        throw new PluginError(`the watch ended: ${ev.object.message ?? ev.object.reason ?? 'error'}; run the command again`, EXIT.error);
      }
      resourceVersion = ev.object.metadata.resourceVersion ?? resourceVersion;
      if (ev.type !== 'BOOKMARK' && wanted(ev.object)) await printNodeDisks([ev.object], { ...o, single: true }, session.io.out, state);
    }
    if (endedAtOnce(opened, events)) await sleep(backoff.next());
    else backoff.reset();
  }
}
