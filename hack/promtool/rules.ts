// The shipped alerts as the scrape tests load them into a real Prometheus: the PrometheusRule's groups
// (the one source: the install ships it, the chart copies it), each `for:` shortened so an alert fires
// within seconds of its condition. That `for:` holds an alert back is promtool's part
// (test/unit/alerts.test.ts); the scrape tests are about the expressions against what the programs export.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { load } from 'js-yaml';
import { REPO_ROOT } from '../lib/paths.ts';

export const RULE_FILE = join(REPO_ROOT, 'kustomize/components/prometheus-operator/prometheusrule.yaml');
/** What every `for:` (5 to 15 min in the shipped rules, so a blip does not page) becomes in the scrape tests. */
export const SHORT_FOR = '2s';

export interface Rule {
  alert?: string;
  expr: string;
  for?: string;
}
export interface RuleGroup {
  name: string;
  rules: Rule[];
}

/** The shipped rule groups, as written. */
export function shippedRuleGroups(): RuleGroup[] {
  return (load(readFileSync(RULE_FILE, 'utf8')) as { spec: { groups: RuleGroup[] } }).spec.groups;
}

/** The groups with every `for:` replaced by `forDuration`; nothing else changes. */
export function withShortFor(groups: RuleGroup[], forDuration = SHORT_FOR): RuleGroup[] {
  return groups.map((g) => ({ ...g, rules: g.rules.map((r) => (r.for === undefined ? r : { ...r, for: forDuration })) }));
}
