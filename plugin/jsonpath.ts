// kubectl's JSONPath templates (-o jsonpath=…), the parts people use: text, {.a.b}, {.items[*].x},
// [n], [*], [?(@.k=="v")] filters, {range …}{end}, and \n \t escapes. Several results are joined by a space.

type Step = { kind: 'field'; name: string } | { kind: 'index'; i: number } | { kind: 'all' } | { kind: 'filter'; path: string[]; op: '==' | '!='; value: string };

function parsePath(expr: string): Step[] {
  const steps: Step[] = [];
  let s = expr.trim();
  if (s === '.' || s === '@' || s === '$') return steps;
  if (s.startsWith('$')) s = s.slice(1);
  const re = /\.([A-Za-z0-9_\-/]+)|\[(\*|\d+)\]|\[\?\(@((?:\.[A-Za-z0-9_\-]+)+)\s*(==|!=)\s*(?:"([^"]*)"|'([^']*)'|([^)\]]+))\)\]|\['([^']+)'\]/y;
  let m: RegExpExecArray | null;
  let pos = 0;
  while (pos < s.length && (re.lastIndex = pos, (m = re.exec(s)))) {
    if (m[1] !== undefined) steps.push({ kind: 'field', name: m[1] });
    else if (m[2] === '*') steps.push({ kind: 'all' });
    else if (m[2] !== undefined) steps.push({ kind: 'index', i: Number(m[2]) });
    else if (m[3] !== undefined) steps.push({ kind: 'filter', path: m[3].slice(1).split('.'), op: m[4] as '==' | '!=', value: m[5] ?? m[6] ?? (m[7] ?? '').trim() });
    else if (m[8] !== undefined) steps.push({ kind: 'field', name: m[8] });
    pos = re.lastIndex;
  }
  if (pos !== s.length) throw new Error(`unsupported JSONPath expression {${expr}} at "${s.slice(pos)}"`);
  return steps;
}

function evaluate(root: unknown, steps: Step[]): unknown[] {
  let cur: unknown[] = [root];
  for (const step of steps) {
    const next: unknown[] = [];
    for (const v of cur) {
      if (step.kind === 'field') {
        if (v && typeof v === 'object' && !Array.isArray(v) && step.name in v) next.push((v as Record<string, unknown>)[step.name]);
      } else if (step.kind === 'index') {
        if (Array.isArray(v) && step.i < v.length) next.push(v[step.i]);
      } else if (step.kind === 'all') {
        if (Array.isArray(v)) next.push(...v);
        else if (v && typeof v === 'object') next.push(...Object.values(v));
      } else if (Array.isArray(v)) {
        for (const item of v) {
          const got = evaluate(item, step.path.map((name) => ({ kind: 'field', name }) as Step))[0];
          const str = got === undefined ? undefined : typeof got === 'string' ? got : JSON.stringify(got);
          if ((step.op === '==') === (str === step.value)) next.push(item);
        }
      }
    }
    cur = next;
  }
  return cur;
}

const show = (v: unknown) => (typeof v === 'string' ? v : v === undefined ? '' : JSON.stringify(v));

type Node = { kind: 'text'; text: string } | { kind: 'expr'; steps: Step[] } | { kind: 'range'; steps: Step[]; body: Node[] };

function parseTemplate(template: string): Node[] {
  const tokens: { text?: string; expr?: string }[] = [];
  let i = 0;
  while (i < template.length) {
    const open = template.indexOf('{', i);
    if (open < 0) {
      tokens.push({ text: template.slice(i) });
      break;
    }
    if (open > i) tokens.push({ text: template.slice(i, open) });
    const close = template.indexOf('}', open);
    if (close < 0) throw new Error(`unclosed { in JSONPath template ${JSON.stringify(template)}`);
    tokens.push({ expr: template.slice(open + 1, close) });
    i = close + 1;
  }
  const unescape = (t: string) => t.replace(/\\n/g, '\n').replace(/\\t/g, '\t');
  const stack: Node[][] = [[]];
  const ranges: Node[] = [];
  for (const tok of tokens) {
    const top = stack[stack.length - 1]!;
    if (tok.text !== undefined) top.push({ kind: 'text', text: unescape(tok.text) });
    else {
      const e = tok.expr!.trim();
      if (e.startsWith('range ')) {
        const node: Node = { kind: 'range', steps: parsePath(e.slice(6)), body: [] };
        top.push(node);
        ranges.push(node);
        stack.push(node.body);
      } else if (e === 'end') {
        if (stack.length === 1) throw new Error('{end} without {range} in JSONPath template');
        stack.pop();
        ranges.pop();
      } else if (/^"(.*)"$/.test(e)) top.push({ kind: 'text', text: unescape(e.slice(1, -1)) });
      else top.push({ kind: 'expr', steps: parsePath(e) });
    }
  }
  if (stack.length !== 1) throw new Error('{range} without {end} in JSONPath template');
  return stack[0]!;
}

function render(nodes: Node[], data: unknown): string {
  let out = '';
  for (const n of nodes) {
    if (n.kind === 'text') out += n.text;
    else if (n.kind === 'expr') out += evaluate(data, n.steps).map(show).join(' ');
    else for (const item of evaluate(data, n.steps)) out += render(n.body, item);
  }
  return out;
}

/** Renders a kubectl JSONPath template; throws with a readable message on syntax it does not support. */
export function jsonpath(template: string, data: unknown): string {
  return render(parseTemplate(template), data);
}

/** Parses once, for printing many objects. */
export function compileJsonpath(template: string): (data: unknown) => string {
  const nodes = parseTemplate(template);
  return (data) => render(nodes, data);
}
