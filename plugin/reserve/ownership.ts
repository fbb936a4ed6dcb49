// Who owns a field, from managedFields, and server-side apply with the plugin's conflict rules
// (docs/adr/0004-field-ownership.md): the agent's ownership of the defaulted spec.desired.state is taken
// over silently; anyone else's needs --force-conflicts, and git's comes with a pointer to the git route.
import { GITOPS_FIELD_MANAGERS } from '../../api/constants.ts';
import type { ApplyOptions, NodeDiskApply, NodeDiskClient } from '../../api/client.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { isFieldManagerConflict, isStaleVersionConflict } from '../../lib/kube/errors.ts';
import { conflictManagers, EXIT, PluginError } from '../errors.ts';

/** Managers that own the field at `path` (e.g. ['metadata', 'labels', 'x']) of the main resource. */
export function fieldOwners(nd: NodeDisk, path: string[]): string[] {
  const owners: string[] = [];
  for (const entry of nd.metadata.managedFields ?? []) {
    if (entry.subresource) continue;
    let node: unknown = entry.fieldsV1;
    for (const key of path) {
      node = node && typeof node === 'object' ? (node as Record<string, unknown>)[`f:${key}`] : undefined;
    }
    if (node !== undefined && entry.manager) owners.push(entry.manager);
  }
  return owners;
}

export function gitOwners(owners: string[]): string[] {
  return owners.filter((m) => GITOPS_FIELD_MANAGERS.includes(m));
}

export function gitRouteError(nd: NodeDisk, what: string, owners: string[]): PluginError {
  return new PluginError(
    `${what} of ${nd.metadata.name} is managed from git by ${owners.join(', ')}: change it in your GitOps repository ` +
      `(kubectl nodedisks gitops … writes the overlay), or take it over here with --force-conflicts`,
    EXIT.conflict,
  );
}

/** The object changed between the read the plan was made from and the write (a resourceVersion conflict). */
export class ChangedMeanwhile extends PluginError {
  constructor(name: string) {
    super(`${name} changed while the command ran (someone else wrote it first); run the command again`, EXIT.conflict);
    this.name = 'ChangedMeanwhile';
  }
}

export interface ApplyFlags {
  fieldManager: string;
  forceConflicts: boolean;
  dryRun: boolean;
}

/**
 * Server-side apply with the plan's resourceVersion as a precondition. A field conflict with a GitOps
 * manager fails (unless --force-conflicts) with a pointer to git. Any other field conflict is stale
 * ownership of a value the plan already judged (the agent's defaulted Available, the controller's
 * released Available, our own earlier Update): the apply is retried with force, still guarded by the
 * resourceVersion, so nothing changed since the plan was read can be overwritten.
 */
/** An apply body with the resourceVersion it was planned from: the server refuses it if the object changed since. */
export function guarded(body: NodeDiskApply, resourceVersion: string | undefined): NodeDiskApply {
  return resourceVersion ? { ...body, metadata: { ...body.metadata, resourceVersion } } : body;
}

export async function applyResolving(client: NodeDiskClient, body: NodeDiskApply, f: ApplyFlags, resourceVersion?: string): Promise<NodeDisk> {
  const guardedBody = guarded(body, resourceVersion);
  const o: ApplyOptions = { fieldManager: f.fieldManager, force: f.forceConflicts, dryRun: f.dryRun };
  try {
    try {
      return await client.apply(guardedBody, o);
    } catch (err) {
      if (!isFieldManagerConflict(err)) throw err;
      if (gitOwners(conflictManagers(err)).length) throw err;
      return await client.apply(guardedBody, { ...o, force: true });
    }
  } catch (err) {
    // Either write may find the object changed since the plan (someone else was faster): never forced.
    if (isStaleVersionConflict(err)) throw new ChangedMeanwhile(body.metadata.name);
    throw err;
  }
}
