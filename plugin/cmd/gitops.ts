// kubectl nodedisks gitops reserve|release NAME… --dir DIR [--owner X]
// kubectl nodedisks gitops cordon|uncordon NAME…|--node N|-l SEL --dir DIR
// kubectl nodedisks gitops claim NAME -n NS --dir DIR [the spec flags of `claim`]; gitops unclaim NAME -n NS --dir DIR
// Writes the same change as `reserve`/`release` as a Kustomize overlay for Argo CD or Flux: one partial
// NodeDisk per disk with only the fields git owns, annotated so neither tool ever prunes or deletes a
// discovered NodeDisk, and applied with server-side apply so nothing else is touched. Deterministic:
// sorted, no timestamps, so running it again makes no diff; other entries of the overlay are kept, and
// existing files are edited in place (comments, order and quoting kept). Names the cluster does not have are
// refused unless --offline (docs/adr/0022-gitops-files-and-krew-archives.md). The overlay itself: ../gitops/overlay.ts.
import { mkdirSync } from 'node:fs';
import type { CommandSpec } from '../args.ts';
import { MAX_CLAIM_NAME_LENGTH, MAX_NAME_LENGTH } from '../../api/constants.ts';
import { DNS_SUBDOMAIN_PATTERN } from '../../api/names.ts';
import type { Session } from '../context.ts';
import { EXIT, PluginError, usageError } from '../errors.ts';
import { checkDirStaysInside, claimFile, type DiskChange, missingInCluster, planClaim, planOverlay, planUnclaim, removePlanned, writePlanned } from '../gitops/overlay.ts';
import { claimFromFlags, type ClaimSpecFlags } from '../claim-model.ts';
import { hasSelection, resolveTargets } from '../select.ts';
import { validateOwner } from '../reserve/plan.ts';

const dns = new RegExp(DNS_SUBDOMAIN_PATTERN);
const dnsLabel = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

const DISK_ACTIONS = ['reserve', 'release', 'cordon', 'uncordon'] as const;
const CLAIM_ACTIONS = ['claim', 'unclaim'] as const;
type Action = (typeof DISK_ACTIONS)[number] | (typeof CLAIM_ACTIONS)[number];

export interface GitopsArgs extends ClaimSpecFlags {
  action: string;
  names: string[];
  dir?: string | undefined;
  owner?: string | undefined;
  offline?: boolean | undefined;
  namespace?: string | undefined;
}

/** Flags that mean something for some actions only: given to another, they are refused, not ignored. */
const FLAGS_OF: Record<string, readonly Action[]> = {
  owner: ['reserve', 'release'],
  namespace: ['claim', 'unclaim'],
  'min-capacity': ['claim'],
  disk: ['claim'],
  'reclaim-policy': ['claim'],
  node: ['claim', 'cordon', 'uncordon'],
  selector: ['claim', 'cordon', 'uncordon'],
};

function checkFlags(action: Action, args: GitopsArgs): void {
  for (const [flag, actions] of Object.entries(FLAGS_OF)) {
    if ((args as unknown as Record<string, unknown>)[flag] !== undefined && !actions.includes(action)) {
      throw usageError(`--${flag} is not a flag of gitops ${action} (it is one of gitops ${actions.join(', ')})`);
    }
  }
}

/** The namespace, from -n only: what is in git must not depend on whose kubeconfig wrote it. */
function claimNamespace(args: GitopsArgs): string {
  const ns = args.namespace;
  if (ns === undefined) throw usageError(`gitops ${args.action} needs -n/--namespace: the claim's namespace is written into the file, so it is not taken from the kubeconfig`);
  if (!dnsLabel.test(ns)) throw usageError(`-n ${JSON.stringify(ns)} is not a namespace name (a DNS label: at most 63 lower case letters, digits and '-', such as team-a)`);
  return ns;
}

function claimName(args: GitopsArgs): string {
  if (args.names.length !== 1) throw usageError(`gitops ${args.action} takes one claim name, got ${args.names.length}`);
  const name = args.names[0]!;
  if (name.length > MAX_CLAIM_NAME_LENGTH || !dns.test(name)) {
    throw usageError(
      `invalid claim name ${JSON.stringify(name)}: a DNS subdomain of at most ${MAX_CLAIM_NAME_LENGTH} characters (lower case letters, digits, '-' and '.', starting and ending with a letter or digit)`,
    );
  }
  return name;
}

function needDir(args: GitopsArgs): string {
  if (!args.dir) throw usageError('gitops needs --dir: the overlay directory in your GitOps repository');
  checkDirStaysInside(args.dir);
  return args.dir;
}

async function writeClaim(session: Session, action: 'claim' | 'unclaim', args: GitopsArgs): Promise<void> {
  const name = claimName(args);
  const namespace = claimNamespace(args);
  // The spec as `kubectl nodedisks claim` builds and checks it.
  const claim = action === 'claim' ? claimFromFlags(namespace, name, args) : undefined;
  const dir = needDir(args);
  if (claim) {
    const plan = await planClaim(dir, claim);
    mkdirSync(dir, { recursive: true });
    for (const f of plan) writePlanned(f.path, f.text);
    session.io.out(`${plan[0]!.path}\n`);
    return;
  }
  const { remove, kustomization } = await planUnclaim(dir, namespace, name);
  if (kustomization) writePlanned(kustomization.path, kustomization.text);
  if (remove) {
    removePlanned(remove);
    session.io.out(`${remove} removed\n`);
  } else if (!kustomization) session.io.err(`${claimFile(namespace, name)} is not in ${dir}: nothing to remove\n`);
}

/** The disks of a disk action: the names given, or those -l/--node select in the cluster (`listed`: no need to look them up again). */
async function diskNames(session: Session, action: Action, args: GitopsArgs): Promise<{ names: string[]; listed: boolean }> {
  const selection = { node: args.node, selector: args.selector };
  if (!hasSelection(selection)) {
    if (!args.names.length) throw usageError(`gitops ${action} needs NodeDisk names${action.includes('cordon') ? ', or --node/-l' : ''} (see kubectl nodedisks list -o name)`);
    return { names: args.names, listed: false };
  }
  if (args.names.length) throw usageError('name disks or select them with -l/--node, not both');
  if (args.offline) throw usageError('--node and -l select the disks in the cluster: name the disks instead to write the overlay --offline');
  const found = (await resolveTargets(session, [], selection)).map((nd) => nd.metadata.name ?? '');
  if (found.length === 0)
    throw new PluginError(
      `no NodeDisk matches ${args.node !== undefined ? `--node ${args.node}` : ''}${args.node !== undefined && args.selector !== undefined ? ' and ' : ''}${args.selector !== undefined ? `-l ${args.selector}` : ''}; nothing was written`,
      EXIT.notFound,
    );
  return { names: found, listed: true };
}

export const gitopsCommand: CommandSpec<GitopsArgs> = {
  name: 'gitops',
  aliases: ['overlay'],
  summary: 'Write reserve/release, cordon/uncordon or a claim as a Kustomize overlay for Argo CD or Flux',
  description:
    'Write the same change as reserve/release or cordon/uncordon as a Kustomize overlay: one partial NodeDisk per disk with only the fields git owns, annotated so that neither Argo CD nor Flux ever prunes or deletes a discovered NodeDisk, applied server-side. The output is sorted and has no timestamps, so running it again makes no diff; an existing kustomization.yaml or disk file is edited in place, keeping its comments, key order and quoting. The names must be NodeDisks in the cluster (a partial NodeDisk for a name the cluster lacks would fail to sync with "spec: Required value"); --offline skips that check and needs no cluster. ' +
    "gitops claim writes a NodeDiskClaim (with the flags of kubectl nodedisks claim) for a team's own repository, and gitops unclaim removes it: the claim is a whole object, released when the GitOps tool prunes it; neither needs a cluster.",
  positionals: [
    { name: 'action', describe: 'reserve, release, cordon, uncordon, claim or unclaim', required: true, choices: [...DISK_ACTIONS, ...CLAIM_ACTIONS] },
    { name: 'names', describe: 'NodeDisk names (a claim name for claim and unclaim)', variadic: true },
  ],
  flags: {
    dir: { type: 'string', describe: 'The overlay directory in your GitOps repository (created or updated)' },
    owner: { type: 'string', describe: 'reserve/release: a manual reservation for this owner instead of the auto-reserve label' },
    offline: { type: 'boolean', describe: 'Do not check in the cluster that the NodeDisks exist (no kubeconfig needed; claim and unclaim never ask the cluster)' },
    namespace: { type: 'string', short: 'n', describe: "claim/unclaim: the claim's namespace (required: it is written into the file)" },
    node: { type: 'string', describe: 'claim: only disks of this node (spec.nodeName); cordon/uncordon: every disk of this node' },
    selector: { type: 'string', short: 'l', describe: 'claim: only disks whose labels match (spec.selector); cordon/uncordon: every disk whose labels match' },
    'min-capacity': { type: 'string', describe: 'claim: only disks at least this big, a quantity such as 32Mi (spec.minCapacity)' },
    disk: { type: 'string', describe: 'claim: this NodeDisk and no other (spec.diskName)' },
    'reclaim-policy': { type: 'string', describe: 'claim: Delete (the default) or Retain (spec.reclaimPolicy)' },
  },
  examples: [
    ['kubectl nodedisks gitops reserve node-disk-node-a-disk1 --dir clusters/prod/nodedisks', 'Write the reservation; commit the directory and let Argo CD or Flux apply it'],
    ['kubectl nodedisks gitops release node-disk-node-a-disk1 --dir clusters/prod/nodedisks', 'Write the release (the label becomes "false")'],
    ['kubectl nodedisks gitops reserve node-disk-node-b-disk9 --dir clusters/prod/nodedisks --offline', 'Write it without checking the cluster (the disk must exist before the overlay syncs)'],
    ['kubectl nodedisks gitops cordon --node node-a --dir clusters/prod/nodedisks', 'Cordon every disk of node-a from git (uncordon writes the label "false")'],
    ['kubectl nodedisks gitops claim db -n team-a --min-capacity 32Mi --dir apps/team-a', "Write a claim into a team's repository"],
    ['kubectl nodedisks gitops unclaim db -n team-a --dir apps/team-a', 'Remove it (the disk is released once the sync prunes the claim)'],
  ],
  run: async (session: Session, args: GitopsArgs): Promise<void> => {
    const action = args.action as Action;
    checkFlags(action, args);
    if (action === 'claim' || action === 'unclaim') return await writeClaim(session, action, args);
    for (const name of args.names) {
      if (name.length > MAX_NAME_LENGTH || !dns.test(name)) throw usageError(`${JSON.stringify(name)} is not a NodeDisk name (a DNS subdomain such as node-disk-node-a-disk1)`);
    }
    // The owner the CRD (and reserve) accepts, or the sync would fail later in Argo CD or Flux.
    validateOwner(args.owner);
    const dir = needDir(args);
    const change: DiskChange = action === 'cordon' || action === 'uncordon' ? { action } : { action, owner: args.owner };
    const { names, listed } = await diskNames(session, action, args);
    // Every file is computed (and checked) before the cluster is asked and before anything is written.
    const plan = await planOverlay(dir, names, change);
    if (!args.offline && !listed) {
      const missing = await missingInCluster(session, [...new Set(names)].sort());
      if (missing.length > 0) {
        throw new PluginError(
          `${missing.map((n) => JSON.stringify(n)).join(', ')} ${missing.length === 1 ? 'is not a NodeDisk' : 'are not NodeDisks'} in this cluster: ` +
            'the overlay holds only the fields git owns, so Argo CD or Flux would fail to sync it (spec: Required value). ' +
            'Check the name with kubectl nodedisks list, or pass --offline to write it anyway (for a disk the agent has not discovered yet); nothing was written',
          EXIT.notFound,
        );
      }
    }
    mkdirSync(dir, { recursive: true });
    for (const f of plan) writePlanned(f.path, f.text);
    for (const f of plan.slice(0, -1)) session.io.out(`${f.path}\n`);
  },
};
