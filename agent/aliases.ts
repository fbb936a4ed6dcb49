// NodeDisks of this node for a disk under a name that is not its canonical one (the API server refuses
// those unless the name is long enough to end in a hash, which CEL cannot check, ADR 12): nothing acts on
// them, and their status says so, so that neither people nor tools take them for the disk.
import { API_VERSION, FIELD_MANAGER, KIND } from '../api/constants.ts';
import type { NodeDiskClient } from '../api/client.ts';
import { nodeDiskName } from '../api/names.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import type { Logger } from '../lib/runtime/log.ts';
import type { AgentMetrics } from './metrics.ts';
import { statusChanged } from './observe.ts';
import { reportTime, type DiskCache } from './reconcile-disk.ts';

export interface AliasOptions {
  client: Pick<NodeDiskClient, 'applyStatus'>;
  nodeName: string;
  cache: DiskCache;
  log: Logger;
  metrics: AgentMetrics;
}

export class Aliases {
  private readonly o: AliasOptions;
  /**
   * Names of this node's NodeDisks that are not the canonical name of their disk, by diskID: kept from the
   * informer's events so that reconciling a disk does not look through every NodeDisk of the node for them.
   */
  private readonly byDisk = new Map<string, Set<string>>();

  constructor(o: AliasOptions) {
    this.o = o;
  }

  /** Follows the informer's events: `present` for an add or update, false for a delete. */
  track(nd: NodeDisk, present: boolean): void {
    const name = nd.metadata.name ?? '';
    const diskID = nd.spec.diskID;
    if (name === nodeDiskName(this.o.nodeName, diskID)) return;
    const names = this.byDisk.get(diskID) ?? new Set<string>();
    if (present) names.add(name);
    else names.delete(name);
    if (names.size > 0) this.byDisk.set(diskID, names);
    else this.byDisk.delete(diskID);
  }

  /** Reports every alias of this disk as Error, naming the canonical name; never fails the disk's reconcile. */
  async report(diskID: string, canonical: string): Promise<void> {
    const { client, cache, log, metrics, nodeName } = this.o;
    for (const aliasName of [...(this.byDisk.get(diskID) ?? [])]) {
      const alias = cache.get(aliasName);
      if (!alias) continue;
      const next = {
        phase: 'Error' as const,
        message: `this NodeDisk's name is not the canonical name ${canonical} of disk ${diskID} on node ${nodeName}; nothing acts on it: delete it (kubectl delete nodedisk ${aliasName})`,
      };
      if (!statusChanged(alias.status?.node, next)) continue;
      log.warn('NodeDisk with a non-canonical name; not acting on it', { nodeDisk: aliasName, canonical });
      try {
        const updated = await client.applyStatus(
          { apiVersion: API_VERSION, kind: KIND, metadata: { name: aliasName }, status: { node: { ...next, lastSeenTime: reportTime() } } },
          { fieldManager: FIELD_MANAGER.agent },
        );
        cache.storeOwnWrite(updated);
      } catch (err) {
        // Never let an alias hold up the real disk; the log and the alias's missing status tell the story.
        metrics.apiErrors.inc({ op: 'status' });
        log.warn('cannot report the NodeDisk with a non-canonical name', { nodeDisk: aliasName, error: (err as Error).message });
      }
    }
  }
}
