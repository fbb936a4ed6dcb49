// What a start of the bundled plugin (dist/bin, what `npm run build` made) loads of Node: only what the
// command uses. Node builtins imported as ES modules would load all their lazy parts (node:fs's promises
// and readline, node:util's diff and worker_threads), and node:child_process is for exec credentials only
// (docs/adr/0027). The krew executable's start: test/integration/sea-code-cache.test.ts.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { execResult, PLUGIN_BIN } from '../harness/exec.ts';

test('kubectl-nodedisks version loads no builtin it does not use', async (t) => {
  if (!existsSync(PLUGIN_BIN)) return t.fail('dist/bin is missing: run npm run build first (npm test does)');
  const dir = mkdtempSync(join(tmpdir(), 'nodedisks-start-'));
  try {
    // A --require'd file reports the builtins Node loaded, at exit.
    const hook = join(dir, 'modules.cjs');
    writeFileSync(hook, "process.on('exit', () => process.stderr.write(JSON.stringify(process.moduleLoadList.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice(13)))));\n");
    const r = await execResult(PLUGIN_BIN, ['version'], { env: { NODE_OPTIONS: `--require ${hook}`, NODE_COMPILE_CACHE: join(dir, 'cache') } });
    t.is(r.code, 0, r.stderr);
    t.regex(r.stdout, /^kubectl-nodedisks v/);
    const loaded = JSON.parse(r.stderr) as string[];
    t.true(loaded.includes('internal/util/parse_args/parse_args'), 'the report works: version parses its arguments');
    for (const m of ['child_process', 'worker_threads', 'internal/fs/promises', 'internal/readline/interface', 'internal/util/diff', 'https', 'tls']) {
      t.false(loaded.includes(m), `version loads ${m}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
