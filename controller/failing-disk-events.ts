// When a reserved disk turns failing (its Healthy condition goes False, ADR 47), whoever holds it hears of it
// where they look: a Warning DiskFailing on the NodeDisk, and on the holder, a team's NodeDiskClaim or the
// PersistentVolumeClaim whose volume is on the disk, in the team's namespace. Once per turn to False: a
// controller restart finds the condition already False and says nothing again.
import { API_VERSION, CLAIM_KIND, PV_OWNER_PREFIX, REASON_DISK_FAILING } from '../api/constants.ts';
import { claimKeyOfOwner } from '../api/owner.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import type { RestClient } from '../lib/kube/rest.ts';
import type { Logger } from '../lib/runtime/log.ts';
import { type EventRecorder, type ObjectRef, refOf } from './events.ts';

interface PersistentVolume {
  spec?: { claimRef?: { namespace?: string; name?: string; uid?: string } };
}

/** The object the disk's reservation is for, when it is a team's: its claim, or the PVC of its volume. */
export async function holderOf(nd: NodeDisk, rest: Pick<RestClient, 'request'>): Promise<ObjectRef | undefined> {
  const d = nd.spec.desired;
  if (d?.state !== 'Reserved') return undefined;
  const claim = claimKeyOfOwner(d.owner);
  if (claim !== undefined) {
    const [namespace = '', name = ''] = claim.split('/');
    return { apiVersion: API_VERSION, kind: CLAIM_KIND, namespace, name, ...(d.ownerUID ? { uid: d.ownerUID } : {}) };
  }
  if (!d.owner?.startsWith(PV_OWNER_PREFIX)) return undefined;
  const pv = await rest.request<PersistentVolume>('GET', `/api/v1/persistentvolumes/${encodeURIComponent(d.owner.slice(PV_OWNER_PREFIX.length))}`);
  const ref = pv.spec?.claimRef;
  // The reservation names the PVC's UID: a PV bound to another claim since is not this reservation's.
  if (!ref?.namespace || !ref.name || (d.ownerUID && ref.uid !== d.ownerUID)) return undefined;
  return { apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace: ref.namespace, name: ref.name, ...(ref.uid ? { uid: ref.uid } : {}) };
}

/** Best effort, as every event: a holder that cannot be found is logged, never fails a reconcile. */
export async function tellFailing(nd: NodeDisk, message: string, o: { events: EventRecorder; rest: Pick<RestClient, 'request'>; log: Logger }): Promise<void> {
  const name = nd.metadata.name ?? '';
  o.log.warn('disk failing', { nodeDisk: name, message });
  await o.events.record(nd, 'Warning', REASON_DISK_FAILING, 'Observe', message);
  let holder: ObjectRef | undefined;
  try {
    holder = await holderOf(nd, o.rest);
  } catch (err) {
    o.log.warn("cannot find the failing disk's holder to tell it", { nodeDisk: name, owner: nd.spec.desired?.owner, error: (err as Error).message });
    return;
  }
  if (!holder) return;
  const note = `its disk ${name} on node ${nd.spec.nodeName} is failing: ${message}`;
  await o.events.recordAbout(holder, refOf(nd), 'Warning', REASON_DISK_FAILING, 'Observe', note);
}
