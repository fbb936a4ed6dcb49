// The GitOps health checks for NodeDiskClaim, judged by the engines the controllers run (as
// test/unit/gitops-health.test.ts does for NodeDisk): NodeDiskClaim/health.lua in gopher-lua opened as
// Argo CD opens an argocd-cm script, the Flux Kustomization's NodeDiskClaim healthCheckExprs through Flux's
// own CEL status reader, and kstatus's generic verdict. The testdata are claims captured from the test
// control plane (the controller's own status writes) or, where a file says so, one of those changed by hand.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import test from 'ava';
import { load } from 'js-yaml';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { ensureHealthcheck, evaluateHealth, type HealthResult } from '../../hack/healthcheck/healthcheck.ts';
import { byName, type Exprs, FLUX_FOR, fluxKustomization, healthFixtures } from '../harness/gitops-health.ts';

const { dir: DIR, healthLua: HEALTH_LUA, cases, objects } = healthFixtures('NodeDiskClaim');
const flux = fluxKustomization();
const claimExprs = flux.spec.healthCheckExprs.find((e) => e.kind === 'NodeDiskClaim');

let bin = '';
let resultFor: (name: string) => HealthResult = () => {
  throw new Error('the engines have not run yet');
};

test.before(async (t) => {
  t.timeout(20 * 60_000, 'building hack/healthcheck took more than 20 minutes');
  bin = await ensureHealthcheck();
  // All of the Kustomization's checks at once, as kustomize-controller builds its reader from them.
  resultFor = byName(await evaluateHealth(bin, { argocd: { healthLua: HEALTH_LUA }, flux: { healthCheckExprs: flux.spec.healthCheckExprs }, objects }));
});

test('the Flux Kustomization has a NodeDiskClaim check', (t) => {
  t.truthy(claimExprs);
  t.is(claimExprs?.apiVersion, 'localtest.example.com/v1alpha1');
});

test('health_test.yaml covers every fixture in testdata/, and every verdict the issue names', (t) => {
  t.deepEqual(
    cases.map((c) => c.inputPath).sort(),
    readdirSync(join(DIR, 'testdata'))
      .map((f) => `testdata/${f}`)
      .sort(),
  );
  t.deepEqual([...new Set(cases.map((c) => c.healthStatus.status))].sort(), ['Degraded', 'Healthy', 'Progressing']);
});

test('the fixtures are NodeDiskClaims, in the phases the binder writes', (t) => {
  const phases = new Set<string>();
  for (const o of objects) {
    const obj = load(o.yaml) as { kind: string; status: { phase?: string } };
    t.is(obj.kind, 'NodeDiskClaim', o.name);
    if (obj.status.phase) phases.add(obj.status.phase);
  }
  t.deepEqual([...phases].sort(), ['Bound', 'Lost', 'Pending']);
});

for (const c of cases) {
  test(`Argo CD: ${c.inputPath} is ${c.healthStatus.status}`, (t) => {
    const { argocd } = resultFor(c.inputPath);
    t.is(argocd.error, undefined);
    t.deepEqual({ status: argocd.status, message: argocd.message }, c.healthStatus);
  });
  const want = FLUX_FOR[c.healthStatus.status]!;
  test(`Flux: ${c.inputPath} is ${want}`, (t) => {
    const r = resultFor(c.inputPath).flux;
    t.is(r.error, undefined);
    t.is(r.status, want);
  });
}

// Flux asks inProgress, then failed, then current; each must hold alone, whatever that order becomes.
// Flux's observedGeneration rule comes before any expression: the generation fixture is left out, and the
// deleted claim (the API server bumped its generation) is judged as if the controller had seen that one.
const judgedByExpressions = objects
  .filter((o) => o.name !== 'testdata/progressing_generation_not_observed.yaml')
  .map((o) => (o.name === 'testdata/progressing_deleting.yaml' ? { ...o, yaml: o.yaml.replace(/^( +)observedGeneration: 1$/gm, '$1observedGeneration: 2') } : o));
// A Lost claim being deleted is on its way out, not for a person to repair: Progressing, like any deletion.
const LOST_DELETED = 'lost, being deleted';
const lost = objects.find((o) => o.name === 'testdata/degraded_lost.yaml')!;
judgedByExpressions.push({ name: LOST_DELETED, yaml: lost.yaml.replace(/^ {2}finalizers:$/m, '  deletionTimestamp: "2026-12-01T17:03:13Z"\n  finalizers:') });
const verdictOf = (name: string) => (name === LOST_DELETED ? 'Progressing' : cases.find((c) => c.inputPath === name)!.healthStatus.status);

test('Argo CD: a Lost claim being deleted is Progressing', async (t) => {
  const [r] = await evaluateHealth(bin, {
    argocd: { healthLua: HEALTH_LUA },
    flux: { healthCheckExprs: flux.spec.healthCheckExprs },
    objects: judgedByExpressions.filter((o) => o.name === LOST_DELETED),
  });
  t.like(r!.argocd, { status: 'Progressing', message: 'Being deleted: waiting for the controller to release the disk (or keep it, with reclaimPolicy Retain)' });
  t.is(r!.flux.status, 'InProgress');
});
for (const [expr, verdict] of [
  ['current', 'Healthy'],
  ['failed', 'Degraded'],
  ['inProgress', 'Progressing'],
] as const) {
  test(`Flux: "${expr}" alone is true exactly for the ${verdict} claims`, async (t) => {
    // Only this expression can say yes; when it says no, Flux falls back to InProgress (or, for
    // inProgress itself, to a current that is always true).
    const alone: Exprs = {
      apiVersion: claimExprs!.apiVersion,
      kind: 'NodeDiskClaim',
      current: expr === 'inProgress' ? 'true' : 'false',
      failed: 'false',
      inProgress: 'false',
      [expr]: claimExprs![expr]!,
    };
    const otherwise = expr === 'inProgress' ? 'Current' : 'InProgress';
    t.true(judgedByExpressions[0]!.yaml.length > 0 && judgedByExpressions.some((o) => o.yaml.includes('deletionTimestamp') && o.yaml.includes('  observedGeneration: 2')));
    const got = await evaluateHealth(bin, { argocd: { healthLua: HEALTH_LUA }, flux: { healthCheckExprs: [alone] }, objects: judgedByExpressions });
    t.is(got.length, judgedByExpressions.length);
    for (const r of got) {
      const isIt = verdictOf(r.name) === verdict;
      t.is(r.flux.error, undefined, r.name);
      t.is(r.flux.status, isIt ? FLUX_FOR[verdict]! : otherwise, r.name);
    }
  });
}

// kstatus, for tools with no custom check: it reads observedGeneration, then Reconciling and Stalled, then
// Ready, at status.conditions / status.observedGeneration; with none of them a resource is Current. So a
// Pending claim carries Ready False (InProgress), and one only a person can mend carries Stalled (Failed).
test('kstatus: Bound and Ready is Current; Pending, waiting for the marker and agent stale are InProgress; Missing, agent error and Lost are Failed; being deleted is Terminating', (t) => {
  t.like(resultFor('testdata/healthy.yaml').kstatus, { status: 'Current', message: 'Resource is Ready' });
  for (const f of ['progressing_pending', 'progressing_waiting_for_marker', 'progressing_agent_stale']) t.is(resultFor(`testdata/${f}.yaml`).kstatus.status, 'InProgress', f);
  t.like(resultFor('testdata/progressing_pending.yaml').kstatus, { message: '0/2 disks fit: 1 reserved, 1 smaller than 1Gi' });
  for (const f of ['degraded_disk_missing', 'degraded_agent_error', 'degraded_lost']) t.is(resultFor(`testdata/${f}.yaml`).kstatus.status, 'Failed', f);
  t.like(resultFor('testdata/degraded_lost.yaml').kstatus, { message: 'NodeDisk node-disk-node-b-disk1 is gone' });
  t.like(resultFor('testdata/progressing_generation_not_observed.yaml').kstatus, {
    status: 'InProgress',
    message: 'NodeDiskClaim generation is 2, but latest observed generation is 1',
  });
  t.is(resultFor('testdata/progressing_deleting.yaml').kstatus.status, 'Terminating');
  // Before the controller's first status there is nothing to read: kstatus says Current (the checks above say Progressing).
  t.is(resultFor('testdata/progressing_no_status.yaml').kstatus.status, 'Current');
});

test('the Argo CD health check for claims is installed as an argocd-cm script without useOpenLibs, as tested', (t) => {
  const kust = readFileSync(join(REPO_ROOT, 'kustomize/gitops/argocd/kustomization.yaml'), 'utf8');
  t.regex(kust, /resource\.customizations\.health\.localtest\.example\.com_NodeDiskClaim=resource_customizations\/localtest\.example\.com\/NodeDiskClaim\/health\.lua/);
  t.notRegex(kust, /useOpenLibs/);
});
