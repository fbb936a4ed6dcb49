// The plugin executables the start-up benches compare: the krew release executable, built as
// `npm run release` builds it (for this machine's platform, into a directory of the bench's own, so the
// repository's krew-manifest.yaml is left alone) and unpacked from its archive; and the floor of any Node
// plugin, a single executable of the same Node binary whose main script is empty: it starts and exits.
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { executableName, nodeBinaries, PLATFORMS, type Platform } from '../../hack/release/platforms.ts';
import { release } from '../../hack/release/release.ts';
import { makeExecutable } from '../../hack/release/sea.ts';

const run = promisify(execFile);

/** The release platform of this machine. */
export function hostPlatform(): Platform {
  const arch = process.arch === 'x64' ? 'amd64' : process.arch;
  const p = PLATFORMS.find((x) => x.os === process.platform && x.arch === arch);
  if (!p) throw new Error(`no release platform for ${process.platform}/${process.arch}`);
  return p;
}

/** Builds the krew archive for this machine under `work` and unpacks it; returns the directory holding kubectl-nodedisks. */
export async function krewExecutable(work: string, log: (line: string) => void = () => {}): Promise<string> {
  const p = hostPlatform();
  const [built] = await release({ platforms: [p], out: join(work, 'release'), manifest: join(work, 'krew-manifest.yaml'), log });
  const dir = join(work, 'krew');
  await mkdir(dir, { recursive: true });
  await run('tar', ['-xzf', built!.archive, '-C', dir]);
  return dir;
}

/**
 * A `kubectl-nodedisks` that is the same Node binary as the krew executable, as a single executable whose
 * main script is empty: what every Node plugin costs before its first line of code.
 */
export async function bareNodePlugin(work: string, log: (line: string) => void = () => {}): Promise<string> {
  const p = hostPlatform();
  const node = (await nodeBinaries([p], log)).get(p.id)!;
  const build = join(work, 'bare-build');
  const dir = join(work, 'bare');
  await mkdir(build, { recursive: true });
  await mkdir(dir, { recursive: true });
  await writeFile(join(build, 'main.cjs'), '');
  await writeFile(join(build, 'sea-config.json'), JSON.stringify({ main: 'main.cjs', output: 'sea-prep.blob', disableExperimentalSEAWarning: true, useCodeCache: false, useSnapshot: false }));
  await run(process.execPath, ['--experimental-sea-config', 'sea-config.json'], { cwd: build });
  await makeExecutable(p, node, join(dir, executableName(p)), join(build, 'sea-prep.blob'));
  return dir;
}
