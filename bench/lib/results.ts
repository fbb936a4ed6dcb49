// Each benchmark run appends one JSON record to bench/results/<bench>.jsonl, next to the table it prints:
// the plots in docs/benchmarks.md are drawn from these records, so a figure in a picture is always one a
// command printed, with the machine and the load it was measured under. Runs meant for the docs are
// committed; `BENCH_RESULTS_DIR=<dir>` keeps a run out of the repository.
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { type BenchRecord, type Figures, RESULTS_DIR } from '../../hack/lib/bench-records.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';

export type { BenchRecord, FigureValue, Figures } from '../../hack/lib/bench-records.ts';

/** The directory records go to: `BENCH_RESULTS_DIR`, else bench/results in the checkout. */
export function resultsDir(): string {
  return process.env.BENCH_RESULTS_DIR || join(REPO_ROOT, RESULTS_DIR);
}

function commit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

/** Starts a record: call at the start of a run (for the load before), then `save` with the figures. */
export function startRecord(bench: string, params: BenchRecord['params']) {
  const before = loadavg()[0] ?? 0;
  return {
    save(figures: Figures): BenchRecord {
      const record: BenchRecord = {
        bench,
        at: new Date().toISOString(),
        commit: commit(),
        machine: { cpus: cpus().length, model: cpus()[0]?.model ?? 'unknown', memGiB: Math.round(totalmem() / 2 ** 30), node: process.version },
        load: { before: Number(before.toFixed(2)), after: Number((loadavg()[0] ?? 0).toFixed(2)) },
        params,
        figures,
      };
      const dir = resultsDir();
      mkdirSync(dir, { recursive: true });
      appendFileSync(join(dir, `${bench}.jsonl`), `${JSON.stringify(record)}\n`);
      console.log(`recorded in ${join(dir, `${bench}.jsonl`)}`);
      return record;
    },
  };
}
