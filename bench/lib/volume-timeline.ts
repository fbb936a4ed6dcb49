// Where a PVC-backed pod's time goes, per volume: the API objects' changes as watches saw them (each line
// stamped when it arrived) and the kubelets' own log lines for the volume operations (klog's timestamps).
// bench/csi-pods.ts joins them into the steps below; the medians and p95s are the breakdown it records.
import { quantile } from './samples.ts';

/** Times (ms since the epoch) at which the kubelet logged each volume operation, by PV name. */
export interface KubeletVolumeTimes {
  mountStarted?: number;
  /** NodeStageVolume done (MountDevice). */
  staged?: number;
  /** NodePublishVolume done (SetUp). */
  published?: number;
  unmountStarted?: number;
  /** NodeUnpublishVolume done (TearDown). */
  unpublished?: number;
  /** NodeUnstageVolume done (UnmountDevice). */
  unstaged?: number;
}

const KLOG = /^[IWE](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6})\s/;
const PV = /pvc-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;

const STEPS: [keyof KubeletVolumeTimes, RegExp][] = [
  ['mountStarted', /operationExecutor\.MountVolume started for volume/],
  ['staged', /MountVolume\.MountDevice succeeded for volume/],
  ['published', /MountVolume\.SetUp succeeded for volume/],
  ['unmountStarted', /operationExecutor\.UnmountVolume started for volume/],
  ['unpublished', /UnmountVolume\.TearDown succeeded for volume/],
  ['unstaged', /UnmountDevice succeeded for volume/],
];

/** A klog line's time, ms since the epoch (klog's local time; this machine runs in UTC). */
function klogTime(line: string, year: number): number | undefined {
  const t = KLOG.exec(line);
  if (!t) return undefined;
  const [, mo, d, h, mi, s, us] = t.map(Number) as number[];
  return Date.UTC(year, mo! - 1, d, h, mi, s) + Math.floor(us! / 1000);
}

/** The first time each step was logged for each PV in a kubelet's log (klog's local time; this machine runs in UTC). */
export function kubeletVolumeTimes(log: string, year: number, into = new Map<string, KubeletVolumeTimes>()): Map<string, KubeletVolumeTimes> {
  for (const line of log.split('\n')) {
    const step = STEPS.find(([, re]) => re.test(line));
    if (!step) continue;
    const at = klogTime(line, year);
    const pv = PV.exec(line)?.[0];
    if (at === undefined || !pv) continue;
    const times = into.get(pv) ?? {};
    if (times[step[0]] === undefined) times[step[0]] = at;
    into.set(pv, times);
  }
  return into;
}

const POD_UNMOUNT = /operationExecutor\.UnmountVolume started for volume .* pod \\?"([0-9a-f-]{36})\\?"/;

/**
 * The first time a kubelet logged that it started to unmount any volume of each pod, by pod UID: the end of
 * the pod's own teardown (its containers stopped), for emptyDir and PVC pods alike.
 */
export function podUnmountStarts(log: string, year: number, into = new Map<string, number>()): Map<string, number> {
  for (const line of log.split('\n')) {
    const uid = POD_UNMOUNT.exec(line)?.[1];
    const at = uid && !into.has(uid) ? klogTime(line, year) : undefined;
    if (uid && at !== undefined) into.set(uid, at);
  }
  return into;
}

/** One step of the breakdown: the time between two events of each volume, summarised. */
export type Step = {
  step: string;
  n: number;
  p50Ms: number;
  p95Ms: number;
};

/** The step between two events, over every volume that has both. */
export function step(name: string, from: (number | undefined)[], to: (number | undefined)[]): Step {
  const d: number[] = [];
  for (const [i, a] of from.entries()) {
    const b = to[i];
    if (a !== undefined && b !== undefined) d.push(b - a);
  }
  return { step: name, n: d.length, p50Ms: quantile(d, 0.5), p95Ms: quantile(d, 0.95) };
}
