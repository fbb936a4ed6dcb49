// Runs the runnable shell blocks of one docs file as a reader would: all of them, in file order, in one
// bash session (bash -euo pipefail, so variables set by one block are there in the next, and a command that
// fails stops the file), comparing each `$ ` command's output with the lines the docs show after it.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { outputMatches, parseSteps, type ShellBlock, type Step } from './docs-blocks.ts';

export interface DocsRun {
  /** One message per failed step (file:line, the command, what was shown and what it printed); empty when all passed. */
  failures: string[];
  steps: number;
}

const indent = (text: string) =>
  text
    .split('\n')
    .map((l) => `    ${l}`)
    .join('\n');

function report(file: string, step: Step, what: string, actual: string): string {
  const shown = step.expected === undefined ? '' : `\n  shown in the docs:\n${indent(step.expected.length > 0 ? step.expected.join('\n') : '(no output)')}`;
  return `${file}:${step.line}: ${what}\n  command:\n${indent(step.command)}${shown}\n  printed:\n${indent(actual.replace(/\n$/, '') || '(no output)')}`;
}

/** Runs `blocks` (one file's, in order) in one bash session in `cwd` with `env`; never rejects. */
export async function runDocBlocks(file: string, blocks: ShellBlock[], o: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number }): Promise<DocsRun> {
  const steps = blocks.flatMap(parseSteps);
  const token = randomBytes(6).toString('hex');
  const sentinel = (n: number) => `@@docs-step ${token} ${n}@@`;
  // stderr joins stdout so that an error the docs show is compared in the order it was printed.
  const script = ['exec 2>&1', ...steps.flatMap((s, n) => [s.command, `printf '\\n%s\\n' '${sentinel(n)}'`])].join('\n');
  const dir = mkdtempSync(join(tmpdir(), 'nodedisks-docs-'));
  const path = join(dir, 'session.sh');
  writeFileSync(path, `${script}\n`);
  const { code, output } = await new Promise<{ code: number | string; output: string }>((resolve) => {
    execFile('bash', ['--noprofile', '--norc', '-euo', 'pipefail', path], { cwd: o.cwd, env: o.env, timeout: o.timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) =>
      resolve({ code: err ? (err.killed ? `killed after ${o.timeoutMs} ms` : (err.code ?? 'unknown')) : 0, output: stdout + stderr }),
    );
  });
  rmSync(dir, { recursive: true, force: true });

  const failures: string[] = [];
  let rest = output;
  for (const [n, step] of steps.entries()) {
    const end = rest.indexOf(`\n${sentinel(n)}\n`);
    if (end < 0) {
      failures.push(report(file, step, `the session stopped here (exit ${code})`, rest));
      break;
    }
    const printed = rest.slice(0, end);
    rest = rest.slice(end + sentinel(n).length + 2);
    if (step.expected !== undefined && !outputMatches(step.expected, printed)) failures.push(report(file, step, 'printed something else than the docs show', printed));
  }
  return { failures, steps: steps.length };
}

/**
 * A directory that stands for the repository root: every top-level entry of `root` linked (but .git, so
 * the docs' commands cannot commit to this checkout, and the names in `own`), plus `own`'s entries linked to
 * the paths given, e.g. `.nodedisks-dev` to the test's own demo. The docs' `$PWD/.nodedisks-dev/...` then
 * names the test's demo, and files the docs write land here, not in the checkout.
 */
export function repoView(root: string, own: Record<string, string>): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'nodedisks-docs-root-'));
  for (const name of readdirSync(root)) if (name !== '.git' && !(name in own)) symlinkSync(join(root, name), join(dir, name));
  for (const [name, target] of Object.entries(own)) symlinkSync(target, join(dir, name));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
