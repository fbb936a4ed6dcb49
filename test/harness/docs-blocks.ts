// The docs' shell blocks as the tests see them (the convention is in docs/contributing.md, "Docs that
// run"): every fenced block of sh/bash/shell/console in README.md and docs/**/*.md, the marker comment on
// the line before it (demo, cluster or skip with a reason), its `$ ` commands with the output shown after
// each, and the normalisation that lets shown output match what a command printed on another day.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

export const SHELL_INFO = ['sh', 'bash', 'shell', 'console'];

export type Marker = { kind: 'demo' } | { kind: 'cluster' } | { kind: 'skip'; reason: string };

export interface ShellBlock {
  /** Repository-relative path of the Markdown file. */
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  info: string;
  /** The marker on the line before the fence; undefined when there is none. */
  marker: Marker | undefined;
  /** The marker comment as written when it is not one of the known forms. */
  badMarker?: string;
  /** The lines between the fences, the fence's indentation removed. */
  body: string[];
}

/** One thing to run in a block: a `$ ` command and the output shown after it, or the whole block as a script. */
export interface Step {
  /** 1-based line in the Markdown file where the command starts. */
  line: number;
  command: string;
  /** The lines shown after a `$ ` command; undefined for a plain script, whose output is not compared. */
  expected: string[] | undefined;
}

const FENCE = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)?.*$/;
const MARKER = /^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$/;

function parseMarker(text: string): Marker | undefined {
  if (text === 'demo') return { kind: 'demo' };
  if (text === 'cluster') return { kind: 'cluster' };
  const skip = /^skip:\s*(\S.*)$/.exec(text);
  return skip ? { kind: 'skip', reason: skip[1]! } : undefined;
}

/** Every fenced block of a shell info string in one Markdown text (blocks of other languages are passed over whole). */
export function findShellBlocks(text: string, file: string): ShellBlock[] {
  const lines = text.split('\n');
  const blocks: ShellBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]!);
    if (!open) continue;
    const indent = open[1]!.length;
    const fence = open[2]!;
    const info = (open[3] ?? '').toLowerCase();
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const l = lines[j]!;
      const trimmed = l.trim();
      if (/^(`+|~+)$/.test(trimmed) && trimmed[0] === fence[0] && trimmed.length >= fence.length) break;
      body.push(l.slice(Math.min(indent, l.length - l.trimStart().length)));
    }
    if (SHELL_INFO.includes(info)) {
      const before = i > 0 ? lines[i - 1]! : '';
      const m = MARKER.exec(before);
      const marker = m ? parseMarker(m[1]!) : undefined;
      blocks.push({ file, line: i + 1, info, marker, ...(m && !marker ? { badMarker: before.trim() } : {}), body });
    }
    i = j;
  }
  return blocks;
}

/** What is wrong with a block's marker, with the fix, or undefined when it has a known one. */
export function markerProblem(b: ShellBlock): string | undefined {
  const fix = 'put one of <!-- docs-test: demo -->, <!-- docs-test: cluster --> or <!-- docs-test: skip: <why it cannot run here> --> on the line just before the fence';
  if (b.badMarker !== undefined) return `${b.file}:${b.line}: unknown marker ${b.badMarker} (a skip needs its reason after "skip:"); ${fix}`;
  if (!b.marker) return `${b.file}:${b.line}: a \`\`\`${b.info} block with no docs-test marker; ${fix}`;
  return undefined;
}

/**
 * The steps of a block: with `$ ` lines, each command (a trailing `\` continues it on the next line) and the
 * lines after it up to the next `$ `; without any, the whole block as one script (comments are bash's).
 */
export function parseSteps(b: ShellBlock): Step[] {
  const first = b.line + 1;
  if (!b.body.some((l) => l.startsWith('$ '))) {
    return b.body.some((l) => l.trim() !== '') ? [{ line: first, command: b.body.join('\n'), expected: undefined }] : [];
  }
  const steps: Step[] = [];
  let k = 0;
  // Lines before the first `$ ` (a comment, say) belong to no command.
  while (k < b.body.length && !b.body[k]!.startsWith('$ ')) k++;
  while (k < b.body.length) {
    const line = first + k;
    const parts = [b.body[k]!.slice(2)];
    while (parts.at(-1)!.endsWith('\\') && k + 1 < b.body.length) parts.push(b.body[++k]!);
    k++;
    const expected: string[] = [];
    while (k < b.body.length && !b.body[k]!.startsWith('$ ')) expected.push(b.body[k++]!);
    while (expected.length > 0 && expected.at(-1)!.trim() === '') expected.pop();
    steps.push({ line, command: parts.join('\n'), expected });
  }
  return steps;
}

// Kubernetes' random suffixes: 5 characters of its alphabet (no vowels), after an optional 9-10 of a hash.
const SUFFIX_CHARS = '[bcdfghjklmnpqrstvwxz2456789]';
const RULES: [RegExp, string][] = [
  [/\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?/g, '<time>'],
  [/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g, '<uid>'],
  [/(resourceVersion"?:\s*"?)\d+/g, '$1<rv>'],
  [new RegExp(`-(${SUFFIX_CHARS}{9,10}-)?${SUFFIX_CHARS}{5}\\b`, 'g'), '-<suffix>'],
  // Ages and durations as kubectl prints them: 3s, 5m, 2m10s, 4h5m, 12d, <invalid>.
  [/(?<![\w.-])(\d+(\.\d+)?(ms|s|m|h|d))+(?![\w.])/g, '<age>'],
  [/<invalid>/g, '<age>'],
];

/** One line as compared: ids, times and ages replaced by placeholders, runs of blanks made one (column widths move with them). */
export function normaliseLine(line: string): string {
  let out = line;
  for (const [re, to] of RULES) out = out.replace(re, to);
  return out.replace(/[ \t]+/g, ' ').trim();
}

/** Output as compared: normalised lines with blank lines at either end dropped. */
export function normalise(text: string): string[] {
  const lines = text.split('\n').map(normaliseLine);
  while (lines.length > 0 && lines[0] === '') lines.shift();
  while (lines.length > 0 && lines.at(-1) === '') lines.pop();
  return lines;
}

/** Whether what was printed matches the shown lines, where a `...` line matches any number of lines. */
export function outputMatches(expected: string[], actual: string): boolean {
  const want = normalise(expected.join('\n'));
  const got = normalise(actual);
  // memo[i][j]: want[i..] matches got[j..]
  const memo = new Map<string, boolean>();
  const match = (i: number, j: number): boolean => {
    const key = `${i},${j}`;
    const hit = memo.get(key);
    if (hit !== undefined) return hit;
    let r: boolean;
    if (i === want.length) r = j === got.length;
    else if (want[i] === '...') r = match(i + 1, j) || (j < got.length && match(i, j + 1));
    else r = j < got.length && want[i] === got[j] && match(i + 1, j + 1);
    memo.set(key, r);
    return r;
  };
  return match(0, 0);
}

/** README.md and every Markdown file under docs/, repository-relative, sorted. */
export function docFiles(root: string): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(dir)
      .sort()
      .flatMap((name) => {
        const p = join(dir, name);
        if (statSync(p).isDirectory()) return walk(p);
        return name.endsWith('.md') ? [relative(root, p)] : [];
      });
  return ['README.md', ...walk(join(root, 'docs'))];
}

/** Every shell block of the docs, file by file in file order. */
export function allShellBlocks(root: string): ShellBlock[] {
  return docFiles(root).flatMap((f) => findShellBlocks(readFileSync(join(root, f), 'utf8'), f));
}
