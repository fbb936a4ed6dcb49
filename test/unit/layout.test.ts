// Product and release code stand apart from the test harness: nothing they import or copy comes from
// test/ (what both need lives in hack/lib/), and the README points at nothing outside the repository.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import test from 'ava';
import { REPO_ROOT } from '../../hack/lib/paths.ts';

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return tsFiles(path);
    return /\.(ts|mjs)$/.test(name) ? [path] : [];
  });
}

const PRODUCT = [
  ...['api', 'lib', 'agent', 'controller', 'plugin', 'hack/lib'].flatMap((d) => tsFiles(join(REPO_ROOT, d))),
  join(REPO_ROOT, 'hack/build.ts'),
  join(REPO_ROOT, 'hack/release.ts'),
];

test('product and release code import nothing from test/', (t) => {
  t.true(PRODUCT.length > 20);
  const offenders = PRODUCT.filter((f) => /(?:from|import)\s*\(?\s*['"][^'"]*\/test\//.test(readFileSync(f, 'utf8'))).map((f) => relative(REPO_ROOT, f));
  t.deepEqual(offenders, []);
});

test('the Dockerfile copies nothing from test/', (t) => {
  const copies = readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8').split('\n').filter((l) => /^COPY\s/.test(l));
  t.true(copies.length > 3);
  t.deepEqual(copies.filter((l) => /\stest\//.test(l)), []);
});

test('the README links nothing outside the repository', (t) => {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const links = [...readme.matchAll(/\]\(([^)]+)\)/g)].map((m) => m[1]!);
  t.true(links.length > 0);
  t.deepEqual(links.filter((l) => l.startsWith('..') || l.startsWith('/')), []);
});
