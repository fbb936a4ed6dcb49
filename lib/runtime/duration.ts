// Go-style durations for flags: "300ms", "30s", "5m", "1h", "1m30s".
const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

export function parseDuration(input: string, flag = 'duration'): number {
  const s = input.trim();
  if (/^\d+$/.test(s)) throw new Error(`${flag} ${JSON.stringify(input)} needs a unit: for example 30s, 5m or 500ms`);
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/gy;
  let total = 0;
  let matched = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(s)) !== null) {
    total += Number(m[1]) * (UNITS[m[2] ?? ''] ?? 0);
    matched = re.lastIndex;
  }
  if (s === '' || matched !== s.length) throw new Error(`invalid ${flag} ${JSON.stringify(input)}: use for example 30s, 5m or 500ms`);
  return total;
}
