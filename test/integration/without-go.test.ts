// With envtest assets in KUBEBUILDER_ASSETS, nobody needs Go: `npm start` (its control-plane step and
// the demo itself) runs on those binaries, and nothing it does not need (krew) is built on the way.
// The binaries are the pinned ones from the cache, handed over as KUBEBUILDER_ASSETS; PATH keeps
// everything but the folders that hold a `go`.
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { ensureBinaries } from '../../hack/controlplane/binaries.ts';
import { pathWithoutGo } from '../../hack/lib/gobuild.ts';

async function withoutGoEnv(cache: string): Promise<NodeJS.ProcessEnv> {
  const assets = (await ensureBinaries()).dir;
  // An empty cache: anything that would be built (krew, the control plane) is not there to be found.
  return { ...process.env, KUBEBUILDER_ASSETS: assets, NODEDISKS_CACHE_DIR: cache, PATH: await pathWithoutGo() };
}

test('with KUBEBUILDER_ASSETS and no Go, the control-plane step of npm start says the control plane is ready', async (t) => {
  const cache = await mkdtemp(join(tmpdir(), 'nodedisks-nogo-'));
  try {
    const env = await withoutGoEnv(cache);
    const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = execFile(process.execPath, ['hack/controlplane/ensure.ts'], { cwd: REPO_ROOT, env }, (_e, _o, stderr) => resolve({ code: child.exitCode, stderr }));
    });
    t.is(code, 0, stderr);
    t.regex(stderr, /^control plane: Kubernetes v1\.\d+\.\d+, etcd v?3\.\d+\.\d+ \(KUBEBUILDER_ASSETS: .+\) ready in /);
    t.notRegex(stderr, /krew|building/);
  } finally {
    await rm(cache, { recursive: true, force: true });
  }
});

test('with KUBEBUILDER_ASSETS and no Go, the demo comes up, reports every disk, and stops on Ctrl-C', async (t) => {
  t.timeout(4 * 60_000);
  const cache = await mkdtemp(join(tmpdir(), 'nodedisks-nogo-'));
  const devDir = await mkdtemp(join(tmpdir(), 'nodedisks-nogo-demo-'));
  try {
    const env = { ...(await withoutGoEnv(cache)), NODEDISKS_DEV_DIR: devDir };
    const demo = spawn(process.execPath, ['hack/demo.ts'], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    demo.stdout.on('data', (b: Buffer) => (out += b.toString()));
    demo.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((resolve) => demo.on('exit', (code) => resolve(code)));
    // Up when it prints its instructions; not up if it exits first or takes more than 3 minutes.
    let gaveUp = false;
    const deadline = setTimeout(() => (gaveUp = true), 3 * 60_000);
    let up = false;
    let ended = false;
    void exited.then(() => (ended = true));
    while (!up && !ended && !gaveUp) {
      await new Promise((r) => setTimeout(r, 200));
      up = /Press Ctrl-C to stop everything/.test(out);
    }
    clearTimeout(deadline);
    if (!up) demo.kill('SIGKILL');
    t.true(up, out);
    t.regex(out, /NodeDisks is running: Kubernetes v1\.\d+\.\d+/);
    demo.kill('SIGINT');
    t.is(await exited, 0, out);
    t.regex(out, /stopped\.\n?$/);
  } finally {
    await rm(cache, { recursive: true, force: true });
    await rm(devDir, { recursive: true, force: true });
  }
});
