// The krew route: `npm run release` builds the single executable archive, krew itself (built from
// sigs.k8s.io/krew) installs it into a temporary KREW_ROOT, and kubectl then finds and runs it.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { load } from 'js-yaml';
import { release } from '../../hack/release/release.ts';
import { PLATFORMS } from '../../hack/release/platforms.ts';
import { ensureKrew } from '../../hack/krew/krew.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { useControlPlane } from './_controlplane.ts';

const run = promisify(execFile);
const controlPlane = useControlPlane(test);

test('krew installs the released archive and kubectl runs it against the cluster', async (t) => {
  // krew is built from Go modules on this test's first run (a minute or more), cached afterwards.
  t.timeout(20 * 60_000, 'building krew and installing with it took more than 20 minutes');
  const work = await mkdtemp(join(tmpdir(), 'nodedisks-krew-'));
  try {
    const host = PLATFORMS.find((p) => p.id === 'linux-amd64')!;
    const [built] = await release({ platforms: [host], out: join(work, 'release'), manifest: join(work, 'krew-manifest.yaml') });
    t.truthy(built);
    const manifest = load(readFileSync(join(work, 'krew-manifest.yaml'), 'utf8')) as {
      apiVersion: string;
      spec: { platforms: { selector: { matchLabels: Record<string, string> }; sha256: string; bin: string }[] };
    };
    t.is(manifest.apiVersion, 'krew.googlecontainertools.github.com/v1alpha2');
    t.deepEqual(manifest.spec.platforms[0]?.selector.matchLabels, { os: 'linux', arch: 'amd64' });
    t.is(manifest.spec.platforms[0]?.sha256, built!.sha256);
    t.is(manifest.spec.platforms[0]?.bin, 'kubectl-nodedisks');

    const krew = await ensureKrew();
    const krewRoot = join(work, 'krew-root');
    const env = { ...process.env, KREW_ROOT: krewRoot, PATH: `${join(krewRoot, 'bin')}:${process.env.PATH}`, KUBECONFIG: controlPlane().admin().kubeconfig };
    await run(krew, ['install', `--manifest=${join(work, 'krew-manifest.yaml')}`, `--archive=${built!.archive}`], { env });
    t.true(existsSync(join(krewRoot, 'bin', 'kubectl-nodedisks')));
    // krew's receipt records the install (`krew list` would need the plugin index, i.e. the network).
    t.regex(readFileSync(join(krewRoot, 'receipts', 'nodedisks.yaml'), 'utf8'), /name: nodedisks/);

    const version = await run('kubectl', ['nodedisks', 'version'], { env });
    t.regex(version.stdout, /^kubectl-nodedisks v\d+\.\d+\.\d+ \(API localtest\.example\.com\/v1alpha1, Node\.js 24\./);
    // The single executable talks to the real API server like the bundle does.
    const list = await run('kubectl', ['nodedisks', 'list'], { env });
    t.is(list.stderr, 'No resources found\n');

    // The committed manifest names every platform and has a sha256 for each.
    const committed = load(readFileSync(join(REPO_ROOT, 'krew-manifest.yaml'), 'utf8')) as { spec: { platforms: { selector: { matchLabels: { os: string; arch: string } }; sha256: string }[] } };
    t.deepEqual(committed.spec.platforms.map((p) => `${p.selector.matchLabels.os}-${p.selector.matchLabels.arch}`).sort(), PLATFORMS.map((p) => p.id).sort());
    for (const p of committed.spec.platforms) t.regex(p.sha256, /^[0-9a-f]{64}$/);
    // Archives are reproducible, so the committed sha256 must be what this commit builds.
    const committedLinux = committed.spec.platforms.find((p) => p.selector.matchLabels.os === 'linux' && p.selector.matchLabels.arch === 'amd64');
    t.is(committedLinux?.sha256, built!.sha256, 'krew-manifest.yaml is stale: run npm run release and commit it');
  } finally {
    await rm(work, { recursive: true, force: true });
  }
});
