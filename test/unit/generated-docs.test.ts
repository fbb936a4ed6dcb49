// The generated docs (hack/docs/): committed output current, the plugin and API references following
// their sources, the plots drawn from records and a placeholder without, and the write-or-check helper.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { nodeDiskCRD, type SchemaProps } from '../../api/v1alpha1/schema.ts';
import { GLOBAL_FLAGS, type CommandSpec } from '../../plugin/args.ts';
import { COMMANDS } from '../../plugin/cli.ts';
import { apiReference } from '../../hack/docs/api-reference.ts';
import { generatedDocs } from '../../hack/docs/generate.ts';
import { PLOTS, plotFiles, readSeedReference } from '../../hack/docs/plots.ts';
import { pluginReference } from '../../hack/docs/plugin-reference.ts';
import { staleFiles, writeFiles } from '../../hack/lib/generated-files.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';

const FIXTURES = join(REPO_ROOT, 'test/fixtures/bench-results');

test('the committed generated docs are what hack/docs/ generates (run npm run generate)', async (t) => {
  const files = await generatedDocs();
  t.true(files.length >= 2 + 1 + PLOTS.length);
  t.deepEqual(staleFiles(files), []);
});

test('the generated pages hold no shell block (their examples are text)', async (t) => {
  for (const f of (await generatedDocs()).filter((f) => f.path.endsWith('.md'))) {
    t.deepEqual(f.content.match(/^```(sh|bash|shell|console)\b.*$/gm) ?? [], [], f.path);
  }
});

test("the plugin reference follows the commands' specs: a changed flag description, a new command, a global flag", (t) => {
  const list = COMMANDS.find((c) => c.name === 'list') as unknown as CommandSpec;
  const changed: CommandSpec = { ...list, flags: { ...list.flags, 'chunk-size': { ...list.flags['chunk-size']!, describe: 'Pages of this many NodeDisks, a changed description' } } };
  const added: CommandSpec = {
    name: 'frobnicate',
    summary: 'A command only this test has',
    positionals: [{ name: 'what', describe: 'The thing', required: true, choices: ['a', 'b'] }],
    flags: { level: { type: 'string', integer: true, default: '3', describe: 'How much' } },
    examples: [['kubectl nodedisks frobnicate a --level=4', 'Frobnicate a, more']],
    run: async () => {},
  };
  const page = pluginReference([changed, added], { ...GLOBAL_FLAGS, 'test-only': { type: 'boolean', describe: 'A global flag only this test has' } });
  t.true(page.includes('| `--chunk-size` | integer | `500` | Pages of this many NodeDisks, a changed description |'));
  t.false(page.includes('Return large lists in chunks of this many objects'));
  t.true(page.includes('## frobnicate'));
  t.true(page.includes('kubectl nodedisks frobnicate WHAT [options]'), 'the usage line as --help prints it');
  t.true(page.includes('| `WHAT` | The thing (required) | `a`, `b` |'));
  t.true(page.includes('```text\n# Frobnicate a, more\nkubectl nodedisks frobnicate a --level=4\n```'));
  t.true(page.includes('| `--test-only` | boolean | `false` | A global flag only this test has |'));
  for (const code of ['| 0 | ok |', '| 2 | usage |', '| 7 | API server unreachable |']) t.true(page.includes(code), code);
});

test('the API reference follows the schema: a changed field description, enum and default, a new field', (t) => {
  const crd = structuredClone(nodeDiskCRD);
  const spec = crd.spec.versions[0]!.schema.openAPIV3Schema.properties!.spec!;
  const desired = spec.properties!.desired!;
  desired.properties!.state = { ...desired.properties!.state!, description: 'A changed description of the state', enum: ['Available', 'Reserved', 'Parked'], default: 'Parked' };
  spec.properties!.colour = { type: 'string', description: 'A field only this test has', maxLength: 12 } satisfies SchemaProps;
  spec.required = [...(spec.required ?? []), 'colour'];
  const page = apiReference([crd]);
  t.true(page.includes('| `spec.desired.state` | `<string>` |  | A changed description of the state | one of `Available`, `Reserved`, `Parked`; default `"Parked"` |'));
  t.true(page.includes('| `spec.colour` | `<string>` | yes | A field only this test has | at most 12 characters |'));
  t.true(page.includes('    colour\t<string> -required-\n'), 'in the kubectl explain --recursive tree');
  t.true(page.includes('short names | `ndisk`'));
});

test('the plots are drawn from records, with machine, load, date and the seed marked as a reference', async (t) => {
  const files = await plotFiles(FIXTURES);
  t.deepEqual(
    files.map((f) => f.path),
    PLOTS.map((p) => p.file),
  );
  for (const f of files) {
    t.true(f.content.startsWith('<svg'), f.path);
    t.false(f.content.includes('No runs recorded'), f.path);
    t.true(f.content.includes('measured on 2 cpus, Fixture CPU @ 2.00GHz, 24 GiB, Node v24.21.0; load average'), f.path);
    t.true(f.content.includes('(commit fixture)'), f.path);
  }
  const reservation = files.find((f) => f.path.endsWith('bench-reservation.svg'))!.content;
  t.true(reservation.includes('p50 23.6 s'), "the seed's figure");
  t.true(reservation.includes("seed's Go, 30 disks (reference)"));
  t.true(reservation.includes('reference, not measured here'));
  t.true(reservation.includes('p50 104 ms, p95 218 ms'), 'the flow run');
  t.true(files.find((f) => f.path.endsWith('bench-reservation-floor.svg'))!.content.includes('1.95× floor'));
  t.true(files.find((f) => f.path.endsWith('bench-controller-scale.svg'))!.content.includes('restart, reconciled (watch-list)'));
  t.true(files.find((f) => f.path.endsWith('bench-plugin-scale.svg'))!.content.includes('kubectl nodedisks list (bundle)'));
});

test('with no records a plot is a placeholder naming the command that records them', async (t) => {
  const empty = mkdtempSync(join(tmpdir(), 'plots-'));
  t.teardown(() => rmSync(empty, { recursive: true, force: true }));
  for (const [i, f] of (await plotFiles(empty)).entries()) {
    t.true(f.content.includes('No runs recorded yet.'), f.path);
    t.true(f.content.includes(`recorded by: ${PLOTS[i]!.commands.join('; ')}`), f.path);
  }
});

test('the seed reference says where its figures come from', (t) => {
  const seed = readSeedReference();
  t.regex(seed.date, /^\d{4}-\d{2}-\d{2}$/);
  t.true(seed.cite.length > 0 && seed.source.length > 0);
  t.true(seed.reservationLatency.p50Ms > 0);
});

test('a malformed record line is named with its file and line', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plots-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'flow.jsonl'), '{"bench":"flow"\n');
  await t.throwsAsync(plotFiles(dir), { message: /flow\.jsonl line 1 is not JSON/ });
});

test('staleFiles names missing and changed files, not current ones', (t) => {
  const root = mkdtempSync(join(tmpdir(), 'generated-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(join(root, 'a'));
  writeFiles(
    [
      { path: 'a/current.md', content: 'same\n' },
      { path: 'a/changed.md', content: 'old\n' },
    ],
    root,
  );
  const want = [
    { path: 'a/current.md', content: 'same\n' },
    { path: 'a/changed.md', content: 'new\n' },
    { path: 'b/missing.md', content: 'x\n' },
  ];
  t.deepEqual(staleFiles(want, root), ['a/changed.md', 'b/missing.md']);
  writeFiles(want, root);
  t.deepEqual(staleFiles(want, root), []);
});
