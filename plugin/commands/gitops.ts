// kubectl nodedisks gitops reserve|release NAME… --dir DIR [--owner X]
// Writes the same change as `reserve`/`release` as a Kustomize overlay for Argo CD or Flux: one partial
// NodeDisk per disk with only the fields git owns, annotated so neither tool ever prunes or deletes a
// discovered NodeDisk, and applied with server-side apply so nothing else is touched. Deterministic:
// sorted, no timestamps, so running it again makes no diff; other entries of the overlay are kept.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CommandSpec } from '../args.ts';
import { API_VERSION, AUTO_OWNER, KIND, LABEL_AUTO_RESERVE, MAX_NAME_LENGTH } from '../../api/constants.ts';
import { DNS_SUBDOMAIN_PATTERN } from '../../api/names.ts';
import type { Session } from '../context.ts';
import { usageError } from '../errors.ts';

export const GITOPS_ANNOTATIONS = {
  // Argo CD: never prune or delete the discovered object; apply server-side so only these fields are owned.
  'argocd.argoproj.io/sync-options': 'Prune=false,Delete=false,ServerSideApply=true',
  // Flux: never prune; merge with fields owned by others instead of replacing the object.
  'kustomize.toolkit.fluxcd.io/prune': 'disabled',
  'kustomize.toolkit.fluxcd.io/ssa': 'Merge',
} as const;

const HEADER = '# Written by `kubectl nodedisks gitops`. Only the fields git owns; the NodeDisk itself is discovered by the node agent.\n';
const dns = new RegExp(DNS_SUBDOMAIN_PATTERN);

export interface GitopsArgs {
  action: string;
  names: string[];
  dir?: string | undefined;
  owner?: string | undefined;
}

export function overlayObject(name: string, action: 'reserve' | 'release', owner: string | undefined): Record<string, unknown> {
  const metadata: Record<string, unknown> = { name, annotations: { ...GITOPS_ANNOTATIONS } };
  if (owner === undefined) {
    // The policy path: git owns the label. Releasing writes "false" (the policy then releases), because
    // with pruning off, deleting the file would leave the label in the cluster.
    metadata.labels = { [LABEL_AUTO_RESERVE]: action === 'reserve' ? 'true' : 'false' };
    return { apiVersion: API_VERSION, kind: KIND, metadata };
  }
  return { apiVersion: API_VERSION, kind: KIND, metadata, spec: { desired: action === 'reserve' ? { state: 'Reserved', owner } : { state: 'Available' } } };
}

/** Stable YAML: keys in a fixed order, no timestamps. */
async function toYaml(obj: unknown): Promise<string> {
  const { dump } = await import('js-yaml');
  return dump(obj, { sortKeys: (a: string, b: string) => order(a) - order(b) || a.localeCompare(b), lineWidth: -1, noRefs: true });
}
const KEY_ORDER = ['apiVersion', 'kind', 'metadata', 'name', 'labels', 'annotations', 'spec', 'resources'];
const order = (k: string) => (KEY_ORDER.includes(k) ? KEY_ORDER.indexOf(k) : KEY_ORDER.length);

export async function writeOverlay(dir: string, names: string[], action: 'reserve' | 'release', owner: string | undefined): Promise<string[]> {
  mkdirSync(dir, { recursive: true });
  const kpath = join(dir, 'kustomization.yaml');
  let kustomization: Record<string, unknown> = { apiVersion: 'kustomize.config.k8s.io/v1beta1', kind: 'Kustomization', resources: [] };
  if (existsSync(kpath)) {
    const { load } = await import('js-yaml');
    const parsed = load(readFileSync(kpath, 'utf8'));
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw usageError(`${kpath} is not a Kustomization; choose another --dir`);
    kustomization = parsed as Record<string, unknown>;
    if ('namespace' in kustomization) throw usageError(`${kpath} sets a namespace; NodeDisks are cluster-scoped, remove it or use another --dir`);
  }
  const resources = new Set(Array.isArray(kustomization.resources) ? (kustomization.resources as string[]) : []);
  const written: string[] = [];
  for (const name of [...names].sort()) {
    const file = `${name}.yaml`;
    writeFileSync(join(dir, file), HEADER + (await toYaml(overlayObject(name, action, owner))));
    resources.add(file);
    written.push(join(dir, file));
  }
  kustomization.resources = [...resources].sort();
  writeFileSync(kpath, await toYaml(kustomization));
  return written;
}

export const gitopsCommand: CommandSpec<GitopsArgs> = {
  name: 'gitops',
  aliases: ['overlay'],
  summary: 'Write reserve/release as a Kustomize overlay for Argo CD or Flux (no cluster needed)',
  description:
    'Write the same change as reserve/release as a Kustomize overlay: one partial NodeDisk per disk with only the fields git owns, annotated so that neither Argo CD nor Flux ever prunes or deletes a discovered NodeDisk, applied server-side. The output is sorted and has no timestamps, so running it again makes no diff; other entries of the overlay are kept.',
  positionals: [
    { name: 'action', describe: 'reserve or release', required: true, choices: ['reserve', 'release'] },
    { name: 'names', describe: 'NodeDisk names', variadic: true },
  ],
  flags: {
    dir: { type: 'string', describe: 'The overlay directory in your GitOps repository (created or updated)' },
    owner: { type: 'string', describe: 'A manual reservation for this owner instead of the auto-reserve label' },
  },
  examples: [
    ['kubectl nodedisks gitops reserve node-disk-node-a-disk1 --dir clusters/prod/nodedisks', 'Write the reservation; commit the directory and let Argo CD or Flux apply it'],
    ['kubectl nodedisks gitops release node-disk-node-a-disk1 --dir clusters/prod/nodedisks', 'Write the release (the label becomes "false")'],
  ],
  run: async (session: Session, args: GitopsArgs): Promise<void> => {
    const action = args.action as 'reserve' | 'release';
    if (!args.names.length) throw usageError('gitops needs NodeDisk names (see kubectl nodedisks list -o name)');
    for (const name of args.names) {
      if (name.length > MAX_NAME_LENGTH || !dns.test(name)) throw usageError(`${JSON.stringify(name)} is not a NodeDisk name (a DNS subdomain such as node-disk-node-a-disk1)`);
    }
    if (args.owner === AUTO_OWNER) throw usageError('--owner auto is reserved for the label policy; omit --owner to use the label');
    if (!args.dir) throw usageError('gitops needs --dir: the overlay directory in your GitOps repository');
    const written = await writeOverlay(args.dir, args.names, action, args.owner);
    for (const f of written) session.io.out(`${f}\n`);
  },
};
