// Lists the vector selectors of PromQL expressions with Prometheus' own parser (main.go beside this file,
// github.com/prometheus/prometheus/promql/parser): the Go program is built once from the pinned
// go.mod/go.sum into the cache, like the text parser in hack/promtext. It builds only promql/parser and
// what that imports, not the server.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ensureGoTool } from '../lib/gobuild.ts';

const moduleDir = fileURLToPath(new URL('.', import.meta.url));

export interface ParsedExpr {
  expr: string;
  /** The parser's error: the expression is not valid PromQL. */
  error?: string;
  /** Each distinct vector selector the expression reads, as PromQL (name and matchers, no range, offset or @). */
  selectors: string[];
  /** The label names it groups or matches by (`by (…)`, `on (…)`; not `without` or `ignoring`). */
  labels: string[];
}

/** The path of nodedisks-promql, built first if the cache does not have it. */
export function ensurePromql(log?: (line: string) => void): Promise<string> {
  return ensureGoTool({ name: 'promql', what: "Prometheus' PromQL parser (github.com/prometheus/prometheus/promql/parser)", moduleDir, ...(log ? { log } : {}) });
}

/** Parses each expression; the answers come back in the same order. */
export async function vectorSelectors(bin: string, exprs: string[]): Promise<ParsedExpr[]> {
  const stdout = await new Promise<string>((resolve, reject) => {
    const child = execFile(bin, [], { maxBuffer: 16 * 1024 * 1024, timeout: 60_000 }, (err, out, stderr) => {
      if (err) reject(new Error(`${bin} failed: ${stderr.trim() || err.message}`));
      else resolve(out);
    });
    child.stdin?.end(exprs.map((e) => `${JSON.stringify(e)}\n`).join(''));
  });
  const parsed = stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as ParsedExpr);
  if (parsed.length !== exprs.length) throw new Error(`${bin} answered ${parsed.length} lines for ${exprs.length} expressions`);
  return parsed;
}
