// kubectl nodedisks gitops reserve|release NAME… --dir DIR [--owner X]
// Writes the same change as `reserve`/`release` as a Kustomize overlay for Argo CD or Flux: one partial
// NodeDisk per disk with only the fields git owns, annotated so neither tool ever prunes or deletes a
// discovered NodeDisk, and applied with server-side apply so nothing else is touched. Deterministic:
// sorted, no timestamps, so running it again makes no diff; other entries of the overlay are kept, and
// existing files are edited in place (comments, order and quoting kept). Names the cluster does not have are
// refused unless --offline (docs/adr/0022-gitops-files-and-krew-archives.md). The overlay itself: ../gitops/overlay.ts.
import { mkdirSync } from 'node:fs';
import type { CommandSpec } from '../args.ts';
import { MAX_NAME_LENGTH } from '../../api/constants.ts';
import { DNS_SUBDOMAIN_PATTERN } from '../../api/names.ts';
import type { Session } from '../context.ts';
import { EXIT, PluginError, usageError } from '../errors.ts';
import { checkDirStaysInside, missingInCluster, planOverlay, writePlanned } from '../gitops/overlay.ts';
import { validateOwner } from '../reserve/plan.ts';

const dns = new RegExp(DNS_SUBDOMAIN_PATTERN);

export interface GitopsArgs {
  action: string;
  names: string[];
  dir?: string | undefined;
  owner?: string | undefined;
  offline?: boolean | undefined;
}

export const gitopsCommand: CommandSpec<GitopsArgs> = {
  name: 'gitops',
  aliases: ['overlay'],
  summary: 'Write reserve/release as a Kustomize overlay for Argo CD or Flux',
  description:
    'Write the same change as reserve/release as a Kustomize overlay: one partial NodeDisk per disk with only the fields git owns, annotated so that neither Argo CD nor Flux ever prunes or deletes a discovered NodeDisk, applied server-side. The output is sorted and has no timestamps, so running it again makes no diff; an existing kustomization.yaml or disk file is edited in place, keeping its comments, key order and quoting. The names must be NodeDisks in the cluster (a partial NodeDisk for a name the cluster lacks would fail to sync with "spec: Required value"); --offline skips that check and needs no cluster.',
  positionals: [
    { name: 'action', describe: 'reserve or release', required: true, choices: ['reserve', 'release'] },
    { name: 'names', describe: 'NodeDisk names', variadic: true },
  ],
  flags: {
    dir: { type: 'string', describe: 'The overlay directory in your GitOps repository (created or updated)' },
    owner: { type: 'string', describe: 'A manual reservation for this owner instead of the auto-reserve label' },
    offline: { type: 'boolean', describe: 'Do not check in the cluster that the NodeDisks exist (no kubeconfig needed)' },
  },
  examples: [
    ['kubectl nodedisks gitops reserve node-disk-node-a-disk1 --dir clusters/prod/nodedisks', 'Write the reservation; commit the directory and let Argo CD or Flux apply it'],
    ['kubectl nodedisks gitops release node-disk-node-a-disk1 --dir clusters/prod/nodedisks', 'Write the release (the label becomes "false")'],
    ['kubectl nodedisks gitops reserve node-disk-node-b-disk9 --dir clusters/prod/nodedisks --offline', 'Write it without checking the cluster (the disk must exist before the overlay syncs)'],
  ],
  run: async (session: Session, args: GitopsArgs): Promise<void> => {
    const action = args.action as 'reserve' | 'release';
    if (!args.names.length) throw usageError('gitops needs NodeDisk names (see kubectl nodedisks list -o name)');
    for (const name of args.names) {
      if (name.length > MAX_NAME_LENGTH || !dns.test(name)) throw usageError(`${JSON.stringify(name)} is not a NodeDisk name (a DNS subdomain such as node-disk-node-a-disk1)`);
    }
    // The owner the CRD (and reserve) accepts, or the sync would fail later in Argo CD or Flux.
    validateOwner(args.owner);
    if (!args.dir) throw usageError('gitops needs --dir: the overlay directory in your GitOps repository');
    checkDirStaysInside(args.dir);
    // Every file is computed (and checked) before the cluster is asked and before anything is written.
    const plan = await planOverlay(args.dir, args.names, action, args.owner);
    if (!args.offline) {
      const missing = await missingInCluster(session, [...new Set(args.names)].sort());
      if (missing.length > 0) {
        throw new PluginError(
          `${missing.map((n) => JSON.stringify(n)).join(', ')} ${missing.length === 1 ? 'is not a NodeDisk' : 'are not NodeDisks'} in this cluster: ` +
            'the overlay holds only the fields git owns, so Argo CD or Flux would fail to sync it (spec: Required value). ' +
            'Check the name with kubectl nodedisks list, or pass --offline to write it anyway (for a disk the agent has not discovered yet); nothing was written',
          EXIT.notFound,
        );
      }
    }
    mkdirSync(args.dir, { recursive: true });
    for (const f of plan) writePlanned(f.path, f.text);
    for (const f of plan.slice(0, -1)) session.io.out(`${f.path}\n`);
  },
};
