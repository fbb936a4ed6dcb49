// Histograms as the benches read them from /metrics text: the CSI driver's calls
// (nodedisks_csi_operations_seconds), or the API server's queue wait by priority level. One round's
// share is the difference of two scrapes (summed over the scraped pods), and a quantile is estimated from
// the buckets the way PromQL's histogram_quantile does (linear within the bucket the rank falls in).

const METRIC = 'nodedisks_csi_operations_seconds';

export interface CallBuckets {
  /** Cumulative counts by upper bound, in increasing order; the last is +Inf. */
  buckets: Array<[le: number, count: number]>;
  count: number;
  sum: number;
}

/** Calls by `method code` (e.g. `CreateVolume OK`), the method's short name. */
export type CallHistograms = Map<string, CallBuckets>;

function labelsOf(text: string): Map<string, string> {
  return new Map([...text.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1]!, m[2]!]));
}

/** Every series of histogram `metric` in /metrics text, keyed by `keyOf` its labels (series of one key add up). */
export function parseHistograms(text: string, metric: string, keyOf: (labels: Map<string, string>) => string): CallHistograms {
  const line = new RegExp(`^${metric}_(bucket|sum|count)\\{([^}]*)\\} (\\S+)$`);
  const out: CallHistograms = new Map();
  for (const l of text.split('\n')) {
    const m = line.exec(l);
    if (!m) continue;
    const labels = labelsOf(m[2]!);
    const key = keyOf(labels);
    const h = out.get(key) ?? { buckets: [], count: 0, sum: 0 };
    out.set(key, h);
    const value = Number(m[3]);
    if (m[1] === 'bucket') {
      const le = labels.get('le');
      const bound = le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le);
      const same = h.buckets.find(([b]) => b === bound);
      if (same) same[1] += value;
      else h.buckets.push([bound, value]);
    } else if (m[1] === 'sum') h.sum += value;
    else h.count += value;
  }
  for (const h of out.values()) h.buckets.sort((a, b) => a[0] - b[0]);
  return out;
}

export function parseCallHistograms(text: string): CallHistograms {
  return parseHistograms(text, METRIC, (labels) => `${(labels.get('method_name') ?? '').split('/').pop()} ${labels.get('grpc_status_code') ?? ''}`);
}

/** after − before, per key and bucket; and several pods' histograms summed (the same buckets). */
export function combine(parts: Array<{ after: CallHistograms; before?: CallHistograms }>): CallHistograms {
  const out: CallHistograms = new Map();
  for (const { after, before } of parts) {
    for (const [key, a] of after) {
      const b = before?.get(key);
      const total = out.get(key) ?? { buckets: a.buckets.map(([le]) => [le, 0] as [number, number]), count: 0, sum: 0 };
      out.set(key, total);
      a.buckets.forEach(([, c], i) => {
        total.buckets[i]![1] += c - (b?.buckets[i]?.[1] ?? 0);
      });
      total.count += a.count - (b?.count ?? 0);
      total.sum += a.sum - (b?.sum ?? 0);
    }
  }
  for (const [key, h] of out) if (h.count === 0) out.delete(key);
  return out;
}

/** The q-quantile (0..1) in seconds, as histogram_quantile estimates it; undefined with no calls. */
export function quantileOf(h: CallBuckets, q: number): number | undefined {
  const total = h.buckets.at(-1)?.[1] ?? 0;
  if (total === 0) return undefined;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const [le, count] of h.buckets) {
    if (count >= rank) {
      // In the +Inf bucket the estimate is the highest finite bound, as PromQL answers.
      if (le === Number.POSITIVE_INFINITY) return prevLe;
      return prevLe + ((le - prevLe) * (rank - prevCount)) / (count - prevCount || 1);
    }
    prevLe = le;
    prevCount = count;
  }
  return prevLe;
}

/** Calls that took longer than `seconds` (a bucket bound), from the buckets. */
export function slowerThan(h: CallBuckets, seconds: number): number {
  const within = h.buckets.find(([le]) => le === seconds)?.[1];
  return within === undefined ? Number.NaN : h.count - within;
}
