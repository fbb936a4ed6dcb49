// `npm run cluster -- --install=…`: a choice it does not know is a usage error (exit 2) naming the choices,
// refused before the cluster checks anything else (root, a running cluster), so it is safe to run here.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import test from 'ava';
import { REPO_ROOT } from '../../hack/lib/paths.ts';

const MAIN = join(REPO_ROOT, 'hack', 'cluster', 'main.ts');
const cluster = (args: string[]) => spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8', timeout: 30_000 });

for (const [what, args, message] of [
  ['an unknown --install value', ['--install=minikube'], /error: --install=minikube: the choices are none, kustomize, helm/],
  ['--install without a value', ['--install'], /error: Option '--install <value>' argument missing/],
  ['an unknown option', ['--instal=helm'], /error: Unknown option '--instal'/],
] as const) {
  test(`npm run cluster refuses ${what} with exit 2 and the usage naming the choices`, (t) => {
    const r = cluster([...args]);
    t.is(r.status, 2, r.stderr);
    t.regex(r.stderr, message);
    t.regex(r.stderr, /usage: npm run cluster \[-- --install=none\|kustomize\|helm\]/);
    t.is(r.stdout, '');
  });
}
