// Every version of every NodeDisk, as a watch delivers them, so a test can say not only what an object
// ended as but whether it was ever something else on the way (an overwrite that was later undone
// still counts). Waiting is event-driven: no polling load on a busy machine.
import type { NodeDiskClient } from '../../api/client.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';

export class History {
  private readonly versions = new Map<string, NodeDisk[]>();
  private readonly waiters = new Set<() => void>();
  private readonly stop = new AbortController();
  private running: Promise<void> | undefined;
  private failure: Error | undefined;

  /** Starts watching from a fresh list; resolves once the watch is open. */
  async start(client: NodeDiskClient): Promise<void> {
    const list = await client.list();
    for (const nd of list.items) this.record(nd);
    let rv = list.metadata.resourceVersion ?? '';
    this.running = (async () => {
      try {
        // A watch the server ends (its timeout) is resumed from the last version seen, as an informer does.
        while (!this.stop.signal.aborted) {
          for await (const ev of client.watch({ resourceVersion: rv, allowWatchBookmarks: true, timeoutSeconds: 600 }, this.stop.signal)) {
            if (ev.type === 'ERROR') throw new Error(`watch error: ${ev.object.message}`);
            rv = ev.object.metadata.resourceVersion ?? rv;
            if (ev.type !== 'BOOKMARK') this.record(ev.object);
          }
        }
      } catch (err) {
        if (!this.stop.signal.aborted) this.failure = err as Error;
      } finally {
        this.wake();
      }
    })();
  }

  async close(): Promise<void> {
    this.stop.abort();
    await this.running;
  }

  private record(nd: NodeDisk): void {
    const name = nd.metadata.name ?? '';
    const list = this.versions.get(name) ?? [];
    list.push(nd);
    this.versions.set(name, list);
    this.wake();
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  /** The versions of `name` with a resourceVersion greater than `afterRv` (all when omitted). */
  of(name: string, afterRv?: string): NodeDisk[] {
    const all = this.versions.get(name) ?? [];
    return afterRv === undefined ? all : all.filter((v) => Number(v.metadata.resourceVersion) > Number(afterRv));
  }

  /** The latest recorded version of `name`. */
  latest(name: string): NodeDisk | undefined {
    return this.versions.get(name)?.at(-1);
  }

  /** Waits until the latest version of `name` satisfies `ok`. */
  async until(name: string, what: string, ok: (nd: NodeDisk) => boolean, timeoutMs = 30_000): Promise<NodeDisk> {
    return await new Promise<NodeDisk>((resolve, reject) => {
      const check = () => {
        if (this.failure) return finish(this.failure);
        const nd = this.latest(name);
        if (nd && ok(nd)) finish(undefined, nd);
      };
      const timer = setTimeout(() => {
        const nd = this.latest(name);
        finish(
          new Error(
            `timed out after ${timeoutMs} ms waiting for ${name}: ${what}; last seen ${JSON.stringify({ rv: nd?.metadata.resourceVersion, generation: nd?.metadata.generation, labels: nd?.metadata.labels, spec: nd?.spec.desired, status: { controller: nd?.status?.controller, conditions: nd?.status?.conditions } })}`,
          ),
        );
      }, timeoutMs);
      const finish = (err: Error | undefined, nd?: NodeDisk) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        if (err) reject(err);
        else resolve(nd!);
      };
      this.waiters.add(check);
      check();
    });
  }
}

/** The controller has looked at this version's spec: its status speaks of the current generation. */
export function reconciled(nd: NodeDisk): boolean {
  const c = nd.status?.controller;
  return !!c && c.observedGeneration === nd.metadata.generation && (nd.status?.conditions ?? []).every((x) => x.observedGeneration === nd.metadata.generation);
}
