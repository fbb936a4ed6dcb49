// The records the benchmarks append, one JSON line per run, to bench/results/<bench>.jsonl: their shape and
// their reader. Here, not in bench/, because the docs generator (hack/docs/plots.ts) draws the plots from
// them and hack/ does not import bench/; the benchmarks write them through bench/lib/results.ts.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export type FigureValue = number | string | boolean | null | FigureValue[] | { [key: string]: FigureValue };
export type Figures = { [key: string]: FigureValue };

export interface BenchRecord {
  bench: string;
  at: string;
  commit: string;
  machine: { cpus: number; model: string; memGiB: number; node: string };
  /** 1-minute load average before and after the run. */
  load: { before: number; after: number };
  params: Record<string, string | number | boolean>;
  figures: Figures;
}

/** Where the committed records are, relative to the repository root. */
export const RESULTS_DIR = 'bench/results';

/** Every record of one benchmark in `dir`, oldest first; none when it has no file there. */
export function readRecordsIn(dir: string, bench: string): BenchRecord[] {
  let text: string;
  try {
    text = readFileSync(join(dir, `${bench}.jsonl`), 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line, i) => {
      try {
        return JSON.parse(line) as BenchRecord;
      } catch (err) {
        throw new Error(`${join(dir, `${bench}.jsonl`)} line ${i + 1} is not JSON (${(err as Error).message}); fix or remove that line`);
      }
    });
}
