// The storage suites' outcome for our driver, from ginkgo's JSON report (--ginkgo.json-report): how many
// specs passed, failed and were skipped, and why each was skipped, grouped by the reason's words.
import { readFileSync } from 'node:fs';
import { DRIVER, FOCUS, SKIPS } from './selection.ts';

interface SpecReport {
  ContainerHierarchyTexts: string[] | null;
  LeafNodeText: string;
  LeafNodeType: string;
  LeafNodeLabels?: string[] | null;
  State: string;
  RunTime: number;
  Failure?: { Message?: string; Location?: { FileName?: string; LineNumber?: number } };
}

export interface Summary {
  passed: number;
  failed: number;
  skipped: number;
  /** Spec texts that failed, with the first line of their failure (its first 300 characters). */
  failures: { spec: string; message: string }[];
  /** Reason → how many specs it skipped. Our own skips read "skipped here: <reason>". */
  skipReasons: Record<string, number>;
  /** The run's wall time of the specs that ran, in seconds. */
  specSeconds: number;
}

const text = (s: SpecReport) => [...(s.ContainerHierarchyTexts ?? []), s.LeafNodeText].join(' ');

/** A skip message made general: the same reason for two patterns reads the same. */
function reasonOf(message: string): string {
  const first = message.split('\n')[0]?.trim() ?? '';
  return first.replace(/\s+/g, ' ') || '(no message)';
}

/**
 * `focus` is the run's --ginkgo.focus: the report lists every spec of the binary, and only those it
 * selects count (ginkgo's patterns here are ones JavaScript reads alike).
 */
export function summarize(reports: { SpecReports?: SpecReport[] | null }[], focus = FOCUS): Summary {
  const out: Summary = { passed: 0, failed: 0, skipped: 0, failures: [], skipReasons: {}, specSeconds: 0 };
  const ours = SKIPS.map((s) => ({ re: new RegExp(s.pattern), reason: `skipped here: ${s.reason}` }));
  const selected = new RegExp(focus);
  for (const r of reports) {
    for (const s of r.SpecReports ?? []) {
      if (s.LeafNodeType !== 'It') {
        // The suite's own set-up and tear-down (SynchronizedBeforeSuite and the like) belong to no spec:
        // their failure fails the run, though every spec then reads skipped.
        if (!['passed', 'skipped', 'pending'].includes(s.State)) failure(out, `[${s.LeafNodeType}]`, s);
        continue;
      }
      const name = text(s);
      if (!name.includes(`[Driver: ${DRIVER}]`) || !selected.test(name)) continue;
      out.specSeconds += s.RunTime / 1e9;
      if (s.State === 'passed') out.passed++;
      else if (s.State === 'skipped' || s.State === 'pending') {
        out.skipped++;
        const reason = ours.find((o) => o.re.test(name))?.reason ?? reasonOf(s.Failure?.Message ?? '');
        out.skipReasons[reason] = (out.skipReasons[reason] ?? 0) + 1;
      } else failure(out, name, s);
    }
  }
  out.specSeconds = Math.round(out.specSeconds);
  return out;
}

function failure(out: Summary, spec: string, s: SpecReport): void {
  out.failed++;
  // The first line, cut short: a failed write quotes its whole command, data and all.
  const why = reasonOf(s.Failure?.Message ?? '');
  out.failures.push({ spec, message: `${s.State}: ${why.length > 300 ? `${why.slice(0, 300)}…` : why}` });
}

export function readSummary(file: string, focus = FOCUS): Summary {
  return summarize(JSON.parse(readFileSync(file, 'utf8')) as { SpecReports?: SpecReport[] }[], focus);
}

/** The summary as a person reads it. */
export function formatSummary(s: Summary): string {
  const lines = [`${s.passed} passed, ${s.failed} failed, ${s.skipped} skipped (specs ran for ${s.specSeconds} s)`];
  for (const f of s.failures) lines.push(`FAILED ${f.spec}\n  ${f.message}`);
  lines.push('skipped, by reason:');
  for (const [reason, n] of Object.entries(s.skipReasons).sort((a, b) => b[1] - a[1])) lines.push(`  ${String(n).padStart(4)}  ${reason}`);
  return lines.join('\n');
}
