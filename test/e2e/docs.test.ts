// The docs run on a real cluster: every `<!-- docs-test: cluster -->` block of README.md and docs/ on the
// local three-kubelet cluster (`npm run cluster`, its own data dir standing for .nodedisks-cluster/), the
// blocks of one file in file order in one bash session, from a directory that stands for the repository
// root, with kubectl and Node 24 on PATH as a reader has them. A command that fails, or prints other than
// the docs show, fails the file's test with file:line, the command, what was shown and what it printed.
// Root only, as the cluster is (`npm run test:e2e`).
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import test from 'ava';
import { readSysctls } from '../../hack/cluster/host.ts';
import { clusterEnv, interruptAndCheckTornDown, startCluster, UP, waitForOutput, type Run } from '../../hack/cluster/run.ts';
import { ensureBinaries } from '../../hack/controlplane/binaries.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { allShellBlocks, type ShellBlock } from '../harness/docs-blocks.ts';
import { repoView, runDocBlocks } from '../harness/docs-run.ts';
import { MINUTES } from './_nodedisks.ts';

const byFile = new Map<string, ShellBlock[]>();
for (const b of allShellBlocks(REPO_ROOT)) if (b.marker?.kind === 'cluster') byFile.set(b.file, [...(byFile.get(b.file) ?? []), b]);

const { dataDir, env: clusterEnvVars } = clusterEnv();
const view = repoView(REPO_ROOT, { '.nodedisks-cluster': dataDir });
const before = await readSysctls();
let run: Run | undefined;
let env: NodeJS.ProcessEnv = {};

test.before(async () => {
  const kubectl = (await ensureBinaries()).kubectl;
  run = startCluster(clusterEnvVars);
  await waitForOutput(run, UP, 40 * MINUTES);
  env = {
    HOME: process.env.HOME,
    LANG: 'C.UTF-8',
    PATH: [join(REPO_ROOT, 'node_modules', '.bin'), dirname(kubectl), '/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'].join(':'),
  };
});

test.after.always(async () => {
  if (run && run.child.exitCode === null) {
    run.child.kill('SIGINT');
    await run.exited;
  }
  view.remove();
  rmSync(dataDir, { recursive: true, force: true });
});

test.serial('some docs blocks are run on the local cluster', (t) => {
  t.true(byFile.has('docs/install.md'), "docs/install.md's install check is not marked docs-test: cluster");
});

for (const [file, blocks] of byFile) {
  test.serial(`${file}: its ${blocks.length} cluster block(s) run and print what the docs show`, async (t) => {
    t.timeout(10 * MINUTES);
    const r = await runDocBlocks(file, blocks, { cwd: view.dir, env, timeoutMs: 9 * MINUTES });
    t.log(`${r.steps} step(s)`);
    if (r.failures.length > 0) t.fail(`\n${r.failures.join('\n\n')}`);
    else t.pass();
  });
}

test.serial('Ctrl-C tears the cluster down and leaves the host as found', async (t) => {
  t.timeout(5 * MINUTES);
  await interruptAndCheckTornDown(t, run!, before);
});
