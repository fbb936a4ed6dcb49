#!/usr/bin/env node
// kubectl-nodedisks: the executable krew installs; kubectl runs it as `kubectl nodedisks …`.
import { processIo } from './context.ts';
import { run } from './cli.ts';

// A closed pipe (kubectl nodedisks list | head) is not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});
// No top-level await: the same file is the entry of the CommonJS single executable build.
void run(process.argv.slice(2), processIo).then((code) => {
  process.exitCode = code;
});
