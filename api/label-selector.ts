// Label selectors as Kubernetes writes them: parsed from kubectl's text (`-l`, a StorageClass parameter),
// matched against a NodeDisk's labels, and written back in that text for messages. One home, for the
// plugin, the controller's claims and the CSI driver's classes.
import type { LabelSelector, LabelSelectorRequirement } from './v1alpha1/claim-types.ts';

const KEY = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

/** Splits at commas outside parentheses: `a in (x,y),b` is two requirements. */
function requirements(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      out.push(text.slice(start, i));
      start = i + 1;
    }
  }
  out.push(text.slice(start));
  return out.map((r) => r.trim());
}

/**
 * A label selector as kubectl takes it (`-l a=b,c!=d,e in (x,y),f notin (z),g,!h`), as the
 * metav1.LabelSelector a claim's spec holds: equalities become matchLabels, the rest matchExpressions
 * (`!=` is NotIn of one value, as the API server reads it).
 */
export function labelSelectorOf(text: string): LabelSelector {
  const bad = (why: string) => new Error(why);
  const matchLabels: Record<string, string> = {};
  const matchExpressions: LabelSelectorRequirement[] = [];
  if (text.trim() === '') throw bad('empty selector');
  for (const req of requirements(text)) {
    const key = (k: string) => {
      if (!KEY.test(k)) throw bad(`invalid label key ${JSON.stringify(k)}`);
      return k;
    };
    const value = (v: string) => {
      if (!VALUE.test(v)) throw bad(`invalid label value ${JSON.stringify(v)}`);
      return v;
    };
    let m: RegExpMatchArray | null;
    if ((m = req.match(/^(\S+?)\s+(in|notin)\s*\(([^()]*)\)$/))) {
      const values = m[3]!.split(',').map((v) => value(v.trim()));
      matchExpressions.push({ key: key(m[1]!), operator: m[2] === 'in' ? 'In' : 'NotIn', values });
    } else if ((m = req.match(/^([^=!\s]+)\s*!=\s*(\S*)$/))) {
      matchExpressions.push({ key: key(m[1]!), operator: 'NotIn', values: [value(m[2]!)] });
    } else if ((m = req.match(/^([^=!\s]+)\s*==?\s*(\S*)$/))) {
      const k = key(m[1]!);
      if (k in matchLabels && matchLabels[k] !== m[2]) throw bad(`${k} is required to equal two values`);
      matchLabels[k] = value(m[2]!);
    } else if ((m = req.match(/^!\s*(\S+)$/))) {
      matchExpressions.push({ key: key(m[1]!), operator: 'DoesNotExist' });
    } else if ((m = req.match(/^(\S+)$/))) {
      matchExpressions.push({ key: key(m[1]!), operator: 'Exists' });
    } else {
      throw bad(`cannot read ${JSON.stringify(req)} (expected key=value, key!=value, key in (a,b), key notin (a,b), key or !key)`);
    }
  }
  return { ...(Object.keys(matchLabels).length ? { matchLabels } : {}), ...(matchExpressions.length ? { matchExpressions } : {}) };
}

/** Whether `labels` satisfy a metav1.LabelSelector (all of matchLabels and matchExpressions). */
export function matchesSelector(selector: LabelSelector | undefined, labels: Record<string, string> | undefined): boolean {
  if (!selector) return true;
  const l = labels ?? {};
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (l[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(l, e.key);
    const values = e.values ?? [];
    if (e.operator === 'In' && !(has && values.includes(l[e.key]!))) return false;
    if (e.operator === 'NotIn' && has && values.includes(l[e.key]!)) return false;
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
  }
  return true;
}

/** A label selector as kubectl writes one: `a=b,c in (x,y),!d`. */
export function selectorWords(s: LabelSelector): string {
  const labels = Object.entries(s.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  const exprs = (s.matchExpressions ?? []).map((e) =>
    e.operator === 'Exists' ? e.key : e.operator === 'DoesNotExist' ? `!${e.key}` : `${e.key} ${e.operator === 'In' ? 'in' : 'notin'} (${(e.values ?? []).join(',')})`,
  );
  return [...labels, ...exprs].join(',');
}
