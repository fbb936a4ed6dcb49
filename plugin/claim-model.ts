// NodeDiskClaims in the plugin, the pure parts: the claim a command line asks for, the label selector
// it names, what a claim's status says in words, and, for a Bound claim, the PersistentVolumeClaim a pod
// uses instead (a claim reserves a disk; pods get theirs through the CSI driver, docs/adr/0040).
// The commands are ./cmd/claim.ts, ./cmd/claims.ts and the claim/NAME form of ./cmd/status.ts.
import { labelSelectorOf, selectorWords } from '../api/label-selector.ts';
import { API_VERSION, CLAIM_CONDITION, CLAIM_KIND, CLAIM_SINGULAR, GROUP, MAX_NAME_LENGTH } from '../api/constants.ts';
import { DNS_SUBDOMAIN_PATTERN, nodeNameProblem } from '../api/names.ts';
import { quantityBytes } from '../api/quantity.ts';
import { RECLAIM_POLICIES, type LabelSelector, type NodeDiskClaim, type ReclaimPolicy } from '../api/v1alpha1/claim-types.ts';
import { usageError } from './errors.ts';

/** kubectl's `<singular>.<group>/<name>`. */
export const claimRef = (name: string): string => `${CLAIM_SINGULAR}.${GROUP}/${name}`;

/** The flags of `claim` that become the spec. */
export interface ClaimSpecFlags {
  node?: string | undefined;
  'min-capacity'?: string | undefined;
  selector?: string | undefined;
  disk?: string | undefined;
  'reclaim-policy'?: string | undefined;
}

/** A label selector as kubectl takes it (api/label-selector.ts), or a usage error naming the flag. */
export function parseLabelSelector(text: string): LabelSelector {
  try {
    return labelSelectorOf(text);
  } catch (err) {
    throw usageError(`-l/--selector ${JSON.stringify(text)}: ${(err as Error).message}`);
  }
}

/** The claim `kubectl nodedisks claim NAME …` creates; every flag is checked here, before any request. */
export function claimFromFlags(namespace: string, name: string, f: ClaimSpecFlags): NodeDiskClaim {
  const spec: NodeDiskClaim['spec'] = {};
  if (f.node !== undefined) {
    // Checked as the API server checks spec.nodeName, so that a claim written into git does not fail its sync.
    const problem = nodeNameProblem(f.node);
    if (problem) throw usageError(`--node: ${problem}`);
    spec.nodeName = f.node;
  }
  if (f['min-capacity'] !== undefined) {
    const bytes = quantityBytes(f['min-capacity']);
    if (bytes === undefined || bytes <= 0) throw usageError(`--min-capacity must be a positive quantity such as 32Mi or 1Gi, got ${JSON.stringify(f['min-capacity'])}`);
    spec.minCapacity = f['min-capacity'];
  }
  if (f.selector !== undefined) spec.selector = parseLabelSelector(f.selector);
  if (f.disk !== undefined) {
    if (f.disk === '') throw usageError('--disk needs a NodeDisk name');
    if (f.disk.length > MAX_NAME_LENGTH || !new RegExp(DNS_SUBDOMAIN_PATTERN).test(f.disk))
      throw usageError(`--disk ${JSON.stringify(f.disk)} is not a NodeDisk name (a DNS subdomain such as node-disk-node-a-disk1)`);
    spec.diskName = f.disk;
  }
  if (f['reclaim-policy'] !== undefined) {
    if (!(RECLAIM_POLICIES as readonly string[]).includes(f['reclaim-policy']))
      throw usageError(`--reclaim-policy must be ${RECLAIM_POLICIES.join(' or ')}, got ${JSON.stringify(f['reclaim-policy'])}`);
    spec.reclaimPolicy = f['reclaim-policy'] as ReclaimPolicy;
  }
  return { apiVersion: API_VERSION, kind: CLAIM_KIND, metadata: { name, namespace }, spec };
}

const conditionTrue = (c: NodeDiskClaim, type: string): boolean => c.status?.conditions?.some((x) => x.type === type && x.status === 'True') ?? false;

/** Bound to a disk, and (when `ready`) its marker is on the node: what `claim --wait` waits for. */
export function claimUsable(c: NodeDiskClaim, ready = true): boolean {
  const s = c.status;
  const observed = s?.observedGeneration === undefined || c.metadata.generation === undefined || s.observedGeneration >= c.metadata.generation;
  return observed && s?.phase === 'Bound' && !!s.nodeName && !!s.path && conditionTrue(c, CLAIM_CONDITION.bound) && (!ready || conditionTrue(c, CLAIM_CONDITION.ready));
}

/** Why a claim is not (yet) usable, in one line: the controller's reason when it gave one. */
export function claimReason(c: NodeDiskClaim): string {
  const s = c.status;
  if (!s?.phase) return 'Pending: the controller has not looked at this claim yet (is node-disks-operator running?)';
  const notReady = s.conditions?.find((x) => x.type === CLAIM_CONDITION.ready && x.status !== 'True');
  if (s.phase === 'Bound' && notReady) return `Bound to ${s.diskName ?? '?'} on ${s.nodeName ?? '?'}, not Ready: ${notReady.message || notReady.reason || 'its marker is not on the node yet'}`;
  return `${s.phase}${s.message ? `: ${s.message}` : ''}`;
}

/** The line `claim --wait` prints once the claim is usable. */
export const boundLine = (c: NodeDiskClaim): string => `${claimRef(c.metadata.name ?? '')} bound to ${c.status?.diskName ?? ''}: node ${c.status?.nodeName ?? ''}, path ${c.status?.path ?? ''}\n`;

/** A YAML string scalar, quoted only when plain YAML would read it as something else (a keyword, a number). */
function scalar(v: string): string {
  return /^[A-Za-z0-9/][-A-Za-z0-9_./]*$/.test(v) && !/^(true|false|yes|no|on|off|null|y|n|~)$/i.test(v) && !/^[-+]?[0-9._]+([eE][-+]?[0-9]+)?$/.test(v) ? v : JSON.stringify(v);
}

/** The StorageClass the install ships for the CSI driver (kustomize/csi; the chart's storageClass.name). */
export const STORAGE_CLASS = 'nodedisks';

/** Bytes as the shortest exact binary quantity: 67108864 → 64Mi, 1000 → 1000. */
function exactQuantity(bytes: number): string {
  const units = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi'];
  let v = bytes;
  let u = 0;
  while (u < units.length - 1 && v >= 1024 && v % 1024 === 0) {
    v /= 1024;
    u++;
  }
  return `${v}${units[u]}`;
}

/**
 * What a Bound claim's reader is told about pods: no pod mounts a claim's disk (the hostPath that did is
 * refused by the baseline Pod Security Standard, and nothing tied the pod to the claim); a pod asks for a
 * node-local disk with a PersistentVolumeClaim of the CSI driver's StorageClass. The PVC asks for what the
 * claim asked (its minCapacity), else the size of the disk it got, so that it fits where the claim did.
 * Loadable YAML, as kubectl create -f takes it; the comments say the rest.
 */
export function pvcPointer(c: NodeDiskClaim): string {
  const size = c.spec?.minCapacity ?? (c.status?.capacityBytes !== undefined ? exactQuantity(c.status.capacityBytes) : '1Gi');
  return [
    `# Pods do not mount a claim's disk. A pod gets a node-local disk through a PersistentVolumeClaim of`,
    `# StorageClass ${STORAGE_CLASS}: its pod is scheduled where a free disk fits; deleting the PVC wipes the disk.`,
    'apiVersion: v1',
    'kind: PersistentVolumeClaim',
    `metadata: {name: data, namespace: ${scalar(c.metadata.namespace ?? 'default')}}`,
    `spec: {storageClassName: ${STORAGE_CLASS}, accessModes: [ReadWriteOnce], resources: {requests: {storage: ${scalar(size)}}}}`,
    '# and in the pod: volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]',
    '',
  ].join('\n');
}

/** The API server's Table of claims, as kubectl get asks for it (with the objects' metadata, for -A). */
export interface ClaimTable {
  columnDefinitions?: { name: string; priority?: number }[];
  rows?: { cells: unknown[]; object?: { metadata?: { namespace?: string; name?: string } } }[];
  metadata?: { continue?: string; resourceVersion?: string };
}

/** `claim/NAME` (or ndc/, nodediskclaim/, nodediskclaims/, as kubectl takes a kind before a name): NAME, else undefined. */
export function claimName(arg: string): string | undefined {
  const m = /^(claim|claims|ndc|nodediskclaim|nodediskclaims|nodediskclaim\.localtest\.example\.com|nodediskclaims\.localtest\.example\.com)\/(.+)$/.exec(arg);
  return m?.[2];
}

/** What a claim asks for, in words. */
export function claimAsks(c: NodeDiskClaim): string {
  const s = c.spec ?? {};
  const parts: string[] = [];
  if (s.diskName) parts.push(`disk ${s.diskName}`);
  if (s.nodeName) parts.push(`node ${s.nodeName}`);
  if (s.minCapacity) parts.push(`at least ${s.minCapacity}`);
  if (s.selector) {
    const words = selectorWords(s.selector);
    if (words) parts.push(`labels ${words}`);
  }
  parts.push(`reclaim policy ${s.reclaimPolicy ?? 'Delete'}`);
  return parts.length === 1 ? `any free disk, ${parts[0]}` : parts.join(', ');
}

/**
 * `status claim/NAME`: why it is Pending; when Bound and Ready, where the disk is and, for pods, the PVC.
 * `disks`: for a reader who may list NodeDisks, every disk counted by why it does not fit.
 */
export function describeClaim(c: NodeDiskClaim, disks?: string): string {
  const s = c.status;
  const usable = claimUsable(c);
  const lines: [string, string][] = [
    ['Asks', claimAsks(c)],
    ['Status', usable ? `Bound to ${s?.diskName} on node ${s?.nodeName}, Ready` : claimReason(c)],
  ];
  if (disks !== undefined) lines.push(['Disks', disks]);
  if (s?.phase === 'Bound' || s?.phase === 'Lost') {
    if (s.capacityBytes !== undefined) lines.push(['Capacity', String(s.capacityBytes)]);
    if (s.path) lines.push(['Path', s.path]);
  }
  const width = Math.max(...lines.map(([k]) => k.length)) + 2;
  const head = `${c.metadata.name ?? ''} (namespace ${c.metadata.namespace ?? ''})\n${lines.map(([k, v]) => `  ${`${k}:`.padEnd(width)}${v}`).join('\n')}\n`;
  return usable ? `${head}\n${pvcPointer(c)}` : head;
}
