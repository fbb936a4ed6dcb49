// The test tools built from Go modules (hack/lib/gobuild.ts) say what failed and why: a missing Go
// toolchain names `go` and PATH and what to install, a failing build carries the compiler's words.
// Real processes: node, and go itself where it is installed; an empty cache so nothing is found there.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { ensureGoBuild, pathWithoutGo } from '../../hack/lib/gobuild.ts';

const node = (args: string[], env: NodeJS.ProcessEnv) =>
  new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = execFile(process.execPath, args, { cwd: REPO_ROOT, env }, (_e, _o, stderr) => resolve({ code: child.exitCode, stderr }));
  });

test('without Go, building krew fails with a message that says Go is missing from PATH and what to do', async (t) => {
  const cache = await mkdtemp(join(tmpdir(), 'nodedisks-gotools-'));
  try {
    const { code, stderr } = await node(['hack/setup.ts', 'krew'], { ...process.env, NODEDISKS_CACHE_DIR: cache, PATH: await pathWithoutGo() });
    t.is(code, 1);
    t.regex(stderr, /^building krew v\d+\.\d+\.\d+ \(for the krew installation test\) from Go modules into .* \(first use on this machine/m);
    t.regex(
      stderr,
      /^error: krew: krew v\d+\.\d+\.\d+ \(for the krew installation test\) is built from Go modules on first use, and the Go toolchain was not found: no `go` on PATH\. Install Go 1\.26 or newer\.$/m,
    );
  } finally {
    await rm(cache, { recursive: true, force: true });
  }
});

test("a Go build that fails says which package and why, in the compiler's words", async (t) => {
  const work = await mkdtemp(join(tmpdir(), 'nodedisks-gotools-'));
  try {
    await writeFile(join(work, 'go.mod'), 'module example.test/broken\n\ngo 1.22\n');
    await writeFile(join(work, 'main.go'), 'package main\n\nfunc main() { undefinedThing() }\n');
    const err = await t.throwsAsync(ensureGoBuild({ what: 'a broken tool', moduleDir: work, dir: join(work, 'cache', 'broken'), targets: [{ name: 'broken', pkg: '.' }], log: () => {} }));
    t.regex(err!.message, /^building a broken tool failed: go build \. \(in .*\):\n.*undefined: undefinedThing/s);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
});

test('npm run setup names the tools it knows when asked for another (usage error, exit 2)', async (t) => {
  const { code, stderr } = await node(['hack/setup.ts', 'kubectl'], process.env);
  t.is(code, 2);
  t.is(
    stderr.trim(),
    'error: unknown kubectl; choose from controlplane, csi-provisioner, csi-sanity, e2e-storage, faultydisk, fio, healthcheck, helm, krew, promql, promtext, promtool, toolrunner, xfsprogs (none: all)',
  );
});
