// plugin/gitops/: the overlay `kubectl nodedisks gitops` writes, planned in full before any file is written.
// What the files hold (only the fields git owns, annotated against pruning), how the existing ones are
// read (regular files in --dir only, no link followed out of the checkout) and written (O_NOFOLLOW), and
// the check that the names are NodeDisks of the cluster (docs/adr/0022-gitops-files-and-krew-archives.md).
import { closeSync, constants, fstatSync, ftruncateSync, lstatSync, openSync, readFileSync, readlinkSync, realpathSync, unlinkSync, writeSync } from 'node:fs';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { API_VERSION, CLAIM_KIND, CORDONED_VALUE, KIND, LABEL_AUTO_RESERVE, LABEL_CORDONED } from '../../api/constants.ts';
import type { LabelSelector, NodeDiskClaim } from '../../api/v1alpha1/claim-types.ts';
import type { Session } from '../context.ts';
import { describeError, PluginError, usageError } from '../errors.ts';
import type { Owned } from './files.ts';
import { ApiError, TransportError } from '../../lib/kube/errors.ts';
import { KubeConfigError } from '../../lib/kube/kubeconfig.ts';

export const GITOPS_ANNOTATIONS = {
  // Argo CD: never prune or delete the discovered object; apply server-side so only these fields are owned.
  'argocd.argoproj.io/sync-options': 'Prune=false,Delete=false,ServerSideApply=true',
  // Flux: never prune; merge with fields owned by others instead of replacing the object.
  'kustomize.toolkit.fluxcd.io/prune': 'disabled',
  'kustomize.toolkit.fluxcd.io/ssa': 'Merge',
} as const;

const HEADER = '# Written by `kubectl nodedisks gitops`. Only the fields git owns; the NodeDisk itself is discovered by the node agent.\n';

/** What one run of gitops writes into a NodeDisk's file: a reservation or a release, or the cordon mark. */
export type DiskChange = { action: 'reserve' | 'release'; owner: string | undefined } | { action: 'cordon' | 'uncordon' };

/** gitops cordon writes "true", uncordon "false" (not an absent label: see ownedFields). */
const cordonValue = (action: 'cordon' | 'uncordon') => (action === 'cordon' ? CORDONED_VALUE : 'false');
const isCordon = (c: DiskChange): c is { action: 'cordon' | 'uncordon' } => c.action === 'cordon' || c.action === 'uncordon';

export function overlayObject(name: string, change: DiskChange): Record<string, unknown> {
  const annotations = { ...GITOPS_ANNOTATIONS };
  if (isCordon(change)) {
    return { apiVersion: API_VERSION, kind: KIND, metadata: { name, labels: { [LABEL_CORDONED]: cordonValue(change.action) }, annotations } };
  }
  const { action, owner } = change;
  if (owner === undefined) {
    // The policy path: git owns the label. Releasing writes "false" (the policy then releases), because
    // with pruning off, deleting the file would leave the label in the cluster.
    const labels = { [LABEL_AUTO_RESERVE]: action === 'reserve' ? 'true' : 'false' };
    return { apiVersion: API_VERSION, kind: KIND, metadata: { name, labels, annotations } };
  }
  const desired = action === 'reserve' ? { state: 'Reserved', owner } : { state: 'Available' };
  return { apiVersion: API_VERSION, kind: KIND, metadata: { name, annotations }, spec: { desired } };
}

/** The fields of a disk's file the tool owns, as they must be after this change (undefined: absent). */
function ownedFields(change: DiskChange): Owned {
  const annotations: Owned = Object.entries(GITOPS_ANNOTATIONS).map(([k, v]) => [['metadata', 'annotations', k], v]);
  if (isCordon(change)) {
    // Only the cordon label: a reservation written into the same file stays. Uncordon writes "false"
    // rather than dropping the label from the file: with pruning off and fields others co-own (a person's
    // `kubectl nodedisks cordon`), a label that leaves the file may stay in the cluster, while "false" is
    // applied as any value is; everything that reads the mark reads only "true" as cordoned.
    return [[['metadata', 'labels', LABEL_CORDONED], cordonValue(change.action)], ...annotations];
  }
  const { action, owner } = change;
  const label = ['metadata', 'labels', LABEL_AUTO_RESERVE];
  if (owner === undefined) return [[label, action === 'reserve' ? 'true' : 'false'], ...annotations, [['spec', 'desired'], undefined]];
  return [
    [label, undefined],
    ...annotations,
    [['spec', 'desired', 'state'], action === 'reserve' ? 'Reserved' : 'Available'],
    [['spec', 'desired', 'owner'], action === 'reserve' ? owner : undefined],
  ];
}

/**
 * The text of a file of the overlay, or undefined if there is none. Only a regular file in --dir itself
 * is read or written: a symbolic link there (to a file elsewhere in the checkout, or outside it) would
 * make gitops edit whatever it points to, and a FIFO or device would block or worse. --dir itself may be
 * a link: that is the directory the user named.
 */
function existingText(path: string): string | undefined {
  let st;
  try {
    st = lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new PluginError(`cannot read ${path}: ${(err as Error).message}; check the permissions of --dir`);
  }
  if (st.isSymbolicLink()) {
    let target = '?';
    try {
      target = readlinkSync(path);
    } catch {
      // Gone meanwhile: the message still names the path.
    }
    throw usageError(
      `${path} is a symbolic link (to ${target}); gitops writes only regular files inside --dir and never follows a link out of it: replace the link with a copy of the file, or point --dir at the directory that holds the file; nothing was written`,
    );
  }
  if (!st.isFile()) throw usageError(`${path} is not a regular file; move it away or choose another --dir; nothing was written`);
  return readFileSync(path, 'utf8');
}

const inside = (base: string, path: string) => {
  const rel = relative(base, path);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
};

/**
 * Refuses a --dir that the current directory (the checkout gitops is run in) leads out of through a
 * symbolic link: a repository can hold links (git stores them), so `--dir clusters/prod` with
 * `clusters -> /etc` would write there. A link that stays inside the current directory is fine, and so
 * is a --dir outside it: that path is the one the user named, whatever links it takes.
 */
export function checkDirStaysInside(dir: string, cwd = process.cwd()): void {
  const target = resolve(cwd, dir);
  if (!inside(cwd, target)) return;
  let realCwd: string;
  try {
    realCwd = realpathSync(cwd);
  } catch {
    return;
  }
  let at = cwd;
  for (const part of relative(cwd, target).split(sep).filter(Boolean)) {
    at = join(at, part);
    let link: string;
    try {
      if (!lstatSync(at).isSymbolicLink()) continue;
      link = readlinkSync(at);
    } catch {
      return; // the rest does not exist yet: mkdir makes plain directories
    }
    let real: string;
    try {
      real = realpathSync(at);
    } catch {
      real = resolve(at, '..', link);
    }
    if (!inside(realCwd, real)) {
      throw usageError(
        `--dir ${dir}: ${at} is a symbolic link to ${link}, out of the current directory; gitops never follows a link out of the checkout it runs in: pass the real directory as --dir if that is where the overlay belongs; nothing was written`,
      );
    }
  }
}

export interface Planned {
  path: string;
  text: string;
}

/** Every file of the overlay as it must be written, computed before anything is written; the kustomization last. */
export async function planOverlay(dir: string, names: string[], change: DiskChange): Promise<Planned[]> {
  const { addResources, newKustomization, writeDiskFile } = await import('./files.ts');
  const kpath = join(dir, 'kustomization.yaml');
  const files = [...new Set(names)].sort().map((name) => ({ name, file: `${name}.yaml` }));
  const plan = files.map(({ name, file }) => {
    const path = join(dir, file);
    return { path, text: writeDiskFile(existingText(path), path, HEADER, overlayObject(name, change), ownedFields(change)) };
  });
  const resources = files.map((f) => f.file);
  const existing = existingText(kpath);
  const kustomization = existing !== undefined ? addResources(existing, resources, kpath) : newKustomization(resources);
  return [...plan, { path: kpath, text: kustomization }];
}

/**
 * A claim's file: `nodediskclaim.<namespace>.<name>.yaml`. A namespace has no dot (a DNS label), so no
 * two claims share a file; a NodeDisk file of the same name is told apart by its kind and refused.
 */
export const claimFile = (namespace: string, name: string): string => `nodediskclaim.${namespace}.${name}.yaml`;

const CLAIM_HEADER =
  '# Written by `kubectl nodedisks gitops claim`. The controller binds this claim to a free disk that fits; removing it (gitops unclaim, then a sync that prunes) releases the disk.\n';

/** The spec fields the API server keeps as they were created (the claim's CRD: immutable once set). */
const IMMUTABLE_SPEC = ['nodeName', 'selector', 'minCapacity', 'diskName', 'reclaimPolicy'] as const;
/** What the API server puts in a field the file leaves out (the CRD's defaults), so that leaving it out is no change. */
const SPEC_DEFAULTS: Record<string, unknown> = { reclaimPolicy: 'Delete' };

/** A selector written the same whatever order the -l requirements were given in. */
function sortedSelector(sel: LabelSelector): LabelSelector {
  const out: LabelSelector = {};
  if (sel.matchLabels) out.matchLabels = Object.fromEntries(Object.entries(sel.matchLabels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  if (sel.matchExpressions) {
    out.matchExpressions = sel.matchExpressions
      .map((e) => ({ key: e.key, operator: e.operator, ...(e.values ? { values: [...e.values].sort() } : {}) }))
      .sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));
  }
  return out;
}

/**
 * The claim's file and the kustomization listing it. The claim is a whole object (git creates it, unlike a
 * NodeDisk), so it carries no annotation against pruning: removing it from git is how a team releases
 * its disk. An existing file is edited in place; a change of a field the API server holds immutable is
 * refused here rather than by the sync.
 */
export async function planClaim(dir: string, claim: NodeDiskClaim): Promise<Planned[]> {
  const { addResources, newKustomization, writeDiskFile, readObject } = await import('./files.ts');
  const namespace = claim.metadata.namespace ?? '';
  const name = claim.metadata.name ?? '';
  const spec = { ...claim.spec, ...(claim.spec.selector ? { selector: sortedSelector(claim.spec.selector) } : {}) };
  const object = { apiVersion: API_VERSION, kind: CLAIM_KIND, metadata: { name, namespace }, spec };
  const file = claimFile(namespace, name);
  const path = join(dir, file);
  const existing = existingText(path);
  if (existing !== undefined) {
    const was = (readObject(existing, path) as { spec?: Record<string, unknown> } | null)?.spec ?? {};
    const changed = IMMUTABLE_SPEC.filter((k) => JSON.stringify(was[k] ?? SPEC_DEFAULTS[k]) !== JSON.stringify(spec[k] ?? SPEC_DEFAULTS[k]));
    if (changed.length > 0 && (readObject(existing, path) as { kind?: unknown } | null)?.kind === CLAIM_KIND) {
      throw usageError(
        `${path} already claims ${namespace}/${name} with another ${changed.map((k) => `spec.${k}`).join(', ')}, which the API server keeps as created: write a claim under another name (and gitops unclaim this one), or edit the file yourself if the claim was never synced; nothing was written`,
      );
    }
  }
  const owned: Owned = (['nodeName', 'selector', 'minCapacity', 'diskName', 'reclaimPolicy'] as const).map((k) => [['spec', k], spec[k]]);
  const text = writeDiskFile(existing, path, CLAIM_HEADER, object, owned);
  const kpath = join(dir, 'kustomization.yaml');
  const k = existingText(kpath);
  return [
    { path, text },
    { path: kpath, text: k !== undefined ? addResources(k, [file], kpath, namespace) : newKustomization([file]) },
  ];
}

/** What gitops unclaim changes: the kustomization without the claim, and the claim's file to remove (if there is one). */
export async function planUnclaim(dir: string, namespace: string, name: string): Promise<{ remove: string | undefined; kustomization: Planned | undefined }> {
  const { removeResources, readObject } = await import('./files.ts');
  const file = claimFile(namespace, name);
  const path = join(dir, file);
  const existing = existingText(path);
  if (existing !== undefined) {
    const o = readObject(existing, path) as { kind?: unknown; metadata?: { name?: unknown; namespace?: unknown } } | null;
    if (o?.kind !== CLAIM_KIND || o.metadata?.name !== name || o.metadata?.namespace !== namespace) {
      throw usageError(`${path} exists and is not the overlay of ${CLAIM_KIND} ${namespace}/${name}; move it away or remove it yourself; nothing was changed`);
    }
  }
  const kpath = join(dir, 'kustomization.yaml');
  const k = existingText(kpath);
  const kustomization = k === undefined ? undefined : { path: kpath, text: removeResources(k, [file], kpath, namespace) };
  return { remove: existing === undefined ? undefined : path, kustomization: kustomization && kustomization.text !== k ? kustomization : undefined };
}

/** Removes a planned file; it was checked to be a regular file in --dir, and unlink never follows a link. */
export function removePlanned(path: string): void {
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new PluginError(`cannot remove ${path}: ${(err as Error).message}; check the permissions of --dir`);
  }
}

/**
 * Writes one planned file without following a link: O_NOFOLLOW refuses a symbolic link that appeared
 * since the plan was made (the plan checked every path first, so this is the race, not the rule).
 */
export function writePlanned(path: string, text: string): void {
  let fd: number;
  try {
    fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW, 0o666);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') throw usageError(`${path} became a symbolic link while gitops ran; gitops never follows a link out of --dir: replace the link with a copy of the file and run it again`);
    throw new PluginError(`cannot write ${path}: ${(err as Error).message}; check the permissions of --dir`);
  }
  try {
    if (!fstatSync(fd).isFile()) throw usageError(`${path} is not a regular file; move it away or choose another --dir`);
    const data = Buffer.from(text, 'utf8');
    // Truncated only once it is known to be our regular file.
    ftruncateSync(fd, 0);
    for (let off = 0; off < data.length; ) off += writeSync(fd, data, off);
  } finally {
    closeSync(fd);
  }
}

/**
 * The names that are not NodeDisks in the cluster. The overlay holds only the fields git owns, so for a
 * name the cluster does not have, Argo CD or Flux would create a NodeDisk without spec and the sync would
 * fail (spec: Required value): better said now than by the GitOps controller later.
 */
export async function missingInCluster(session: Session, names: string[]): Promise<string[]> {
  const missing: string[] = [];
  for (const name of names) {
    try {
      await session.client().get(name);
    } catch (err) {
      if (err instanceof ApiError && err.statusCode === 404 && err.status.details?.name === name) missing.push(name);
      else if (err instanceof TransportError || err instanceof KubeConfigError) {
        const { message } = describeError(err);
        throw new PluginError(`${message}; gitops checks that the NodeDisks exist: pass --offline to write the overlay without the cluster`, describeError(err).exitCode);
      } else throw err;
    }
  }
  return missing;
}
