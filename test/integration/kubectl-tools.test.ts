// kubectl's own tools on NodeDisks, against the real API server with the real controller and agent:
// `kubectl wait --for=condition=Ready nodedisk --all`, `kubectl explain` on every field of the CRD, and the
// GitOps health checks (Flux's CEL evaluator, Argo CD's Lua) on a NodeDisk exactly as the API server serves
// it before anyone wrote its status (ADR 20).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import test from 'ava';
import { load } from 'js-yaml';
import { nodeDiskCRD, nodeDiskSchema, type SchemaProps } from '../../api/v1alpha1/schema.ts';
import { API_VERSION, FIELD_MANAGER, KIND } from '../../api/constants.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { nodeDisksFor } from './_controlplane.ts';
import { nodeDiskName } from '../../api/names.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { ensureHealthcheck, evaluateHealth, type HealthRequest } from '../../hack/healthcheck/healthcheck.ts';
import { execResult } from '../harness/exec.ts';
import { seedDisks, startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const NODE = 'node-tools';
let work = '';
const programs: Program[] = [];

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-tools-'));
  await seedDisks(join(work, 'disks'), 3, 1 << 20);
  programs.push(await startController(controlPlane(), { logDir: join(work, 'logs') }));
  programs.push(await startAgent(controlPlane(), { node: NODE, diskDir: join(work, 'disks'), logDir: join(work, 'logs') }));
});
test.afterEach.always((t) => {
  if (!t.passed) for (const p of programs) console.error(`----- ${p.name} -----\n${p.logs(6000)}`);
});
test.after.always(async () => {
  await Promise.all(programs.map((p) => p.stop()));
  await rm(work, { recursive: true, force: true });
});

const kubectl = (args: string[], timeoutMs = 150_000) => execResult(controlPlane().binaries.kubectl, args, { env: { KUBECONFIG: controlPlane().admin().kubeconfig }, timeoutMs });

test.serial('kubectl wait --for=condition=Ready nodedisk --all: met for every disk once the controller has judged it', async (t) => {
  // The agent creates the three NodeDisks; wait until they exist so --all has something to wait for.
  for (let i = 0; i < 120; i++) {
    if ((await kubectl(['get', 'nodedisks', '-o', 'name'])).stdout.trim().split('\n').filter(Boolean).length === 3) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  const r = await kubectl(['wait', '--for=condition=Ready', 'nodedisk', '--all', '--timeout=120s']);
  t.is(r.code, 0, r.stderr);
  t.deepEqual(
    r.stdout.trim().split('\n').sort(),
    [1, 2, 3].map((i) => `nodedisk.localtest.example.com/${nodeDiskName(NODE, `disk${i}`)} condition met`),
  );
  // kubectl reads the condition where every tool does, with the generation it describes.
  const nd = JSON.parse((await kubectl(['get', 'nodedisk', nodeDiskName(NODE, 'disk1'), '-o', 'json'])).stdout) as {
    metadata: { generation: number };
    status: { observedGeneration: number; conditions: { type: string; status: string; observedGeneration: number }[]; controller: Record<string, unknown> };
  };
  t.like(
    nd.status.conditions.find((c) => c.type === 'Ready'),
    { status: 'True', observedGeneration: nd.metadata.generation },
  );
  t.is(nd.status.observedGeneration, nd.metadata.generation);
  t.deepEqual(nd.status.controller, { accepted: true, observedGeneration: nd.metadata.generation });
});

test.serial('a NodeDisk with the old status.controller.conditions loses them to the new CRD and gets status.conditions from the controller', async (t) => {
  const cp = controlPlane();
  const apply = (crd: unknown) => cp.kubectl(cp.admin(), ['apply', '--server-side', '--force-conflicts', '-f', '-'], JSON.stringify(crd));
  // The CRD before ADR 20: conditions under status.controller.
  const old = structuredClone(nodeDiskCRD);
  const status = old.spec.versions[0]!.schema.openAPIV3Schema.properties!.status!;
  const conditions = status.properties!.conditions!;
  status.properties = { node: status.properties!.node!, controller: { ...status.properties!.controller!, properties: { ...status.properties!.controller!.properties, conditions } } };
  delete status.default;
  // The controller stops first, so that what the API server serves below is its own doing.
  await programs.shift()!.stop();
  await apply(old);
  const name = nodeDiskName('node-old', 'disk1');
  const admin = nodeDisksFor(cp.admin());
  await eventually(
    'the old CRD to serve status.controller.conditions',
    async () => {
      await admin.create(newNodeDisk('node-old', 'disk1'), { fieldManager: FIELD_MANAGER.agent }).catch(() => undefined);
      const ready = { type: 'Ready', status: 'True', reason: 'PhaseMatchesDesired', message: 'old shape', lastTransitionTime: '2026-01-02T03:04:05Z', observedGeneration: 1 };
      const written = await admin.applyStatus(
        { apiVersion: API_VERSION, kind: KIND, metadata: { name }, status: { controller: { accepted: true, observedGeneration: 1, conditions: [ready] } as never } },
        { fieldManager: 'node-disks-operator-before-adr-20', force: true },
      );
      return ((written.status?.controller as { conditions?: unknown[] } | undefined)?.conditions?.length ?? 0) > 0;
    },
    60_000,
    500,
  );
  await apply(nodeDiskCRD);
  // Pruned as soon as the new schema is in force (on read), before anyone writes the object.
  const served = await eventually(
    'the new CRD to prune the old field',
    async () => {
      const nd = await admin.get(name);
      return nd.status?.controller && !('conditions' in nd.status.controller) ? nd : undefined;
    },
    60_000,
    500,
  );
  t.deepEqual(served.status?.controller, { accepted: true, observedGeneration: 1 });
  programs.unshift(await startController(cp, { logDir: join(work, 'logs'), identity: 'controller-1' }));
  // No agent reports node-old: after its grace the controller writes Ready Unknown (WaitingForAgent) where
  // every tool reads it.
  const migrated = await eventually(
    'the controller to write status.conditions',
    async () => {
      const nd = await admin.get(name);
      return nd.status?.conditions?.some((c) => c.type === 'Ready') ? nd : undefined;
    },
    90_000,
    500,
  );
  t.like(
    migrated.status?.conditions?.find((c) => c.type === 'Ready'),
    { status: 'Unknown', reason: 'WaitingForAgent' },
  );
  t.is(migrated.status?.observedGeneration, migrated.metadata.generation);
  t.false('conditions' in (migrated.status?.controller ?? {}));
});

/** Every field path of the CRD schema, as `kubectl explain` takes it (arrays by their field name). */
function fieldPaths(s: SchemaProps, prefix: string[] = []): string[][] {
  const out: string[][] = [];
  const props = s.type === 'array' ? s.items?.properties : s.properties;
  for (const [k, child] of Object.entries(props ?? {})) {
    out.push([...prefix, k]);
    // metadata is ObjectMeta in the published schema: kubectl explains it from Kubernetes' own text.
    if (k !== 'metadata' || prefix.length > 0) out.push(...fieldPaths(child, [...prefix, k]));
  }
  return out;
}

test('kubectl explain gives every field of the CRD a description', async (t) => {
  const paths = fieldPaths(nodeDiskSchema).map((p) => `nodedisk.${p.join('.')}`);
  t.true(paths.length >= 20, `${paths.length} field paths`);
  const missing: string[] = [];
  for (const path of ['nodedisk', ...paths]) {
    const r = await kubectl(['explain', path]);
    t.is(r.code, 0, `${path}: ${r.stderr}`);
    // kubectl prints DESCRIPTION: then the text, or <empty> / <no description> when the schema has none.
    const description = /\nDESCRIPTION:\n([\s\S]*?)(?:\n(?:FIELDS|ENUM):|$)/.exec(r.stdout)?.[1]?.trim() ?? '';
    if (description === '' || /^<(empty|no description)>$/.test(description)) missing.push(path);
  }
  t.deepEqual(missing, [], 'fields kubectl explain shows without a description');
  t.true(paths.includes('nodedisk.spec.desired.state') && paths.includes('nodedisk.status.node.phase') && paths.includes('nodedisk.status.conditions.reason'));
});

test('a NodeDisk as the API server serves it before any status write is InProgress in Flux and Progressing in Argo CD', async (t) => {
  t.timeout(20 * 60_000, 'building hack/healthcheck took more than 20 minutes');
  // An admin creates it for a node with no agent: nobody writes its status (the controller waits for the
  // agent's first report for its grace period), so this is what Flux and Argo CD read at first.
  const nd = newNodeDisk('node-without-agent', 'disk1');
  const created = await controlPlane().kubectl(controlPlane().admin(), ['create', '-o', 'yaml', '-f', '-'], JSON.stringify(nd));
  t.deepEqual((load(created) as { status?: unknown }).status, {}, 'the CRD serves an unwritten status as {}');
  const flux = load(readFileSync(join(REPO_ROOT, 'kustomize/gitops/flux/nodedisks.yaml'), 'utf8')) as { spec: { healthCheckExprs: HealthRequest['flux']['healthCheckExprs'] } };
  const healthLua = readFileSync(join(REPO_ROOT, 'kustomize/gitops/argocd/resource_customizations/localtest.example.com/NodeDisk/health.lua'), 'utf8');
  const [r] = await evaluateHealth(await ensureHealthcheck(), { argocd: { healthLua }, flux: { healthCheckExprs: flux.spec.healthCheckExprs }, objects: [{ name: 'served', yaml: created }] });
  t.is(r!.flux.status, 'InProgress', r!.flux.error);
  t.is(r!.flux.error, undefined);
  t.like(r!.argocd, { status: 'Progressing', message: 'Waiting for the controller to look at this disk' });
});
