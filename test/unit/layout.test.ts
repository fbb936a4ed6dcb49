// The layout's import rule (docs/design.md: Layout), checked on every file: product code (api lib agent
// controller plugin csi) imports neither the dev tooling (hack/) nor the tests; lib/ imports nothing of api/,
// agent/, controller/, plugin/, csi/, hack/ or test/; hack/ never imports test/; benches may import hack/, never
// test/. "Imports" means static and dynamic imports, re-exports, `new URL('…', import.meta.url)` and
// repository paths written as strings (a file spawned by path is a dependency too). No user-facing npm
// script runs a file under test/, and the README points at nothing outside the repository.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import test from 'ava';
import { REPO_ROOT } from '../../hack/lib/paths.ts';

const PRODUCT = ['api', 'lib', 'agent', 'controller', 'plugin', 'csi'];
const TOP = [...PRODUCT, 'hack', 'bench', 'test'];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === 'node_modules' ? [] : sourceFiles(path);
    return /\.(ts|mjs)$/.test(name) ? [path] : [];
  });
}

/** The folder of the layout a repository path belongs to ("lib", "hack", …), or undefined outside them. */
function topOf(repoPath: string): string | undefined {
  const first = repoPath.split('/')[0]!;
  return TOP.includes(first) ? first : undefined;
}

/** Every repository path a source file depends on, as repository-relative paths ("hack/lib/paths.ts"). */
function dependencies(file: string, text: string): string[] {
  const here = dirname(file);
  const found = new Set<string>();
  const add = (p: string) => {
    const rel = relative(REPO_ROOT, p);
    if (!rel.startsWith('..')) found.add(rel);
  };
  // import … from '…', export … from '…', import '…', import('…'), new URL('…', import.meta.url)
  const relativeSpec = /(?:\bfrom\s*|\bimport\s*\(?\s*|new URL\(\s*)['"`](\.{1,2}\/[^'"`$]*)['"`]/g;
  for (const m of text.matchAll(relativeSpec)) add(join(here, m[1]!));
  // join(REPO_ROOT, 'test', 'cluster', …) and `${REPO_ROOT}/test/…`
  for (const m of text.matchAll(/\bjoin\(\s*REPO_ROOT\s*,\s*((?:'[^']*'\s*,?\s*)+)/g)) {
    add(join(REPO_ROOT, ...[...m[1]!.matchAll(/'([^']*)'/g)].map((s) => s[1]!)));
  }
  for (const m of text.matchAll(/\$\{REPO_ROOT\}\/([\w./-]+)/g)) add(join(REPO_ROOT, m[1]!));
  // A path of the repository written as a string, e.g. spawn(node, ['test/cluster/main.ts']).
  for (const m of text.matchAll(/['"`]((?:api|lib|agent|controller|plugin|csi|hack|bench|test)\/[\w./-]+\.(?:ts|mjs|sh))['"`]/g)) {
    add(join(REPO_ROOT, m[1]!));
  }
  return [...found];
}

interface Edge {
  from: string;
  to: string;
}

function edges(): Edge[] {
  return TOP.flatMap((d) => sourceFiles(join(REPO_ROOT, d))).flatMap((f) => {
    const from = relative(REPO_ROOT, f);
    return dependencies(f, readFileSync(f, 'utf8')).map((to) => ({ from, to }));
  });
}

const ALL = edges();
const show = (e: Edge) => `${e.from} -> ${e.to}`;
const between = (from: string[], to: string[]) => ALL.filter((e) => from.includes(topOf(e.from) ?? '') && to.includes(topOf(e.to) ?? ''));

test('the scanner sees static, dynamic and spawned-by-path dependencies (else the rules below would pass on nothing)', (t) => {
  const file = join(REPO_ROOT, 'hack', 'x.ts');
  const text = [
    "import { a } from './lib/paths.ts';",
    "export { b } from '../api/names.ts';",
    "const m = await import('../test/fixtures/parity-seeds.ts');",
    "const sh = new URL('./cluster/enter.sh', import.meta.url);",
    "spawn(process.execPath, ['test/unit/x.test.ts']);",
    "const p = join(REPO_ROOT, 'test', 'e2e', 'y.ts');",
    'const q = `${REPO_ROOT}/bench/z.ts`;',
    "import { c } from 'node:fs';",
  ].join('\n');
  t.deepEqual(dependencies(file, text).sort(), [
    'api/names.ts',
    'bench/z.ts',
    'hack/cluster/enter.sh',
    'hack/lib/paths.ts',
    'test/e2e/y.ts',
    'test/fixtures/parity-seeds.ts',
    'test/unit/x.test.ts',
  ]);
  // And on the repository itself: the demo depends on the control plane runner, the e2e tests on hack/cluster.
  t.true(ALL.some((e) => e.from === 'hack/demo.ts' && e.to === 'hack/controlplane/controlplane.ts'));
  t.true(ALL.some((e) => e.from.startsWith('test/e2e/') && e.to === 'hack/cluster/run.ts'));
  t.true(ALL.filter((e) => topOf(e.from) && PRODUCT.includes(topOf(e.from)!)).length > 100);
});

test('product code (api lib agent controller plugin csi) depends on neither hack/ nor test/ nor bench/', (t) => {
  t.deepEqual(between(PRODUCT, ['hack', 'test', 'bench']).map(show), []);
});

test('lib/ depends on nothing of the rest of the product, nor on hack/ or the tests', (t) => {
  t.deepEqual(between(['lib'], ['api', 'agent', 'controller', 'plugin', 'csi', 'hack', 'test', 'bench']).map(show), []);
});

test('hack/ never depends on test/ or bench/', (t) => {
  t.deepEqual(between(['hack'], ['test', 'bench']).map(show), []);
});

test('benches depend on hack/, never on test/', (t) => {
  t.deepEqual(between(['bench'], ['test']).map(show), []);
  t.true(between(['bench'], ['hack']).length > 5);
});

test('no npm script but the test ones names a file under test/; none runs one with node', (t) => {
  const { scripts } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  t.true(['start', 'setup', 'cluster', 'controlplane'].every((s) => s in scripts));
  const mentionsTest = Object.entries(scripts).filter(([name, command]) => !/^test(:|$)/.test(name) && /(?<![\w.-])test\//.test(command));
  t.deepEqual(mentionsTest, []);
  t.deepEqual(
    Object.entries(scripts).filter(([, command]) => /\bnode\s+(\.\/)?test\//.test(command)),
    [],
  );
});

test('the Dockerfile copies nothing from test/, and everything its build step runs', (t) => {
  const copies = readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8')
    .split('\n')
    .filter((l) => /^COPY\s/.test(l));
  t.true(copies.length > 3);
  t.deepEqual(
    copies.filter((l) => /\stest\//.test(l)),
    [],
  );
  // hack/build.ts runs in the build stage: it and what it imports from hack/ must be copied there.
  const copied = copies.map((l) => l.split(/\s+/)[1]!);
  const isCopied = (p: string) => copied.some((c) => p === c || p.startsWith(`${c}/`));
  const wanted = ['hack/build.ts', ...ALL.filter((e) => e.from === 'hack/build.ts' && e.to.startsWith('hack/')).map((e) => e.to)];
  t.true(wanted.length > 1);
  t.deepEqual(
    wanted.filter((p) => !isCopied(p)),
    [],
  );
});

test('the README links nothing outside the repository', (t) => {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const links = [...readme.matchAll(/\]\(([^)]+)\)/g)].map((m) => m[1]!);
  t.true(links.length > 0);
  t.deepEqual(
    links.filter((l) => l.startsWith('..') || l.startsWith('/')),
    [],
  );
});

test('every product file is at most 400 lines', (t) => {
  const long = PRODUCT.flatMap((d) => sourceFiles(join(REPO_ROOT, d)))
    .map((f) => ({ f: relative(REPO_ROOT, f), lines: readFileSync(f, 'utf8').split('\n').length - 1 }))
    .filter((x) => x.lines > 400)
    .map((x) => `${x.f}: ${x.lines}`);
  t.deepEqual(long, []);
});

// A program's own entry, flags, metrics, errors, wire types and server are its by their folder; any other
// name belongs to one concept, in one home.
const PER_PROGRAM = new Set(['main.ts', 'config.ts', 'metrics.ts', 'errors.ts', 'types.ts', 'server.ts', 'flags.ts']);

test('no two product files share a name, but for the files each program has of its own (main, config, metrics, …)', (t) => {
  const byName = new Map<string, string[]>();
  for (const f of PRODUCT.flatMap((d) => sourceFiles(join(REPO_ROOT, d)))) {
    const name = f.split('/').pop()!;
    if (!PER_PROGRAM.has(name)) byName.set(name, [...(byName.get(name) ?? []), relative(REPO_ROOT, f)]);
  }
  t.deepEqual(
    [...byName.values()].filter((paths) => paths.length > 1),
    [],
  );
});
