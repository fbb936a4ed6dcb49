// `--for` of `kubectl nodedisks wait`, read as kubectl wait reads it (k8s.io/kubectl pkg/cmd/wait):
//   delete | create | condition=<Type>[=<value>] | jsonpath='{<path>}'[=<value>]
// plus our own phase=<Phase> (status.node.phase). Conditions are read at status.conditions with kubectl's
// rules: type and value compared case-insensitively, the first condition of the type decides, and one that
// describes an older generation (its observedGeneration, else status.observedGeneration) is not met yet.
import { isNodePhase, NODE_PHASES, type NodeDisk } from '../../api/v1alpha1/types.ts';
import { usageError } from '../errors.ts';
import { goText } from './goformat.ts';
import { evaluate, JsonPathError, parsePath } from './jsonpath.ts';

export type WaitFor = { kind: 'delete'; describe: string } | { kind: 'create'; describe: string } | { kind: 'state'; describe: string; test: (nd: NodeDisk) => boolean };

const FORMS = "delete, create, condition=<Type>[=<value>], jsonpath='{<path>}'[=<value>] or phase=<Phase>";

/** kubectl's case-insensitive comparison (Unicode simple case folding, close enough for condition names). */
const sameFold = (a: string, b: string) => a.localeCompare(b, undefined, { sensitivity: 'accent' }) === 0 && a.length === b.length;

export function conditionMet(nd: NodeDisk, type: string, value: string): boolean {
  for (const c of nd.status?.conditions ?? []) {
    if (typeof c.type !== 'string' || !sameFold(c.type, type) || typeof c.status !== 'string') continue;
    const generation = nd.metadata.generation;
    const observed = c.observedGeneration ?? nd.status?.observedGeneration;
    if (generation !== undefined && observed !== undefined && observed < generation) return false;
    return sameFold(c.status, value);
  }
  return false;
}

/** kubectl splits on single `=` only: `==` inside a filter stays part of the path. */
function splitOnSingleEquals(input: string): string[] {
  const out: string[] = [];
  let cur = '';
  for (let i = 0; i < input.length; i++) {
    if (input[i] === '=') {
      if (input[i + 1] === '=') {
        cur += '==';
        i++;
        continue;
      }
      out.push(cur);
      cur = '';
      continue;
    }
    cur += input[i];
  }
  out.push(cur);
  return out;
}

const EXAMPLE = "--for=jsonpath='{.status.node.phase}'=Reserved or --for=jsonpath='{.status.conditions}'";

function jsonpathFor(input: string): WaitFor {
  const parts = splitOnSingleEquals(input);
  if (parts.length > 2) throw usageError(`--for=jsonpath=${input}: the form is ${EXAMPLE} (one = between the path and the value; quote the whole flag in the shell)`);
  const [expr = '', rawValue] = parts;
  if (expr === '') throw usageError(`--for=jsonpath=${input}: the JSONPath expression is empty; e.g. ${EXAMPLE}`);
  // kubectl's "relaxed" form: {.a.b}, {a.b}, .a.b or a.b; one expression, no template text around it.
  const m = /^\{\.?([^{}]+)\}$|^\.?([^{}]+)$/.exec(expr);
  if (!m) throw usageError(`--for=jsonpath=${input}: unexpected path ${JSON.stringify(expr)}, expected '{.name1.name2}' (or .name1.name2); e.g. ${EXAMPLE}`);
  let steps: ReturnType<typeof parsePath>;
  try {
    steps = parsePath(`.${m[1] ?? m[2]}`);
  } catch (err) {
    if (err instanceof JsonPathError) throw usageError(`--for=jsonpath=${input}: ${err.message}`);
    throw err;
  }
  const value = rawValue === undefined ? undefined : rawValue.replace(/^['"]+|['"]+$/g, '');
  if (value === '')
    throw usageError(`--for=jsonpath=${input}: a value must follow the =, like --for=jsonpath='{.status.node.phase}'=Reserved (or leave out the = to wait for the field to exist)`);
  const path = `{.${m[1] ?? m[2]}}`;
  return {
    kind: 'state',
    describe: value === undefined ? `${path} to exist` : `${path}=${value}`,
    test: (nd) => {
      const found = evaluate(nd, steps);
      if (found.length === 0 || found[0] === undefined) return false;
      if (found.length > 1)
        throw usageError(`--for=jsonpath=${input}: the expression matches more than one value (${found.length}); narrow it with a filter, e.g. {.status.conditions[?(@.type=="Ready")].status}`);
      if (value === undefined) return true;
      const v = found[0];
      if (v !== null && typeof v === 'object')
        throw usageError(`--for=jsonpath=${input}: the expression leads to a nested object or list, which cannot be compared with a value; point it at a field`);
      return goText(v).trim() === value.trim();
    },
  };
}

export function parseFor(v: string | undefined): WaitFor {
  if (v === undefined || v === '') throw usageError(`--for is required: ${FORMS}`);
  const lower = v.toLowerCase();
  if (lower === 'delete') return { kind: 'delete', describe: 'deletion' };
  if (lower === 'create') return { kind: 'create', describe: 'creation' };
  if (v.startsWith('condition=')) {
    const rest = v.slice('condition='.length);
    const eq = rest.indexOf('=');
    const type = eq < 0 ? rest : rest.slice(0, eq);
    const value = eq < 0 ? 'true' : rest.slice(eq + 1);
    if (type === '') throw usageError(`--for=${v}: name the condition, e.g. --for=condition=Ready or --for=condition=Ready=false`);
    return { kind: 'state', describe: `condition ${type}=${value}`, test: (nd) => conditionMet(nd, type, value) };
  }
  if (v.startsWith('jsonpath=')) return jsonpathFor(v.slice('jsonpath='.length));
  const phase = /^phase=(.*)$/.exec(v);
  if (phase) {
    const want = phase[1]!;
    if (!isNodePhase(want)) throw usageError(`--for=phase=${want}: the phase is one of ${NODE_PHASES.join(', ')}`);
    return { kind: 'state', describe: `phase ${want}`, test: (nd) => nd.status?.node?.phase === want };
  }
  throw usageError(`--for must be ${FORMS}; got ${JSON.stringify(v)}`);
}

/** kubectl's --timeout: 0 checks once, a negative duration waits for a week (-1, without a unit, too). */
export const WEEK_MS = 7 * 24 * 3600_000;
export function parseWaitTimeout(v: string, parse: (v: string) => number): number {
  const t = v.trim();
  if (t === '0' || t === '-1') return t === '0' ? 0 : WEEK_MS;
  const negative = t.startsWith('-');
  const ms = parse(negative ? t.slice(1) : t);
  return negative && ms > 0 ? WEEK_MS : ms;
}
