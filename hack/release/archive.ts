// What goes into each platform's .tar.gz beside the executable (the completion helper, LICENSE, NOTICE,
// the embedded Node's LICENSE), and the archive itself: reproducible (sorted entries, fixed times and
// owners, gzip without a name or time), so the sha256 in krew-manifest.yaml can be checked.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, copyFile, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../lib/paths.ts';
import { executableName, nodeLicense, type Platform } from './platforms.ts';

const run = promisify(execFile);

/** What each archive holds, by file name: the executable, the completion helper, the licenses. */
export function archiveFiles(p: Platform): string[] {
  const helper = p.os === 'windows' ? 'kubectl_complete-nodedisks.cmd' : 'kubectl_complete-nodedisks';
  return [executableName(p), helper, 'LICENSE', 'LICENSE-nodejs', 'NOTICE'];
}

/** Writes the non-executable files of `p`'s archive into `stage`. */
export async function stageExtras(p: Platform, stage: string, log: (line: string) => void): Promise<void> {
  if (p.os === 'windows') {
    // kubectl finds plugin completion helpers with PATHEXT on Windows, so a .cmd works as the shell script does.
    await writeFile(
      join(stage, 'kubectl_complete-nodedisks.cmd'),
      '@rem kubectl runs this to complete `kubectl nodedisks ...`; copy it next to kubectl-nodedisks.exe on your PATH.\r\n@kubectl-nodedisks.exe __complete %*\r\n',
    );
  } else {
    await writeFile(
      join(stage, 'kubectl_complete-nodedisks'),
      '#!/bin/sh\n# kubectl runs this to complete `kubectl nodedisks …`; link it next to kubectl-nodedisks on your PATH.\nexec kubectl-nodedisks __complete "$@"\n',
    );
    await chmod(join(stage, 'kubectl_complete-nodedisks'), 0o755);
  }
  await copyFile(join(REPO_ROOT, 'LICENSE'), join(stage, 'LICENSE'));
  await copyFile(join(REPO_ROOT, 'NOTICE'), join(stage, 'NOTICE'));
  await copyFile(await nodeLicense(p, log), join(stage, 'LICENSE-nodejs'));
  await chmod(join(stage, 'LICENSE-nodejs'), 0o644);
}

/** Packs `stage`'s files of `p` into `archive`; returns the archive's sha256. */
export async function packArchive(p: Platform, stage: string, archive: string): Promise<string> {
  // Reproducible: the same inputs give the same bytes, so the sha256 in the manifest can be checked.
  await run('sh', ['-c', `tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "${stage}" -cf - ${archiveFiles(p).join(' ')} | gzip -n > "${archive}"`], {
    maxBuffer: 16 * 1024 * 1024,
  });
  return await sha256(archive);
}

async function sha256(path: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(path))
    .digest('hex');
}
