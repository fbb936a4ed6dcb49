// kubectl's plugin completion after a krew install: krew (built from sigs.k8s.io/krew) installs the
// released archive, the install message's completion line is run as a user would paste it, and then the
// real kubectl completes `kubectl nodedisks …` through kubectl_complete-nodedisks, with only krew's bin
// directory (no checkout) on PATH.
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { load } from 'js-yaml';
import { readFileSync } from 'node:fs';
import { release } from '../../hack/release/release.ts';
import { PLATFORMS } from '../../hack/release/platforms.ts';
import { execResult } from '../harness/exec.ts';
import { ensureKrew } from '../../hack/krew/krew.ts';
import { useControlPlane } from './_controlplane.ts';

const run = promisify(execFile);
const controlPlane = useControlPlane(test);

test('after krew install, the caveat line makes kubectl complete the plugin', async (t) => {
  t.timeout(20 * 60_000, 'building krew and the release took more than 20 minutes');
  const work = await mkdtemp(join(tmpdir(), 'nodedisks-krew-completion-'));
  try {
    const host = PLATFORMS.find((p) => p.id === 'linux-amd64')!;
    const [built] = await release({ platforms: [host], out: join(work, 'release'), manifest: join(work, 'krew-manifest.yaml') });
    const krew = await ensureKrew();
    const krewRoot = join(work, 'krew-root');
    // Only krew's bin and the system's: nothing of this checkout.
    const env = { KREW_ROOT: krewRoot, HOME: work, PATH: `${join(krewRoot, 'bin')}:/usr/local/bin:/usr/bin:/bin`, KUBECONFIG: controlPlane().admin().kubeconfig };
    await run(krew, ['install', `--manifest=${join(work, 'krew-manifest.yaml')}`, `--archive=${built!.archive}`], { env });
    const complete = async () => {
      const r = await execResult('kubectl', ['__complete', 'nodedisks', 'list', '--sho'], { env });
      return r.stdout.split('\n').filter((l) => l && !l.startsWith(':'));
    };
    t.deepEqual(await complete(), [], 'krew alone does not put the completion helper on PATH');

    const caveats = (load(readFileSync(join(work, 'krew-manifest.yaml'), 'utf8')) as { spec: { caveats: string } }).spec.caveats;
    const line = caveats.split('\n').find((l) => l.trim().startsWith('cp '));
    t.truthy(line, `the caveats say how to install the helper:\n${caveats}`);
    await run('sh', ['-c', line!], { env });
    t.deepEqual(await complete(), ['--show-labels']);
    const names = await execResult('kubectl', ['__complete', 'nodedisks', 're'], { env });
    t.deepEqual(
      names.stdout.split('\n').filter((l) => l && !l.startsWith(':')),
      ['reserve', 'release'],
    );
  } finally {
    await rm(work, { recursive: true, force: true });
  }
});
