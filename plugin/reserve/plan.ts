// plugin/reserve/: what `reserve` and `release` do to NodeDisks: plan (here, pure), choose a free disk
// (api/free-disk.ts), carry a plan out (./execute.ts), whose field it is (./ownership.ts).
//
// Planning reads only the disks as they were listed and the request: what to write to each disk (the
// auto-reserve label, or spec.desired for --owner), or why not (someone else's reservation, a field git
// owns). Nothing is written until every disk is planned, so a refusal leaves the cluster as it was.
import {
  ANNOTATION_WIPE_ON_RELEASE,
  API_VERSION,
  AUTO_OWNER,
  AUTO_RESERVE_VALUE,
  CLAIM_OWNER_PREFIX,
  KIND,
  LABEL_AUTO_RESERVE,
  MAX_OWNER_LENGTH,
  OWNER_PATTERN,
  WIPE_ON_RELEASE_VALUE,
} from '../../api/constants.ts';
import type { JsonPatchOp, NodeDiskApply } from '../../api/client.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { EXIT, PluginError, usageError } from '../errors.ts';
import type { SelectionFlags } from '../select.ts';
import { pickFree } from '../../api/free-disk.ts';
import { pendingWipe } from '../../api/wipe.ts';
import { claimGone } from '../../api/owner.ts';
import { fieldOwners, gitOwners, gitRouteError } from './ownership.ts';

export type Action = 'reserve' | 'release';

/** What the user asked for, apart from which disks. */
export interface Request {
  /** A manual reservation for this owner (spec.desired) instead of the auto-reserve label. */
  owner?: string | undefined;
  /** Take over or release someone else's reservation. */
  force: boolean;
  /** Take fields over from other field managers, GitOps controllers included. */
  forceConflicts: boolean;
  /** release --wipe: the token of a wipe request the release carries (ADR 38). */
  wipe?: string | undefined;
  /** The token a release of a Released claim's disk carries unless --keep-data: its data is wiped by default. */
  claimWipe?: string | undefined;
}

/** A server-side apply, or (only to remove fields) a JSON Patch guarded by the resourceVersion. */
// (A stale conflict on an apply is resolved by applyResolving; --force here is about whose reservation it is.)
export type Step = { body: NodeDiskApply } | { name: string; patch: JsonPatchOp[] };

export interface Plan {
  /** The disk as it was read: its resourceVersion guards every write of the plan. */
  nd: NodeDisk;
  steps: Step[];
  /** What the confirmation line says. */
  verb: string;
  /** Why nothing is to be written (the disk is already as asked). */
  skip?: string;
}

const OWNER_RE = new RegExp(OWNER_PATTERN);

const base = (nd: NodeDisk) => ({ apiVersion: API_VERSION, kind: KIND, metadata: { name: nd.metadata.name ?? '' } }) as const;

/** Refuses an --owner the CRD would refuse, or the label policy's own (reserve and gitops both ask). */
export function validateOwner(owner: string | undefined): void {
  if (owner !== undefined && (owner === AUTO_OWNER || !OWNER_RE.test(owner) || owner.length > MAX_OWNER_LENGTH)) {
    throw usageError(
      owner === AUTO_OWNER
        ? '--owner auto is reserved for the label policy; omit --owner to reserve through the label'
        : `--owner ${JSON.stringify(owner)} is not a valid owner: letters, digits and - _ . : @ /, starting and ending with a letter or digit, at most ${MAX_OWNER_LENGTH} characters`,
    );
  }
}

export function planReserve(nd: NodeDisk, req: Request): Plan {
  const d = nd.spec.desired;
  const heldBy = d?.state === 'Reserved' ? (d.owner ?? '') : undefined;
  if (req.owner !== undefined) {
    if (heldBy === req.owner) return { nd, steps: [], verb: '', skip: `already reserved by ${req.owner}` };
    if (heldBy !== undefined && !req.force) {
      throw new PluginError(`${nd.metadata.name} is already reserved by ${heldBy || 'a manual reservation with no owner'}; release it first, or pass --force to take it over`, EXIT.conflict);
    }
    const owners = fieldOwners(nd, ['spec', 'desired', 'state']);
    if (gitOwners(owners).length && !req.forceConflicts) throw gitRouteError(nd, 'spec.desired', gitOwners(owners));
    // Taking over an auto reservation whose label git keeps would leave git and the cluster disagreeing.
    const labelGit = gitOwners(fieldOwners(nd, ['metadata', 'labels', LABEL_AUTO_RESERVE]));
    if (heldBy === AUTO_OWNER && labelGit.length && !req.forceConflicts) throw gitRouteError(nd, `the reservation (label ${LABEL_AUTO_RESERVE})`, labelGit);
    return { nd, steps: [{ body: { ...base(nd), spec: { desired: { state: 'Reserved', owner: req.owner } } } }], verb: `reserved for ${req.owner}` };
  }
  if (heldBy !== undefined && heldBy !== AUTO_OWNER && !req.force) {
    throw new PluginError(
      `${nd.metadata.name} is reserved by ${heldBy || 'a manual reservation with no owner'}; the auto-reserve label would have no effect. Release it first (it needs --force if it is not yours)`,
      EXIT.conflict,
    );
  }
  if (nd.metadata.labels?.[LABEL_AUTO_RESERVE] === AUTO_RESERVE_VALUE) return { nd, steps: [], verb: '', skip: 'already labelled for auto reservation' };
  const owners = fieldOwners(nd, ['metadata', 'labels', LABEL_AUTO_RESERVE]);
  if (gitOwners(owners).length && !req.forceConflicts) throw gitRouteError(nd, `label ${LABEL_AUTO_RESERVE}`, gitOwners(owners));
  return { nd, steps: [{ body: { ...base(nd), metadata: { ...base(nd).metadata, labels: { [LABEL_AUTO_RESERVE]: AUTO_RESERVE_VALUE } } } }], verb: 'reserved (auto-reserve label set)' };
}

// Server-side apply cannot remove a field that another manager also owns (for example a label set with
// `kubectl label`), so a release is one JSON Patch: it tests the resourceVersion it was planned against
// (someone else's change in between makes it fail with a conflict, never overwrite) and removes exactly
// the reservation. docs/adr/0009-plugin.md.
export function planRelease(nd: NodeDisk, req: Request): Plan {
  const d = nd.spec.desired;
  const label = nd.metadata.labels?.[LABEL_AUTO_RESERVE];
  const ops: JsonPatchOp[] = [{ op: 'test', path: '/metadata/resourceVersion', value: nd.metadata.resourceVersion }];
  let verb = 'released (auto-reserve label removed)';
  if (label !== undefined) {
    const owners = fieldOwners(nd, ['metadata', 'labels', LABEL_AUTO_RESERVE]);
    if (gitOwners(owners).length && !req.forceConflicts) throw gitRouteError(nd, `label ${LABEL_AUTO_RESERVE}`, gitOwners(owners));
    ops.push({ op: 'remove', path: `/metadata/labels/${pointer(LABEL_AUTO_RESERVE)}` });
    if (req.wipe !== undefined && d?.owner === AUTO_OWNER) {
      // The controller releases a label reservation; the annotation has it ask for the wipe (ADR 38).
      ops.push(
        nd.metadata.annotations
          ? { op: 'add', path: `/metadata/annotations/${pointer(ANNOTATION_WIPE_ON_RELEASE)}`, value: WIPE_ON_RELEASE_VALUE }
          : { op: 'add', path: '/metadata/annotations', value: { [ANNOTATION_WIPE_ON_RELEASE]: WIPE_ON_RELEASE_VALUE } },
      );
      verb = 'released (auto-reserve label removed; the controller asks for a wipe)';
    }
  }
  const claimKey = d?.state === 'Reserved' && d.owner?.startsWith(CLAIM_OWNER_PREFIX) ? d.owner.slice(CLAIM_OWNER_PREFIX.length) : undefined;
  if (claimKey !== undefined) {
    // A claim's reservation is its claim's (the API server keeps it so): released by deleting the claim,
    // or here once the controller says the claim is gone (Released, like a PV whose claim went).
    if (!claimGone(nd)) {
      const [ns, claim] = claimKey.split('/');
      throw new PluginError(
        `${nd.metadata.name} is reserved for NodeDiskClaim ${claimKey}: release it by deleting the claim (kubectl delete ndc ${claim} -n ${ns}). ` +
          'Once the claim is gone the controller says ClaimGone on the NodeDisk (kubectl nodedisks status shows it), and it can be released here',
        EXIT.conflict,
      );
    }
    // Released: the retained data was the gone claim's, so it is wiped first unless the person says not (ADR 38).
    const wipe = req.wipe ?? req.claimWipe;
    ops.push({ op: 'replace', path: '/spec/desired', value: { state: 'Available', ...(wipe !== undefined ? { wipe } : {}) } });
    const data = wipe !== undefined ? '; its node agent wipes it before it is free again' : '; its data is kept (--keep-data)';
    return { nd, steps: [{ name: nd.metadata.name ?? '', patch: ops }], verb: `released (it was reserved for NodeDiskClaim ${claimKey}, which is gone)${data}` };
  }
  if (d?.state === 'Reserved' && d.owner !== AUTO_OWNER) {
    const holder = d.owner ?? '';
    if (holder !== (req.owner ?? '') && !req.force) {
      throw new PluginError(
        `${nd.metadata.name} is reserved by ${holder || 'a manual reservation with no owner'}${req.owner ? `, not ${req.owner}` : ''}; pass --force to release someone else's reservation`,
        EXIT.conflict,
      );
    }
    const owners = fieldOwners(nd, ['spec', 'desired', 'state']);
    if (gitOwners(owners).length && !req.forceConflicts) throw gitRouteError(nd, 'spec.desired', gitOwners(owners));
    ops.push({ op: 'replace', path: '/spec/desired', value: { state: 'Available', ...(req.wipe !== undefined ? { wipe: req.wipe } : {}) } });
    verb = holder && holder !== req.owner ? `released (it was reserved by ${holder})` : 'released';
    if (req.wipe !== undefined) verb += '; its node agent wipes it before it is free again';
  } else if (req.wipe !== undefined && d?.state !== 'Reserved') {
    // A free disk that may hold an earlier owner's bytes: wiped before anyone gets it.
    if (pendingWipe(nd) !== undefined) return { nd, steps: [], verb: '', skip: `being wiped already (wipe request ${pendingWipe(nd)})` };
    ops.push({ op: 'replace', path: '/spec/desired', value: { state: 'Available', wipe: req.wipe } });
    verb = 'to be wiped: its node agent wipes it before it is free again';
  }
  if (ops.length === 1) return { nd, steps: [], verb: '', skip: 'not reserved' };
  return { nd, steps: [{ name: nd.metadata.name ?? '', patch: ops }], verb };
}

/** A JSON Pointer segment (RFC 6901). */
function pointer(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** One plan per disk (named disks, or every match with --all), all made before anything is written. */
export function planEach(disks: NodeDisk[], action: Action, req: Request): Plan[] {
  if (disks.length === 0) throw new PluginError('no NodeDisk matches the selection', EXIT.notFound);
  return disks.map((nd) => (action === 'reserve' ? planReserve(nd, req) : planRelease(nd, req)));
}

/**
 * "Give me a disk" (reserve -l/--node without --all): the first free, usable disk (by name) of the
 * selection as it was listed; when there is none, why each disk is not free. With --node alone the
 * reasons name the disks by their disk ID (all are of that node).
 */
export function chooseFree(disks: NodeDisk[], f: SelectionFlags): NodeDisk {
  if (disks.length === 0) throw new PluginError('no NodeDisk matches the selection', EXIT.notFound);
  const byNode = f.node !== undefined && f.selector === undefined && f.phase === undefined && f.desired === undefined;
  const { disk, skipped } = pickFree(disks, (nd) => (byNode ? nd.spec.diskID : (nd.metadata.name ?? '')));
  if (!disk) {
    const where = byNode ? `node ${f.node} has no free disk` : `none of the ${disks.length} selected disks is free`;
    throw new PluginError(`${where}: ${skipped.join(', ')}`, EXIT.conflict);
  }
  return disk;
}
