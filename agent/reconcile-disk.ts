// One disk's reconcile: its NodeDisk (created for a new file), its reservation marker, the agent's
// finalizer and status.node, from the last discovery of the disk dir and the informer's cache.
//
// The order is the reservation's safety (ADR 12): the finalizer is added before a marker is written, and
// removed only after the marker is gone, so a NodeDisk cannot be deleted while node-side reservation state
// may exist. status.node says what is on disk after the fact (ADR 6) and is written only when it changed:
// the node's heartbeat Lease says the agent is alive (ADR 24).
//
// A NodeDisk of this node's name reported by another machine (status.node.nodeUID is not this node's UID:
// the Node was deleted and registered again, ADR 35) is that machine's: reserved, it is left entirely
// alone (no marker written or removed here, no report, no finalizer change) and the controller says so;
// not reserved, nothing of it is worth keeping, so its finalizer (a marker on the other machine) is let go
// and it is reported afresh, as this machine's disk.
import { ANNOTATION_HEALTH_REVIEWED, API_VERSION, FIELD_MANAGER, FINALIZER, KIND, LABEL_DISK, LABEL_MEDIA, LABEL_NODE, RECOVERED_OWNER } from '../api/constants.ts';
import type { NodeDiskClient } from '../api/client.ts';
import { diskIdFromFileName, diskPath, isDriveId, labelValue, nodeDiskName } from '../api/names.ts';
import type { NodeDisk, NodeStatus } from '../api/v1alpha1/types.ts';
import { isApiError } from '../lib/kube/errors.ts';
import { pendingWipe } from '../api/wipe.ts';
import { failing } from '../api/free-disk.ts';
import type { Logger } from '../lib/runtime/log.ts';
import type { Discovery, DiskFile } from './discover.ts';
import { judgeHealth, kernelProblems, type KernelProblem } from './disk-health.ts';
import { loopDevicesHolding } from './loop-attached.ts';
import { ensureMarker, markerState, removeMarker } from './markers.ts';
import type { AgentMetrics } from './metrics.ts';
import { observedStatus, statusChanged } from './observe.ts';
import { addProtection, isProtected, removeProtection } from './protection.ts';
import { forgetDriveWipe, wipeDriveStep } from './wipe-drive.ts';
import { wipeImage } from './wipe-image.ts';

/** The agent's NodeDisks as the informer keeps them (see Informer.storeOwnWrite). */
export interface DiskCache {
  get(name: string): NodeDisk | undefined;
  /** Stores what a write returned unless the cache holds a newer one; returns what is cached now. */
  storeOwnWrite(nd: NodeDisk): NodeDisk;
  forget(name: string): void;
  values(): Iterable<NodeDisk>;
}

export interface ReconcileContext {
  client: Pick<NodeDiskClient, 'get' | 'create' | 'applyStatus' | 'mergePatch'>;
  nodeName: string;
  /** The disk dir as this process sees it. */
  diskDir: string;
  /** The same dir as a path on the host, for spec.path. */
  hostDiskDir: string;
  cache: DiskCache;
  log: Logger;
  metrics: AgentMetrics;
  /** The last marker problem of each disk, so that it is logged once, not at every rescan. */
  actionErrors: Map<string, string>;
  /** Reports this disk's NodeDisks with a non-canonical name (./aliases.ts). */
  reportAliases(diskID: string, canonical: string): Promise<void>;
  /** This node's UID (./node-identity.ts); unknown, no NodeDisk is judged another machine's. */
  nodeUID?: string | undefined;
  /** Where sysfs lists the block devices (./loop-attached.ts; tests give a tree of their own). */
  sysBlockDir?: string | undefined;
  /** sysfs itself, for what the kernel counts of a disk's errors (./disk-health.ts; tests give a tree of their own). */
  sysRoot?: string | undefined;
  /** This boot's ID (api/staged-record.ts; tests give a file of their own). */
  bootIdFile?: string | undefined;
  /** Scans the drives again and returns this one as the kernel shows it now (undefined: gone). */
  lookAtDrive?: ((diskID: string) => Promise<DiskFile | undefined>) | undefined;
}

/** How a wipe waiting for a loop device to let the image go begins (what its report and log say). */
const WAITING_FOR_LOOP = 'waiting to wipe the disk image';

export interface ReconcileResult {
  /** The NodeDisk's deletion completed: reconcile the disk again, to rediscover it as a new, free NodeDisk. */
  again?: boolean;
}

/** Reconciles one disk; throws on an API failure (the caller retries with backoff). */
export async function reconcileDisk(ctx: ReconcileContext, diskID: string, discovery: Discovery): Promise<ReconcileResult> {
  const { nodeName, diskDir, hostDiskDir, client, cache, log, metrics } = ctx;
  const name = nodeDiskName(nodeName, diskID);
  let file = discovery.disks.get(diskID);
  const ignored = discovery.ignored.find((f) => diskIdFromFileName(f.name) === diskID);
  let nd = cache.get(name);
  // A drive's path is the by-id name it was found by; an image's follows from its diskID.
  const hostPath = isDriveId(diskID) ? (file?.hostPath ?? nd?.spec.path ?? '') : diskPath(hostDiskDir, diskID);

  // A file whose name makes a NodeDisk name another disk keeps: that disk reports it, nothing acts on it.
  if (!file && ignored?.collidesWith !== undefined) return {};
  await ctx.reportAliases(diskID, name);
  if (!nd) {
    if (!file) return {};
    nd = await createNodeDisk(ctx, diskID, name, hostPath, file);
  }
  if (nd.spec.nodeName !== nodeName || nd.spec.diskID !== diskID) {
    log.error('NodeDisk name collides with another disk; leaving it alone', { nodeDisk: name, diskID, existing: nd.spec });
    return {};
  }

  const otherMachine = ctx.nodeUID !== undefined && nd.status?.node?.nodeUID !== undefined && nd.status.node.nodeUID !== ctx.nodeUID ? nd.status.node.nodeUID : undefined;
  if (otherMachine !== undefined) {
    if ((nd.spec.desired?.state ?? 'Available') === 'Reserved') {
      const owner = nd.spec.desired?.owner ? `by ${nd.spec.desired.owner}` : 'with no owner';
      const why = `NodeDisk ${name} is reserved ${owner} on another machine named ${nodeName} (Node UID ${otherMachine}; this one is ${ctx.nodeUID}): its marker is not written here and this machine's ${diskID} is not reported until that reservation is released`;
      if (ctx.actionErrors.get(diskID) !== why) log.warn(why, { nodeDisk: name, diskID, otherNodeUID: otherMachine, nodeUID: ctx.nodeUID });
      ctx.actionErrors.set(diskID, why);
      return {};
    }
    // Not reserved: its finalizer guarded a marker on the other machine, which is gone with it.
    if (isProtected(nd)) {
      nd = await setProtection(ctx, nd, false);
      if (nd.metadata.deletionTimestamp !== undefined) {
        cache.forget(name);
        return { again: true };
      }
    }
    if (ctx.actionErrors.delete(diskID)) log.info("the other machine's reservation was released", { nodeDisk: name, diskID });
    log.info("NodeDisk of another machine of this name, not reserved: reported afresh as this machine's disk", { nodeDisk: name, diskID, otherNodeUID: otherMachine, nodeUID: ctx.nodeUID });
  }

  // Finalizer first, marker second; on release, (wipe,) marker, finalizer last (ADR 12, ADR 38).
  let desired = nd.spec.desired?.state ?? 'Available';
  if (desired !== 'Reserved' && ((file && pendingWipe(nd) !== undefined) || (await markerState(diskDir, diskID)).kind === 'present')) {
    // Removing a marker frees the disk, and a wipe destroys what is on it: decide both on a fresh read,
    // never on the cache alone, which may still hold a release the watch delivered late while the disk has
    // been reserved again since. The cost is one GET per release, not one per reconcile.
    nd = cache.storeOwnWrite(await client.get(name));
    desired = nd.spec.desired?.state ?? 'Available';
  }
  const deleting = nd.metadata.deletionTimestamp !== undefined;
  let actionError: string | undefined;
  if (desired === 'Reserved' && !isProtected(nd)) {
    if (deleting) actionError = `the NodeDisk is being deleted without finalizer ${FINALIZER}: no reservation marker is written for it`;
    else nd = await setProtection(ctx, nd, true);
  }
  // A wipe asked for with the release comes before the marker goes: until it is done the disk stays held on
  // the node, and an agent restarted half way finds the request still open and wipes again from the start.
  const wipe = desired !== 'Reserved' ? pendingWipe(nd) : undefined;
  let wipedNow: string | undefined;
  let waitingToWipe: string | undefined;
  if (file?.drive) {
    // The agent has no device access (ADR 10): the node side's privileged container wipes a drive, asked
    // through the disk dir (./wipe-drive.ts).
    try {
      if (wipe === undefined) await forgetDriveWipe(diskDir, diskID);
      else {
        const state = await wipeDriveStep(diskDir, diskID, wipe, file.drive, hostPath);
        if (state.kind === 'wiped') {
          wipedNow = wipe;
          // The scan this reconcile was given may have been taken while the node side was still wiping
          // (the answer is read here, after it): the partitions its holder made, which the wipe dropped,
          // would refuse the drive in the report that says it is wiped. It is looked at again.
          if (ctx.lookAtDrive) file = await ctx.lookAtDrive(diskID);
          metrics.wipes.inc({ result: 'wiped' });
          log.info('drive wiped', { nodeDisk: name, diskID, wipe, bytes: state.bytes, ms: state.ms, method: state.method });
        } else if (state.kind === 'waiting') waitingToWipe = state.message;
        else {
          if (ctx.actionErrors.get(diskID) !== state.message) metrics.wipes.inc({ result: 'failed' });
          actionError = state.message;
        }
      }
    } catch (err) {
      actionError = `cannot ask the node side to wipe drive ${hostPath} (wipe request ${wipe}): ${(err as Error).message}; it stays held until it is wiped`;
    }
  } else if (wipe !== undefined && file) {
    // Wiping is said once per request: a wipe that keeps failing stays the Error it was reported as,
    // tried again at each rescan without a write.
    const failedBefore = ctx.actionErrors.get(diskID)?.startsWith(`cannot wipe the disk image (wipe request ${wipe})`) === true;
    try {
      // An image still attached to a loop device is a volume still staged here: wiped now, what is mounted
      // from it would write its metadata back at unmount. It waits, phase Wiping, and is tried again at
      // each rescan; the report names the device, and is written once, not at every rescan.
      const loops = await loopDevicesHolding(diskDir, diskID, { sysBlock: ctx.sysBlockDir, bootIdFile: ctx.bootIdFile });
      if (loops.length > 0) {
        const held = loops.map((l) => `${l.device} (staged at ${l.stagingPath})`).join(', ');
        waitingToWipe = `${WAITING_FOR_LOOP} (wipe request ${wipe}): it is attached to loop device ${held}, a volume still staged on this node; it is wiped once that device is detached`;
      } else {
        if (!failedBefore) {
          nd = await report(ctx, nd, { ...withoutTime(nd.status?.node), phase: 'Wiping', capacityBytes: file.sizeBytes, message: `wiping the disk image (wipe request ${wipe})` });
        }
        await wipeImage(diskDir, diskID);
        wipedNow = wipe;
        metrics.wipes.inc({ result: 'wiped' });
        log.info('disk image wiped', { nodeDisk: name, diskID, wipe });
      }
    } catch (err) {
      if (isApiError(err)) throw err;
      metrics.wipes.inc({ result: 'failed' });
      actionError = `cannot wipe the disk image (wipe request ${wipe}): ${(err as Error).message}; it stays held until the wipe succeeds`;
    }
  }
  const wipeOpen = wipe !== undefined && wipedNow === undefined;
  if (!actionError && !wipeOpen && (file || desired !== 'Reserved')) {
    try {
      const replaced = (wrong: string) => log.warn('reservation marker put right', { nodeDisk: name, diskID, was: `it ${wrong}` });
      const changed = desired === 'Reserved' ? await ensureMarker(diskDir, diskID, { replaced }) : await removeMarker(diskDir, diskID);
      if (changed) {
        metrics.markerOps.inc({ op: desired === 'Reserved' ? 'create' : 'remove' });
        log.info(desired === 'Reserved' ? 'reservation marker written' : 'reservation marker removed', { nodeDisk: name, diskID });
      }
    } catch (err) {
      metrics.markerErrors.inc({ op: desired === 'Reserved' ? 'create' : 'remove' });
      actionError = `cannot ${desired === 'Reserved' ? 'write' : 'remove'} the reservation marker: ${(err as Error).message}`;
    }
  }
  const problemBefore = ctx.actionErrors.get(diskID);
  if (actionError) {
    // Logged once per new problem, not at every rescan; the NodeDisk's Error phase carries it meanwhile.
    if (problemBefore !== actionError) log.error(actionError, { nodeDisk: name, diskID });
    ctx.actionErrors.set(diskID, actionError);
  } else if (waitingToWipe) {
    // A wipe under way is news, not a problem: its progress is said as it changes, whole percents only.
    if (problemBefore !== waitingToWipe) {
      if (waitingToWipe.startsWith('wiping ')) log.info(waitingToWipe, { nodeDisk: name, diskID });
      else log.warn(waitingToWipe, { nodeDisk: name, diskID });
    }
    ctx.actionErrors.set(diskID, waitingToWipe);
  } else if (ctx.actionErrors.delete(diskID)) {
    log.info(problemBefore?.startsWith(WAITING_FOR_LOOP) ? 'the disk image is no longer attached to a loop device' : 'reservation marker problem resolved', { nodeDisk: name, diskID });
  }
  const onDisk = await markerState(diskDir, diskID);
  if (desired !== 'Reserved' && onDisk.kind === 'absent' && isProtected(nd)) {
    nd = await setProtection(ctx, nd, false);
    if (deleting) {
      // That completed its deletion: forget it, and rediscover the disk as a new, free NodeDisk.
      cache.forget(name);
      return { again: true };
    }
  }

  const marker = file ? onDisk : ({ kind: 'absent' } as const);
  let next = observedStatus({
    name,
    file,
    marker,
    actionError,
    hostPath,
    previousCapacity: nd.status?.node?.capacityBytes,
    owner: nd.spec.desired?.owner,
    deletionHeld: deleting && desired === 'Reserved' && isProtected(nd),
    held: desired === 'Reserved',
    previousDrive: nd.status?.node?.drive,
    rivals: discovery.ignored.filter((f) => f.collidesWith === diskID).map((f) => f.name),
  });
  if (!file && ignored) next = { ...next, phase: 'Error', message: `disk image ${hostPath} ${ignored.reason}` };
  if (waitingToWipe) next = { ...next, phase: 'Wiping', message: waitingToWipe };
  if (ctx.nodeUID !== undefined) next = { ...next, nodeUID: ctx.nodeUID };
  // What the kernel has seen go wrong on it; a failure stays until a person marks it checked (./disk-health.ts).
  const health = file
    ? judgeHealth({
        problems: await healthProblems(ctx, diskID, file, desired === 'Reserved' || wipe !== undefined),
        previous: nd.status?.node?.health,
        reviewedAt: reviewTime(nd),
        name,
        now: reportTime,
      })
    : nd.status?.node?.health;
  if (health) next = { ...next, health };
  // What the image may hold: a reservation's bytes from the moment it is reserved until a wipe (ADR 38),
  // and whatever was written to it that the agent never saw reserved (a reservation made and released
  // while it was down, an image renamed from a disk that held a volume): bytes allocated to the image.
  const wipedFor = wipedNow ?? nd.status?.node?.wipedFor;
  if (wipedFor !== undefined) next = { ...next, wipedFor };
  // A drive's bytes cannot be seen from here: one never wiped since it was found may hold anything.
  const written = file !== undefined && (file.drive !== undefined ? nd.status?.node?.wipedFor === undefined : (file.allocatedBytes ?? 0) > 0);
  if (wipedNow === undefined && (onDisk.kind === 'present' || nd.status?.node?.holdsData === true || written)) next = { ...next, holdsData: true };

  // Written only when the report changed: the node's heartbeat Lease says the agent is alive (ADR 24).
  if (!statusChanged(nd.status?.node, next)) return {};
  await report(ctx, nd, next);
  return {};
}

/**
 * What the kernel shows of the disk's errors; a disk whose staged records cannot be read shows none this time.
 * An image is looked at only while a volume may be staged from it (reserved, or released and not yet wiped):
 * the records are read for it, not for every free disk at every rescan.
 */
async function healthProblems(ctx: ReconcileContext, diskID: string, file: DiskFile, mayBeStaged: boolean): Promise<KernelProblem[]> {
  if (!file.drive && !mayBeStaged) return [];
  try {
    return await kernelProblems({ diskDir: ctx.diskDir, diskID, driveDevice: file.drive?.device, sysRoot: ctx.sysRoot ?? '/sys', bootIdFile: ctx.bootIdFile });
  } catch (err) {
    ctx.log.debug('cannot read what the kernel saw of the disk', { diskID, error: (err as Error).message });
    return [];
  }
}

/** When a person marked the disk's failure checked, in ms; undefined when never (or not a time). */
function reviewTime(nd: NodeDisk): number | undefined {
  const at = Date.parse(nd.metadata.annotations?.[ANNOTATION_HEALTH_REVIEWED] ?? '');
  return Number.isNaN(at) ? undefined : at;
}

/** status.node without its time: what a report is compared by. */
function withoutTime(node: NodeStatus | undefined): Omit<NodeStatus, 'lastSeenTime'> {
  const { lastSeenTime: _, ...rest } = node ?? {};
  return rest;
}

/** Writes the agent's report of one disk (status.node, all of it: the agent owns it whole). */
async function report(ctx: ReconcileContext, nd: NodeDisk, next: Omit<NodeStatus, 'lastSeenTime'>): Promise<NodeDisk> {
  const { client, cache, log, metrics } = ctx;
  const name = nd.metadata.name ?? '';
  const status: NodeStatus = { ...next, lastSeenTime: reportTime() };
  let stored: NodeDisk;
  try {
    const updated = await client.applyStatus({ apiVersion: API_VERSION, kind: KIND, metadata: { name }, status: { node: status } }, { fieldManager: FIELD_MANAGER.agent });
    stored = cache.storeOwnWrite(updated);
  } catch (err) {
    metrics.apiErrors.inc({ op: 'status' });
    throw err;
  }
  metrics.statusWrites.inc({ cause: 'change' });
  log.info('reported disk status', { nodeDisk: name, diskID: nd.spec.diskID, phase: status.phase, capacityBytes: status.capacityBytes });
  updatePhaseGauge(ctx);
  return stored;
}

/**
 * Creates the NodeDisk of a disk file. A reservation marker already beside the file, with no NodeDisk,
 * is a reservation whose NodeDisk was deleted past its finalizer (removed by hand, or the CRD deleted and
 * reinstalled): the NodeDisk is created reserved for RECOVERED_OWNER, with its finalizer, rather than as a
 * free disk whose marker would then be removed (ADR 12).
 */
async function createNodeDisk(ctx: ReconcileContext, diskID: string, name: string, hostPath: string, disk: DiskFile): Promise<NodeDisk> {
  const { sizeBytes } = disk;
  const { nodeName, diskDir, client, cache, log, metrics } = ctx;
  const recovered = (await markerState(diskDir, diskID)).kind === 'present';
  let nd: NodeDisk;
  try {
    nd = await client.create(
      {
        apiVersion: API_VERSION,
        kind: KIND,
        metadata: {
          name,
          labels: { [LABEL_NODE]: labelValue(nodeName), [LABEL_DISK]: labelValue(diskID), ...(disk.drive ? { [LABEL_MEDIA]: disk.drive.facts.media } : {}) },
          ...(recovered ? { finalizers: [FINALIZER] } : {}),
        },
        spec: { nodeName, diskID, path: hostPath, ...(recovered ? { desired: { state: 'Reserved', owner: RECOVERED_OWNER } } : {}) },
      },
      { fieldManager: FIELD_MANAGER.agent },
    );
    metrics.creates.inc();
    if (recovered) log.warn('reservation marker found with no NodeDisk; re-created it reserved', { nodeDisk: name, diskID, owner: RECOVERED_OWNER });
    else log.info('discovered disk', { nodeDisk: name, diskID, path: hostPath, sizeBytes });
  } catch (err) {
    if (!isApiError(err, 409)) {
      metrics.apiErrors.inc({ op: 'create' });
      throw err;
    }
    nd = await client.get(name); // created by an earlier run of ours: carry on with it
  }
  // Stored unless the watch already delivered a newer one: the cache never goes back in time.
  return cache.storeOwnWrite(nd);
}

/** Adds or removes the agent's finalizer; a stale resourceVersion (409) is retried once from a fresh read. */
async function setProtection(ctx: ReconcileContext, nd: NodeDisk, on: boolean): Promise<NodeDisk> {
  const { client, cache, log, metrics } = ctx;
  const patch = (x: NodeDisk) => (on ? addProtection(client, x) : removeProtection(client, x));
  let updated: NodeDisk;
  try {
    try {
      updated = await patch(nd);
    } catch (err) {
      if (!isApiError(err, 409)) throw err;
      const fresh = await client.get(nd.metadata.name ?? '');
      // Nothing to do if it is already so, or if a reservation came back meanwhile (keep the finalizer).
      const settled = isProtected(fresh) === on || (!on && fresh.spec.desired?.state === 'Reserved');
      updated = settled ? fresh : await patch(fresh);
    }
  } catch (err) {
    metrics.apiErrors.inc({ op: 'finalizer' });
    throw err;
  }
  log.info(on ? 'reservation protection added' : 'reservation protection removed', { nodeDisk: nd.metadata.name, finalizer: FINALIZER });
  return cache.storeOwnWrite(updated);
}

function updatePhaseGauge(ctx: ReconcileContext): void {
  const counts = new Map<string, number>();
  let failingNow = 0;
  for (const nd of ctx.cache.values()) {
    const p = nd.status?.node?.phase ?? 'Unknown';
    counts.set(p, (counts.get(p) ?? 0) + 1);
    if (failing(nd)) failingNow++;
  }
  ctx.metrics.failingDisks.set(failingNow);
  ctx.metrics.disks.reset();
  for (const [phase, n] of counts) ctx.metrics.disks.set({ phase }, n);
}

/** status.node.lastSeenTime: now, to the second. */
export function reportTime(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}
