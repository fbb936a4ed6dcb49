// Ages as kubectl prints them, and sizes in IEC units. Tables: ./tabwriter.ts.

/** kubectl's HumanDuration: 45s, 3m20s, 42m, 5h10m, 30h, 3d4h, 20d, 2y… */
export function age(since: string | undefined, now = Date.now()): string {
  if (!since) return '<unknown>';
  const s = Math.max(0, Math.floor((now - Date.parse(since)) / 1000));
  if (s < 60 * 2) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return s % 60 === 0 ? `${m}m` : `${m}m${s % 60}s`;
  if (m < 60 * 3) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 8) return m % 60 === 0 ? `${h}h` : `${h}h${m % 60}m`;
  if (h < 48) return `${h}h`;
  const d = Math.floor(h / 24);
  if (h < 24 * 8) return h % 24 === 0 ? `${d}d` : `${d}d${h % 24}h`;
  if (d < 365 * 2) return `${d}d`;
  return `${Math.floor(d / 365)}y`;
}

const UNITS = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'];

/** 67108864 → "64Mi"; 1610612736 → "1.5Gi". */
export function iec(bytes: number | undefined): string {
  if (bytes === undefined || !Number.isFinite(bytes)) return '<unknown>';
  let v = bytes;
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  const text = Number.isInteger(v) ? String(v) : v.toFixed(1).replace(/\.0$/, '');
  return `${text}${UNITS[u]}`;
}
