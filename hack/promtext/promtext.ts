// Parses a /metrics text with Prometheus' own parser and lints it with promlint (main.go beside this
// file): the Go program is built once from the pinned go.mod/go.sum into the cache, like the health-check
// runner.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ensureGoTool } from '../lib/gobuild.ts';

const moduleDir = fileURLToPath(new URL('.', import.meta.url));

export interface ParsedMetric {
  labels: Record<string, string>;
  /** Counter or gauge value as Go writes it ("NaN", "+Inf", "1e-07"). */
  value?: string;
  buckets?: { le: string; count: number }[];
  sum?: string;
  count?: number;
}

export interface ParsedFamily {
  name: string;
  help: string;
  /** COUNTER, GAUGE, HISTOGRAM, ... */
  type: string;
  metrics: ParsedMetric[];
}

export interface Parsed {
  /** The parser's error: the text is not valid exposition format. */
  error?: string;
  families: ParsedFamily[];
  problems: { metric: string; text: string }[];
}

/** The path of nodedisks-promtext, built first if the cache does not have it. */
export function ensurePromtext(log?: (line: string) => void): Promise<string> {
  return ensureGoTool({ name: 'promtext', what: "Prometheus' text parser and promlint (github.com/prometheus/common/expfmt, client_golang)", moduleDir, ...(log ? { log } : {}) });
}

export async function parseExposition(bin: string, text: string): Promise<Parsed> {
  const stdout = await new Promise<string>((resolve, reject) => {
    const child = execFile(bin, [], { maxBuffer: 16 * 1024 * 1024, timeout: 60_000 }, (err, out, stderr) => {
      if (err) reject(new Error(`${bin} failed: ${stderr.trim() || err.message}`));
      else resolve(out);
    });
    child.stdin?.end(text);
  });
  return JSON.parse(stdout) as Parsed;
}

/** A value as Go wrote it, as a number ("+Inf" is not a JavaScript number literal). */
export function goFloat(s: string | undefined): number {
  if (s === undefined) return 0;
  if (s === '+Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  return Number(s);
}
