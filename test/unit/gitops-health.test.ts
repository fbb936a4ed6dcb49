// The GitOps health checks on the same fixtures (Argo CD's health_test.yaml + testdata/ layout):
// the Argo CD Lua check run by a Lua 5.1 interpreter (Argo CD runs gopher-lua, a Lua 5.1), and the Flux
// healthCheckExprs run by a CEL evaluator, with the object's fields as variables, as Flux binds them.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isCelError, run } from '@bufbuild/cel';
import test from 'ava';
import { load } from 'js-yaml';
import { REPO_ROOT } from '../harness/paths.ts';

const DIR = join(REPO_ROOT, 'kustomize/gitops/argocd/resource_customizations/localtest.example.com/NodeDisk');
const LUA = readFileSync(join(DIR, 'health.lua'), 'utf8');
const cases = (load(readFileSync(join(DIR, 'health_test.yaml'), 'utf8')) as { tests: { healthStatus: { status: string; message: string }; inputPath: string }[] }).tests;
const fixture = (path: string) => load(readFileSync(join(DIR, path), 'utf8')) as Record<string, unknown>;

/** A JSON value as a Lua table constructor (arrays 1-based, as Argo CD converts objects for gopher-lua). */
function lua(v: unknown): string {
  if (v === null || v === undefined) return 'nil';
  if (typeof v === 'string') return JSON.stringify(v); // JSON string escapes are valid Lua escapes for this data
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `{${v.map(lua).join(', ')}}`;
  return `{${Object.entries(v as Record<string, unknown>).map(([k, x]) => `[${JSON.stringify(k)}] = ${lua(x)}`).join(', ')}}`;
}

function luaHealth(obj: unknown): { status: string; message: string } {
  const chunk = `obj = ${lua(obj)}\nlocal function health()\n${LUA}\nend\nlocal hs = health()\nio.write(hs.status, "\\n", hs.message or "")\n`;
  let out: string;
  try {
    out = execFileSync('lua5.1', ['-'], { input: chunk, encoding: 'utf8' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new Error('lua5.1 is not installed: run npm run setup (it installs the Debian package lua5.1)');
    throw err;
  }
  const [status = '', ...message] = out.split('\n');
  return { status, message: message.join('\n') };
}

interface Exprs {
  inProgress: string;
  failed: string;
  current: string;
}
const flux = load(readFileSync(join(REPO_ROOT, 'kustomize/gitops/flux/nodedisks.yaml'), 'utf8')) as { spec: { healthCheckExprs: (Exprs & { kind: string; apiVersion: string })[] } };
const exprs = flux.spec.healthCheckExprs.find((e) => e.kind === 'NodeDisk')!;

/** Flux's verdict; an expression that cannot be evaluated (a field not there yet) keeps Flux waiting. */
function fluxHealth(obj: Record<string, unknown>): 'InProgress' | 'Failed' | 'Current' {
  const truth = (expr: string): boolean | 'error' => {
    const v = run(expr, obj as never);
    if (isCelError(v)) return 'error';
    return v === true;
  };
  const verdicts = { inProgress: truth(exprs.inProgress), failed: truth(exprs.failed), current: truth(exprs.current) };
  if (verdicts.inProgress === true || verdicts.inProgress === 'error') return 'InProgress';
  if (verdicts.failed === true) return 'Failed';
  if (verdicts.current === true) return 'Current';
  return 'InProgress';
}

const FLUX_FOR: Record<string, 'InProgress' | 'Failed' | 'Current'> = { Healthy: 'Current', Progressing: 'InProgress', Degraded: 'Failed' };

test('health_test.yaml covers every fixture in testdata/', (t) => {
  t.deepEqual(cases.map((c) => c.inputPath).sort(), readdirSync(join(DIR, 'testdata')).map((f) => `testdata/${f}`).sort());
});

for (const c of cases) {
  test(`Argo CD: ${c.inputPath} is ${c.healthStatus.status}`, (t) => {
    t.deepEqual(luaHealth(fixture(c.inputPath)), c.healthStatus);
  });
  test(`Flux: ${c.inputPath} is ${FLUX_FOR[c.healthStatus.status]}`, (t) => {
    t.is(fluxHealth(fixture(c.inputPath)), FLUX_FOR[c.healthStatus.status] ?? 'InProgress');
  });
}

test('the Flux expressions hold in any evaluation order: "current" alone is false while a label waits', (t) => {
  for (const c of cases.filter((x) => x.healthStatus.status !== 'Healthy')) {
    t.not(run(exprs.current, fixture(c.inputPath) as never), true, c.inputPath);
  }
});

test('the Argo CD Application applies server-side, diffs server-side, and has no resources finalizer', (t) => {
  const app = load(readFileSync(join(REPO_ROOT, 'kustomize/gitops/argocd/application.yaml'), 'utf8')) as {
    metadata: { finalizers?: string[]; annotations: Record<string, string> };
    spec: { syncPolicy: { syncOptions: string[] } };
  };
  t.is(app.metadata.finalizers, undefined);
  t.true(app.spec.syncPolicy.syncOptions.includes('ServerSideApply=true'));
  t.regex(app.metadata.annotations['argocd.argoproj.io/compare-options'] ?? '', /ServerSideDiff=true/);
  const kust = readFileSync(join(REPO_ROOT, 'kustomize/gitops/argocd/kustomization.yaml'), 'utf8');
  t.regex(kust, /resource\.customizations\.health\.localtest\.example\.com_NodeDisk=resource_customizations\/localtest\.example\.com\/NodeDisk\/health\.lua/);
  t.regex(kust, /application\.resourceTrackingMethod=annotation/);
});

test('the Flux Kustomization waits and orphans on deletion', (t) => {
  const k = flux as unknown as { spec: { wait: boolean; deletionPolicy: string; prune: boolean } };
  t.true(k.spec.wait);
  t.is(k.spec.deletionPolicy, 'Orphan');
});
