// Writing or drift-checking generated files, for every generator run by `npm run generate`: without
// `--check` the files are written; with it nothing is written and each file whose committed text differs
// (or that is missing) is named, with the command that brings it up to date, and the exit code is 1.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { REPO_ROOT } from './paths.ts';

export interface GeneratedFile {
  /** Relative to the repository root. */
  path: string;
  content: string;
}

/** The files among `files` whose text on disk (under `root`) is not their content. */
export function staleFiles(files: GeneratedFile[], root = REPO_ROOT): string[] {
  return files
    .filter((f) => {
      try {
        return readFileSync(join(root, f.path), 'utf8') !== f.content;
      } catch {
        return true; // missing: stale like any other difference
      }
    })
    .map((f) => f.path);
}

/** Writes `files` under `root` (directories made as needed). */
export function writeFiles(files: GeneratedFile[], root = REPO_ROOT): void {
  for (const f of files) {
    mkdirSync(dirname(join(root, f.path)), { recursive: true });
    writeFileSync(join(root, f.path), f.content);
  }
}

/**
 * The command-line behaviour: writes the files, or with `--check` in argv reports the stale ones on
 * stderr ("<files> out of date with <source>; run: npm run generate") and sets the exit code to 1.
 */
export function writeOrCheck(files: GeneratedFile[], source: string, argv = process.argv): void {
  if (!argv.includes('--check')) {
    writeFiles(files);
    return;
  }
  const stale = staleFiles(files);
  if (stale.length > 0) {
    console.error(`${stale.join(', ')} out of date with ${source}; run: npm run generate`);
    process.exitCode = 1;
  }
}
