// The docs run: every `<!-- docs-test: demo -->` block of README.md and docs/ against a demo started as
// `npm start` starts it (its own, in a temp dir that stands for .nodedisks-dev/), the blocks of one file in
// file order in one bash session, from a directory that stands for the repository root, with kubectl and
// Node 24 on PATH as a reader has them. A command that fails, or prints other than the docs show, fails the
// file's test with file:line, the command, what was shown and what it printed.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import test from 'ava';
import { ensureBinaries } from '../../hack/controlplane/binaries.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { allShellBlocks, type ShellBlock } from '../harness/docs-blocks.ts';
import { type Demo, demoUp, startDemo, stopDemo } from '../harness/demo.ts';
import { repoView, runDocBlocks } from '../harness/docs-run.ts';
import { PLUGIN_BIN } from '../harness/exec.ts';

const FILE_TIMEOUT = 5 * 60_000;
const byFile = new Map<string, ShellBlock[]>();
for (const b of allShellBlocks(REPO_ROOT)) if (b.marker?.kind === 'demo') byFile.set(b.file, [...(byFile.get(b.file) ?? []), b]);

const base = mkdtempSync(join(tmpdir(), 'nodedisks-docs-demo-'));
const work = join(base, '.nodedisks-dev');
const view = repoView(REPO_ROOT, { '.nodedisks-dev': work });
let demo: Demo | undefined;
let env: NodeJS.ProcessEnv = {};

test.before(async (t) => {
  t.timeout(FILE_TIMEOUT);
  // The docs put dist/bin on PATH for the plugin, as `npm test` leaves it after its build.
  if (!existsSync(PLUGIN_BIN)) throw new Error(`${PLUGIN_BIN} is missing: run npm run build first (npm test does)`);
  const kubectl = (await ensureBinaries()).kubectl;
  demo = startDemo(work);
  await demoUp(demo);
  // What a reader's shell has: their kubectl and the project's Node 24 (npm puts it first), nothing of the test's.
  env = {
    HOME: process.env.HOME,
    LANG: 'C.UTF-8',
    PATH: [join(REPO_ROOT, 'node_modules', '.bin'), dirname(kubectl), '/usr/local/bin', '/usr/bin', '/bin'].join(':'),
  };
});

test.after.always(async () => {
  if (demo) await stopDemo(demo);
  view.remove();
  rmSync(base, { recursive: true, force: true });
});

test('some docs blocks are run against the demo', (t) => {
  t.true(byFile.has('README.md'), "the README's walk-through is not marked docs-test: demo");
});

for (const [file, blocks] of byFile) {
  test.serial(`${file}: its ${blocks.length} demo block(s) run and print what the docs show`, async (t) => {
    t.timeout(FILE_TIMEOUT);
    const run = await runDocBlocks(file, blocks, { cwd: view.dir, env, timeoutMs: FILE_TIMEOUT - 10_000 });
    t.log(`${run.steps} step(s)`);
    if (run.failures.length > 0) t.fail(`\n${run.failures.join('\n\n')}\n\nthe demo's output (its programs' logs are in its logs/):\n${(demo?.output() ?? '').slice(-4000)}`);
    else t.pass();
  });
}
