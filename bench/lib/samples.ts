// The summary every timing benchmark prints: wall and CPU medians and p90s of its samples.

export interface TimedSample {
  wallMs: number;
  cpuMs: number;
}

/** The q-quantile as every bench takes it: the sorted sample at index ⌊q·n⌋ (0.5: the median, the upper one of an even count). */
export const quantile = (xs: number[], q: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))] ?? Number.NaN;

export function timingSummary(s: TimedSample[]) {
  const wall = s.map((x) => x.wallMs);
  const cpu = s.map((x) => x.cpuMs);
  return {
    wallMs: quantile(wall, 0.5),
    wallP90: quantile(wall, 0.9),
    cpuMs: quantile(cpu, 0.5),
    cpuP90: quantile(cpu, 0.9),
    // The mean of values in 10 ms steps resolves differences the median of them cannot.
    cpuMean: s.reduce((n, x) => n + x.cpuMs, 0) / s.length,
  };
}
