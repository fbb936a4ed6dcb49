// kubectl's JSONPath (-o jsonpath=…, custom-columns, --sort-by), with kubectl's semantics, so the same
// template prints the same text through `kubectl get` and `kubectl nodedisks list`:
// - text outside {…} is printed as is (no escapes); inside, "quoted" strings take Go escapes (\n, \t…);
// - fields .a.b, with \. escaping a dot in a key (.metadata.labels.example\.com/team), and ['key'];
// - [n], [-n], slices [a:b:c] (negative bounds count from the end), [*], unions [0,2], .*;
// - recursive descent .., filters [?(@.a.b == "x")] with == != < > <= >= or existence [?(@.a)];
// - {range …}{end} (nested), where the path, and @ or $, mean the current item;
// - several results are joined by a space; maps and lists print as Go's compact JSON (sorted keys).
import { goJson, goText } from './goformat.ts';

export class JsonPathError extends Error {}

type Step =
  | { kind: 'field'; name: string }
  | { kind: 'wildcard' }
  | { kind: 'recursive' }
  | { kind: 'slice'; start?: number; end?: number; step?: number; index: boolean }
  | { kind: 'union'; parts: Step[] }
  | { kind: 'filter'; left: Step[]; op: string; right: Operand | undefined };

type Operand = { kind: 'path'; steps: Step[] } | { kind: 'literal'; value: unknown };

const TERMINATORS = new Set([' ', '.', ',', '[', ']', '$', '@', '{', '}', '(', ')']);

/** Parses a path such as .items[?(@.a=="b")].metadata.labels.example\.com/x into steps. */
export function parsePath(expr: string): Step[] {
  const steps: Step[] = [];
  let i = 0;
  const s = expr;
  while (i < s.length) {
    const c = s[i]!;
    if (c === ' ' || c === '$' || c === '@') {
      i++;
    } else if (c === '.') {
      if (s[i + 1] === '.') {
        steps.push({ kind: 'recursive' });
        i += 2;
        continue;
      }
      i++;
      let name = '';
      while (i < s.length && !TERMINATORS.has(s[i]!)) {
        if (s[i] === '\\' && i + 1 < s.length) i++;
        name += s[i];
        i++;
      }
      if (name === '*') steps.push({ kind: 'wildcard' });
      else if (name !== '') steps.push({ kind: 'field', name });
    } else if (c === '[') {
      const close = closingBracket(s, i);
      steps.push(parseBracket(s.slice(i + 1, close)));
      i = close + 1;
    } else if (c === '*') {
      steps.push({ kind: 'wildcard' });
      i++;
    } else {
      // A bare first field (custom-columns and --sort-by accept `metadata.name`).
      let name = '';
      while (i < s.length && !TERMINATORS.has(s[i]!)) {
        if (s[i] === '\\' && i + 1 < s.length) i++;
        name += s[i];
        i++;
      }
      if (name === '') throw new JsonPathError(`unrecognized character in action: ${JSON.stringify(c)} in ${JSON.stringify(expr)}`);
      steps.push({ kind: 'field', name });
    }
  }
  return steps;
}

function closingBracket(s: string, open: number): number {
  let depth = 0;
  let quote = '';
  for (let i = open; i < s.length; i++) {
    const c = s[i]!;
    if (quote) {
      if (c === '\\') i++;
      else if (c === quote) quote = '';
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '[') depth++;
    else if (c === ']' && --depth === 0) return i;
  }
  throw new JsonPathError(`unterminated array in ${JSON.stringify(s)}`);
}

function unquote(t: string): string | undefined {
  const m = /^(["'])(.*)\1$/s.exec(t.trim());
  if (!m) return undefined;
  return goUnquote(m[2]!);
}

/** Go's escapes in a quoted string: \n \t \r \\ \" \' \uXXXX. */
function goUnquote(t: string): string {
  return t.replace(/\\(u[0-9a-fA-F]{4}|.)/g, (_, e: string) => {
    if (e[0] === 'u' && e.length === 5) return String.fromCharCode(parseInt(e.slice(1), 16));
    return ({ n: '\n', t: '\t', r: '\r', b: '\b', f: '\f', v: '\v', a: '\x07', '0': '\0' } as Record<string, string>)[e] ?? e;
  });
}

function parseBracket(inner: string): Step {
  const t = inner.trim();
  if (t === '*') return { kind: 'wildcard' };
  if (t.startsWith('?(') && t.endsWith(')')) return parseFilter(t.slice(2, -1));
  const parts = splitTop(t, ',');
  if (parts.length > 1) return { kind: 'union', parts: parts.map(parseBracket) };
  const key = unquote(t);
  if (key !== undefined) return { kind: 'field', name: key };
  if (/^-?\d*(:-?\d*){0,2}$/.test(t) && t !== '') {
    const [a, b, c] = t.split(':');
    const num = (x: string | undefined) => (x === undefined || x === '' ? undefined : Number(x));
    if (!t.includes(':')) return { kind: 'slice', start: Number(a), index: true };
    return { kind: 'slice', start: num(a), end: num(b), step: num(c), index: false };
  }
  throw new JsonPathError(`invalid array index ${JSON.stringify(t)}`);
}

function splitTop(t: string, sep: string): string[] {
  const out: string[] = [];
  let quote = '';
  let depth = 0;
  let cur = '';
  for (let i = 0; i < t.length; i++) {
    const c = t[i]!;
    if (quote) {
      if (c === '\\') cur += c + (t[++i] ?? '');
      else {
        if (c === quote) quote = '';
        cur += c;
      }
      continue;
    }
    if (c === '"' || c === "'") quote = c;
    else if (c === '(' || c === '[') depth++;
    else if (c === ')' || c === ']') depth--;
    if (c === sep && depth === 0) {
      out.push(cur);
      cur = '';
    } else cur += c;
  }
  out.push(cur);
  return out;
}

function parseOperand(t: string): Operand {
  const v = t.trim();
  const str = unquote(v);
  if (str !== undefined) return { kind: 'literal', value: str };
  if (/^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(v)) return { kind: 'literal', value: Number(v) };
  if (v === 'true' || v === 'false') return { kind: 'literal', value: v === 'true' };
  if (v === 'null') return { kind: 'literal', value: null };
  return { kind: 'path', steps: parsePath(v) };
}

function parseFilter(body: string): Step {
  // Like kubectl: LEFT OP RIGHT, where the operator is the first run of ! < > = outside quotes.
  let quote = '';
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (quote) {
      if (c === '\\') i++;
      else if (c === quote) quote = '';
      continue;
    }
    if (c === '"' || c === "'") {
      quote = c;
      continue;
    }
    if ('!<>='.includes(c)) {
      let j = i;
      while (j < body.length && '!<>='.includes(body[j]!)) j++;
      const op = body.slice(i, j);
      if (!['==', '!=', '<', '>', '<=', '>='].includes(op)) throw new JsonPathError(`unrecognized filter operator ${op}`);
      return { kind: 'filter', left: parsePath(body.slice(0, i).trim()), op, right: parseOperand(body.slice(j)) };
    }
  }
  return { kind: 'filter', left: parsePath(body.trim()), op: 'exists', right: undefined };
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

function children(v: unknown): unknown[] {
  if (Array.isArray(v)) return v;
  if (isObject(v))
    return Object.keys(v)
      .sort()
      .map((k) => v[k]);
  return [];
}

function descend(values: unknown[]): unknown[] {
  const out: unknown[] = [];
  for (const v of values) {
    const kids = children(v);
    if (kids.length === 0) continue;
    out.push(v, ...descend(kids));
  }
  return out;
}

function compare(left: unknown, op: string, right: unknown): boolean {
  if (op === '==') return left === right;
  if (op === '!=') return left !== right;
  if (typeof left === 'number' && typeof right === 'number') {
    return op === '<' ? left < right : op === '>' ? left > right : op === '<=' ? left <= right : left >= right;
  }
  if (typeof left === 'string' && typeof right === 'string') {
    return op === '<' ? left < right : op === '>' ? left > right : op === '<=' ? left <= right : left >= right;
  }
  return false;
}

function applyStep(values: unknown[], step: Step): unknown[] {
  const next: unknown[] = [];
  switch (step.kind) {
    case 'field':
      for (const v of values) if (isObject(v) && step.name in v && v[step.name] !== undefined) next.push(v[step.name]);
      return next;
    case 'wildcard':
      for (const v of values) next.push(...children(v));
      return next;
    case 'recursive':
      return descend(values);
    case 'union':
      for (const part of step.parts) next.push(...applyStep(values, part));
      return next;
    case 'slice':
      for (const v of values) {
        if (!Array.isArray(v)) continue;
        const len = v.length;
        let start = step.start ?? 0;
        if (start < 0) start += len;
        let end = step.index ? start + 1 : (step.end ?? len);
        if (!step.index && end < 0) end += len;
        if (end === start) continue;
        if (start >= len || start < 0) throw new JsonPathError(`array index out of bounds: index ${start}, length ${len}`);
        if (end > len || end < 0) throw new JsonPathError(`array index out of bounds: index ${end - 1}, length ${len}`);
        if (start > end) throw new JsonPathError(`starting index ${start} is greater than ending index ${end}`);
        const by = step.step ?? 1;
        if (by <= 0) throw new JsonPathError('step must be > 0');
        for (let i = start; i < end; i += by) next.push(v[i]);
      }
      return next;
    case 'filter':
      for (const v of values) {
        if (!Array.isArray(v)) continue;
        for (const item of v) {
          const left = evaluate(item, step.left);
          if (step.op === 'exists') {
            if (left.length) next.push(item);
            continue;
          }
          if (left.length === 0) continue;
          const right = step.right?.kind === 'literal' ? [step.right.value] : evaluate(item, step.right!.steps);
          if (right.length && compare(left[0], step.op, right[0])) next.push(item);
        }
      }
      return next;
  }
}

/** Every value the path reaches from `root` (missing keys reach nothing, as with kubectl's allowMissingKeys). */
export function evaluate(root: unknown, steps: Step[]): unknown[] {
  let cur: unknown[] = [root];
  for (const step of steps) cur = applyStep(cur, step);
  return cur;
}

/** kubectl prints strings and numbers as text, maps and lists as compact JSON. */
const printResult = (v: unknown) => (v !== null && typeof v === 'object' ? goJson(v) : goText(v));

type Node = { kind: 'text'; text: string } | { kind: 'expr'; steps: Step[] } | { kind: 'range'; steps: Step[]; body: Node[] };

/** The actions of a template: text, and {…} with quotes respected (a "}" in a string does not close it). */
function tokenize(template: string): { text?: string; action?: string }[] {
  const tokens: { text?: string; action?: string }[] = [];
  let i = 0;
  while (i < template.length) {
    const open = template.indexOf('{', i);
    if (open < 0) {
      tokens.push({ text: template.slice(i) });
      break;
    }
    if (open > i) tokens.push({ text: template.slice(i, open) });
    let j = open + 1;
    let quote = '';
    for (; j < template.length; j++) {
      const c = template[j]!;
      if (quote) {
        if (c === '\\') j++;
        else if (c === quote) quote = '';
      } else if (c === '"' || c === "'") quote = c;
      else if (c === '}') break;
    }
    if (j >= template.length) throw new JsonPathError(`unclosed action in JSONPath template ${JSON.stringify(template)}`);
    tokens.push({ action: template.slice(open + 1, j) });
    i = j + 1;
  }
  return tokens;
}

function parseTemplate(template: string): Node[] {
  const stack: Node[][] = [[]];
  for (const tok of tokenize(template)) {
    const top = stack[stack.length - 1]!;
    if (tok.text !== undefined) {
      top.push({ kind: 'text', text: tok.text });
      continue;
    }
    const e = tok.action!.trim();
    if (/^range\s/.test(e)) {
      const node: Node = { kind: 'range', steps: parsePath(e.slice(6)), body: [] };
      top.push(node);
      stack.push(node.body);
    } else if (e === 'end') {
      if (stack.length === 1) throw new JsonPathError('not in range, nothing to end');
      stack.pop();
    } else {
      const literal = unquote(e);
      if (literal !== undefined) top.push({ kind: 'text', text: literal });
      else if (e === 'true' || e === 'false') top.push({ kind: 'text', text: e });
      else top.push({ kind: 'expr', steps: parsePath(e) });
    }
  }
  if (stack.length !== 1) throw new JsonPathError('{range} without {end} in JSONPath template');
  return stack[0]!;
}

function render(nodes: Node[], data: unknown): string {
  let out = '';
  for (const n of nodes) {
    if (n.kind === 'text') out += n.text;
    else if (n.kind === 'expr') out += evaluate(data, n.steps).map(printResult).join(' ');
    // Each result of the range's path is one iteration (so {range .items[*]} visits each item).
    else for (const item of evaluate(data, n.steps)) out += render(n.body, item);
  }
  return out;
}

/** Renders a kubectl JSONPath template. */
export function jsonpath(template: string, data: unknown): string {
  return render(parseTemplate(template), data);
}

/** Parses once, for printing many objects; throws JsonPathError on bad syntax. */
export function compileJsonpath(template: string): (data: unknown) => string {
  const nodes = parseTemplate(template);
  return (data) => render(nodes, data);
}

/**
 * kubectl's "relaxed" expression for custom-columns and --sort-by: `{.a.b}`, `.a.b` or `a.b`, one path.
 * Returns the steps to evaluate.
 */
export function relaxedPath(expr: string): Step[] {
  let e = expr.trim();
  if (e.startsWith('{') && e.endsWith('}')) e = e.slice(1, -1);
  if (e !== '' && !e.startsWith('.') && !e.startsWith('[') && !e.startsWith('$') && !e.startsWith('@')) e = `.${e}`;
  return parsePath(e);
}

/** Text that a template prints, accumulated item by item (see itemwiseTemplate). */
export interface ItemwiseRender {
  add(item: unknown): void;
  text(): string;
}

const isItemsStep = (steps: Step[]) => steps[0]?.kind === 'field' && steps[0].name === 'items' && (steps[1]?.kind === 'wildcard' || steps[1]?.kind === 'filter');

/**
 * When a template over a List only visits `.items[*]` (or `.items[?(…)]`): text, `{range .items[*]}…{end}`
 * and `{.items[*].path}`, as most -o jsonpath templates do, it is rendered item by item, keeping only the
 * printed text, so a list of any length is printed without keeping its objects. Otherwise undefined:
 * slices, indexes and `..` need the whole List.
 */
export function itemwiseTemplate(template: string): (() => ItemwiseRender) | undefined {
  const nodes = parseTemplate(template);
  if (!nodes.every((n) => n.kind === 'text' || isItemsStep(n.steps))) return undefined;
  return () => {
    const parts = nodes.map(() => [] as string[]);
    return {
      add(item) {
        nodes.forEach((n, i) => {
          if (n.kind === 'text') return;
          const found = evaluate([item], n.steps.slice(1));
          if (n.kind === 'range') parts[i]!.push(found.map((v) => render(n.body, v)).join(''));
          else parts[i]!.push(...found.map(printResult));
        });
      },
      text: () => nodes.map((n, i) => (n.kind === 'text' ? n.text : parts[i]!.join(n.kind === 'range' ? '' : ' '))).join(''),
    };
  };
}
