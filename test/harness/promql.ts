// What the alert and dashboard tests ask of a PromQL expression: the metric names it reads, and whether
// each is one the agent, the controller or the CSI driver exports (so a typo'd metric fails in npm test,
// before any Prometheus runs the query).
import { agentMetrics } from '../../agent/metrics.ts';
import { controllerMetrics } from '../../controller/metrics.ts';
import { csiMetrics } from '../../csi/metrics.ts';

const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan']);

/** The metric names a PromQL expression reads: identifiers that are not functions, keywords, label names or values. */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""') // strings
    .replace(/\{[^}]*\}/g, '') // label matchers
    .replace(/\[[^\]]*\]/g, '') // ranges
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ''); // label lists
  return [...bare.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)].filter(([name, , call]) => !call && !KEYWORDS.has(name!.toLowerCase())).map(([name]) => name!);
}

/** Every metric name the agent, the controller and the CSI driver export, a histogram's _bucket, _sum and _count included. */
export async function exportedMetricNames(): Promise<Set<string>> {
  const names = new Set<string>();
  for (const { registry } of [agentMetrics(), controllerMetrics(() => true), csiMetrics()]) {
    for (const f of await registry.getMetricsAsJSON()) {
      names.add(f.name);
      if (String(f.type) === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(f.name + s);
    }
  }
  return names;
}
