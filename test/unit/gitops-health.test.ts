// The GitOps health checks, judged by the engines the controllers run, on the same fixtures laid out
// as Argo CD's own resource_customizations tests (health_test.yaml + testdata/):
// - Argo CD: health.lua in gopher-lua with the libraries Argo CD opens for an argocd-cm script;
// - Flux: the Kustomization's healthCheckExprs through github.com/fluxcd/pkg/runtime/cel's status
//   reader, as kustomize-controller builds it (Current / InProgress / Failed, Unknown on an error).
// Both run in hack/healthcheck (Go), built on first use and cached.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import test from 'ava';
import { dump, load } from 'js-yaml';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { ensureHealthcheck, evaluateHealth, type HealthResult } from '../../hack/healthcheck/healthcheck.ts';
import { byName, FLUX_FOR, fluxKustomization, healthFixtures } from '../harness/gitops-health.ts';

const { dir: DIR, healthLua: HEALTH_LUA, cases, objects } = healthFixtures('NodeDisk');
const flux = fluxKustomization();
const nodeDiskExprs = flux.spec.healthCheckExprs.find((e) => e.kind === 'NodeDisk')!;

let bin = '';
let resultFor: (name: string) => HealthResult = () => {
  throw new Error('the engines have not run yet');
};

test.before(async (t) => {
  // A cold build of the runner takes minutes; after that it is a cached binary.
  t.timeout(20 * 60_000, 'building hack/healthcheck took more than 20 minutes');
  bin = await ensureHealthcheck();
  resultFor = byName(await evaluateHealth(bin, { argocd: { healthLua: HEALTH_LUA }, flux: { healthCheckExprs: flux.spec.healthCheckExprs }, objects }));
});

test('health_test.yaml covers every fixture in testdata/', (t) => {
  t.deepEqual(
    cases.map((c) => c.inputPath).sort(),
    readdirSync(join(DIR, 'testdata'))
      .map((f) => `testdata/${f}`)
      .sort(),
  );
});

for (const c of cases) {
  test(`Argo CD: ${c.inputPath} is ${c.healthStatus.status}`, (t) => {
    const { argocd } = resultFor(c.inputPath);
    t.is(argocd.error, undefined);
    t.deepEqual({ status: argocd.status, message: argocd.message }, c.healthStatus);
  });
  const want = FLUX_FOR[c.healthStatus.status]!;
  test(`Flux: ${c.inputPath} is ${want}`, (t) => {
    t.is(resultFor(c.inputPath).flux.status, want);
  });
}

// Why the CRD defaults status to {} (ADR 20): Flux binds the object's top-level fields as CEL variables, so
// on an object with no status key every expression fails to evaluate (`no such attribute`) and kstatus says
// Unknown. No expression can test for a missing variable; only the served object can have one.
test('Flux: an object with no status key at all cannot be judged by any expression: Unknown, no such attribute', async (t) => {
  const served = objects.find((o) => o.name === 'testdata/progressing_no_status.yaml')!;
  const bare = load(served.yaml) as Record<string, unknown>;
  t.deepEqual(bare.status, {}, 'the fixture is the object as served, status defaulted');
  delete bare.status;
  const probes = [nodeDiskExprs, { apiVersion: nodeDiskExprs.apiVersion, kind: 'NodeDisk', current: '!has(status.conditions)' }];
  for (const exprs of probes) {
    const [r] = await evaluateHealth(bin, { argocd: { healthLua: HEALTH_LUA }, flux: { healthCheckExprs: [exprs] }, objects: [{ name: 'bare', yaml: dump(bare) }] });
    t.is(r!.flux.status, 'Unknown');
    t.regex(r!.flux.error ?? '', /no such attribute/);
  }
});

test('Flux: "current" alone is never true for a NodeDisk that is not healthy, whatever order Flux evaluates in', async (t) => {
  const onlyCurrent = await evaluateHealth(bin, {
    argocd: { healthLua: HEALTH_LUA },
    flux: { healthCheckExprs: [{ apiVersion: nodeDiskExprs.apiVersion, kind: 'NodeDisk', current: nodeDiskExprs.current }] },
    objects: objects.filter((o) => cases.find((c) => c.inputPath === o.name)!.healthStatus.status !== 'Healthy'),
  });
  t.true(onlyCurrent.length > 0);
  for (const r of onlyCurrent) t.not(r.flux.status, 'Current', r.name);
});

// kstatus, the library Flux and kubectl-based pipelines use when a kind has no custom check, reads the
// conditions at status.conditions and status.observedGeneration (ADR 20).
test('kstatus: Ready=True is Current; Ready False or Unknown, or an older observedGeneration, is InProgress', (t) => {
  t.like(resultFor('testdata/healthy.yaml').kstatus, { status: 'Current', message: 'Resource is Ready' });
  for (const f of ['progressing_agent_behind', 'progressing_agent_stale', 'degraded_agent_error', 'degraded_disk_missing']) {
    t.is(resultFor(`testdata/${f}.yaml`).kstatus.status, 'InProgress', f);
  }
  t.like(resultFor('testdata/progressing_generation_not_observed.yaml').kstatus, { status: 'InProgress', message: 'NodeDisk generation is 3, but latest observed generation is 2' });
});

test('kstatus: conditions in the old place (status.controller.conditions) are invisible to it, even a Ready=False', async (t) => {
  const agentError = load(objects.find((o) => o.name === 'testdata/degraded_agent_error.yaml')!.yaml) as { status: Record<string, unknown> & { controller: Record<string, unknown> } };
  const { conditions, observedGeneration, ...rest } = agentError.status;
  t.true(Array.isArray(conditions) && observedGeneration !== undefined);
  const old = { ...agentError, status: { ...rest, controller: { ...agentError.status.controller, conditions } } };
  const [r] = await evaluateHealth(bin, { argocd: { healthLua: HEALTH_LUA }, flux: { healthCheckExprs: [nodeDiskExprs] }, objects: [{ name: 'old-shape', yaml: dump(old) }] });
  t.is(r!.kstatus.status, 'Current', 'kstatus takes a NodeDisk whose agent reports an error for current when its conditions are not at status.conditions');
});

test('Argo CD: an argocd-cm script has no string, math or io library, and os has only time and date', async (t) => {
  const probe = `
    local hs = { status = "Healthy" }
    hs.message = tostring(string) .. " " .. tostring(math) .. " " .. tostring(io) .. " " ..
      tostring(os.getenv) .. " " .. type(os.time) .. " " .. type(os.date) .. " " .. type(require("os").time)
    return hs`;
  const [closed] = await evaluateHealth(bin, { argocd: { healthLua: probe }, flux: { healthCheckExprs: [nodeDiskExprs] }, objects: objects.slice(0, 1) });
  t.deepEqual(closed!.argocd, { status: 'Healthy', message: 'nil nil nil nil function function function' });
  // A script that calls the string library fails in Argo CD unless useOpenLibs is set for its kind.
  const usesString = 'return { status = string.upper("healthy") }';
  const [failing] = await evaluateHealth(bin, { argocd: { healthLua: usesString }, flux: { healthCheckExprs: [nodeDiskExprs] }, objects: objects.slice(0, 1) });
  t.is(failing!.argocd.status, 'Unknown');
  t.regex(failing!.argocd.error ?? '', /string/);
  const [open] = await evaluateHealth(bin, {
    argocd: { healthLua: 'return { status = "Healthy", message = string.upper("ok") }', useOpenLibs: true },
    flux: { healthCheckExprs: [nodeDiskExprs] },
    objects: objects.slice(0, 1),
  });
  t.deepEqual(open!.argocd, { status: 'Healthy', message: 'OK' });
});

test('Argo CD: a status outside its list is Unknown, a non-table result an error', async (t) => {
  const run = async (healthLua: string) => (await evaluateHealth(bin, { argocd: { healthLua }, flux: { healthCheckExprs: [nodeDiskExprs] }, objects: objects.slice(0, 1) }))[0]!.argocd;
  t.deepEqual(await run('return { status = "Fine" }'), { status: 'Unknown', message: 'Lua returned an invalid health status' });
  t.regex((await run('return "Healthy"')).error ?? '', /expect table output from Lua script, not string/);
});

test('the Argo CD health check is installed as an argocd-cm script without useOpenLibs, as tested', (t) => {
  const kust = readFileSync(join(REPO_ROOT, 'kustomize/gitops/argocd/kustomization.yaml'), 'utf8');
  t.regex(kust, /resource\.customizations\.health\.localtest\.example\.com_NodeDisk=resource_customizations\/localtest\.example\.com\/NodeDisk\/health\.lua/);
  t.notRegex(kust, /useOpenLibs/);
});

test('the Argo CD Application applies server-side, diffs server-side, and has no resources finalizer', (t) => {
  const app = load(readFileSync(join(REPO_ROOT, 'kustomize/gitops/argocd/application.yaml'), 'utf8')) as {
    metadata: { finalizers?: string[]; annotations: Record<string, string> };
    spec: { syncPolicy: { syncOptions: string[] } };
  };
  t.is(app.metadata.finalizers, undefined);
  t.true(app.spec.syncPolicy.syncOptions.includes('ServerSideApply=true'));
  t.regex(app.metadata.annotations['argocd.argoproj.io/compare-options'] ?? '', /ServerSideDiff=true/);
});

test('the Flux Kustomization waits and orphans on deletion', (t) => {
  t.true(flux.spec.wait);
  t.is(flux.spec.deletionPolicy, 'Orphan');
});
