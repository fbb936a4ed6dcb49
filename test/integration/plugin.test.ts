// kubectl nodedisks end to end: the bundled plugin found on PATH by the real kubectl, against a real
// control plane with the real controller and agents.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { nodeDiskName } from '../../api/names.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { seedDisks, startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const NODES = ['node-p1', 'node-p2'];
let work = '';
const programs: Program[] = [];
const BIN = join(REPO_ROOT, 'dist', 'bin');

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** `kubectl …` with the plugin on PATH and the admin kubeconfig (unless `kubeconfig` says otherwise). */
function kubectl(args: string[], o: { kubeconfig?: string } = {}): Promise<Result> {
  return new Promise((resolve) => {
    execFile(
      'kubectl',
      args,
      { env: { ...process.env, PATH: `${BIN}:${process.env.PATH}`, KUBECONFIG: o.kubeconfig ?? controlPlane().admin().kubeconfig }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}
const nd = (...args: string[]) => kubectl(['nodedisks', ...args]);
const get = (name: string) => nodeDisksFor(controlPlane().admin()).get(name);
const name = (node: string, disk: string) => nodeDiskName(node, disk);
const diskDir = (node: string) => join(work, node);

test.serial.before(async () => {
  if (!existsSync(join(BIN, 'kubectl-nodedisks'))) throw new Error('run npm run build first (npm test does)');
  work = await mkdtemp(join(tmpdir(), 'nodedisks-plugin-'));
  const cp = controlPlane();
  programs.push(await startController(cp, { logDir: join(work, 'logs') }));
  for (const node of NODES) {
    await seedDisks(diskDir(node), 3, 64 * 1024 * 1024);
    programs.push(await startAgent(cp, { node, diskDir: diskDir(node), logDir: join(work, 'logs'), rescanInterval: '1s' }));
  }
  await eventually('6 disks Ready', async () => {
    const list = await nodeDisksFor(cp.admin()).list();
    return list.items.filter((i) => i.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).length === 6;
  });
});
test.afterEach.always((t) => {
  if (!t.passed) for (const p of programs) console.error(`----- ${p.name} -----\n${p.logs(3000)}`);
});
test.after.always(async () => {
  await Promise.all(programs.map((p) => p.stop()));
  await rm(work, { recursive: true, force: true });
});

test.serial('list prints kubectl tables, selections and the other formats', async (t) => {
  const table = await nd('list');
  t.is(table.code, 0, table.stderr);
  t.regex(table.stdout, /^NAME\s+NODE\s+DISK\s+DESIRED\s+PHASE\n/);
  t.is(table.stdout.trim().split('\n').length, 7);
  const wide = await nd('get', '-o', 'wide', '--node', 'node-p1');
  t.regex(wide.stdout, /^NAME\s+NODE\s+DISK\s+DESIRED\s+PHASE\s+OWNER\s+CAPACITY\s+MEDIA\s+READY\s+CORDONED\s+AGE\n/);
  // As kubectl prints it: a blank OWNER, the capacity in bytes (test/integration/kubectl-parity.test.ts).
  t.regex(wide.stdout, /node-disk-node-p1-disk1\s+node-p1\s+disk1\s+Available\s+Available\s+67108864\s+True\s+\d+s/);
  t.is(wide.stdout.trim().split('\n').length, 4);
  const names = await nd('list', '-l', 'localtest.example.com/node=node-p2', '-o', 'name', '--chunk-size', '1');
  t.deepEqual(
    names.stdout.trim().split('\n'),
    [1, 2, 3].map((i) => `nodedisk.localtest.example.com/node-disk-node-p2-disk${i}`),
  );
  const jp = await nd('list', '--node', 'node-p1', '-o', 'jsonpath={range .items[*]}{.spec.diskID}={.status.node.capacityBytes}{"\\n"}{end}');
  t.is(jp.stdout, 'disk1=67108864\ndisk2=67108864\ndisk3=67108864\n');
  // One name: the object itself, as kubectl prints it.
  const json = JSON.parse((await nd('get', name('node-p1', 'disk1'), '-o', 'json')).stdout) as { kind: string; spec: { diskID: string } };
  t.is(json.kind, 'NodeDisk');
  t.is(json.spec.diskID, 'disk1');
  const none = await nd('list', '--phase', 'Missing');
  t.is(none.code, 0);
  t.is(none.stdout, '');
  t.is(none.stderr, 'No resources found\n');
});

test.serial('reserve by label, wait, and release: the marker follows', async (t) => {
  const n = name('node-p1', 'disk1');
  const r = await nd('reserve', n);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, `nodedisk.localtest.example.com/${n} reserved (auto-reserve label set)\n`);
  const w = await nd('wait', n, '--for=phase=Reserved', '--timeout=30s');
  t.is(w.code, 0, w.stderr);
  t.is(w.stdout, `nodedisk.localtest.example.com/${n} condition met\n`);
  t.true(existsSync(join(diskDir('node-p1'), 'disk1.img.reserved')));
  const obj = await get(n);
  t.deepEqual(obj.spec.desired, { state: 'Reserved', owner: 'auto' });
  t.true(obj.metadata.managedFields?.some((m) => m.manager === 'kubectl-nodedisks'));
  t.is((await nd('wait', n, '--for=condition=Ready', '--timeout=30s')).code, 0);

  const rel = await nd('release', n);
  t.is(rel.code, 0, rel.stderr);
  t.is((await nd('wait', n, '--for=phase=Available', '--timeout=30s')).code, 0);
  t.false(existsSync(join(diskDir('node-p1'), 'disk1.img.reserved')));
  const after = await get(n);
  t.is(after.metadata.labels?.['localtest.example.com/auto-reserve'], undefined);
  t.deepEqual(after.spec.desired, { state: 'Available' });
});

test.serial('a label set with kubectl label is released too (another field manager owns it)', async (t) => {
  const n = name('node-p1', 'disk2');
  await kubectl(['label', 'nodedisk', n, 'localtest.example.com/auto-reserve=true']);
  t.is((await nd('wait', n, '--for=phase=Reserved', '--timeout=30s')).code, 0);
  const rel = await nd('release', n);
  t.is(rel.code, 0, rel.stderr);
  t.is((await nd('wait', n, '--for=phase=Available', '--timeout=30s')).code, 0);
});

test.serial('reserve --owner picks a free disk of a node; release needs the owner or --force, and says whose it was', async (t) => {
  const r = await nd('reserve', '--node', 'node-p2', '--owner', 'alice');
  t.is(r.code, 0, r.stderr);
  const n = name('node-p2', 'disk1');
  t.is(r.stdout, `nodedisk.localtest.example.com/${n} reserved for alice\n`);
  t.is((await nd('wait', n, '--for=phase=Reserved', '--timeout=30s')).code, 0);
  const status = await nd('status', n);
  t.regex(status.stdout, /Desired:\s+Reserved: reserved by alice \(manual\)/);
  t.regex(status.stdout, /Ready:\s+True \(PhaseMatchesDesired\)/);
  t.regex(status.stdout, /agent last reported \d+s ago/);

  const again = await nd('reserve', n, '--owner', 'bob');
  t.is(again.code, 5);
  t.regex(again.stderr, /already reserved by alice; release it first, or pass --force/);
  const label = await nd('reserve', n);
  t.is(label.code, 5);
  t.regex(label.stderr, /reserved by alice; the auto-reserve label would have no effect/);

  const denied = await nd('release', n);
  t.is(denied.code, 5);
  t.regex(denied.stderr, /reserved by alice; pass --force to release someone else's reservation/);
  const forced = await nd('release', n, '--force');
  t.is(forced.code, 0, forced.stderr);
  t.is(forced.stdout, `nodedisk.localtest.example.com/${n} released (it was reserved by alice)\n`);
  t.is((await nd('wait', n, '--for=phase=Available', '--timeout=30s')).code, 0);
  t.deepEqual((await get(n)).spec.desired, { state: 'Available' });

  // The owner releases their own reservation without --force.
  t.is((await nd('reserve', n, '--owner', 'carol')).code, 0);
  t.is((await nd('release', n, '--owner', 'carol')).code, 0);
});

test.serial('dry runs change nothing; the server validates; -o yaml prints the exact patch', async (t) => {
  const n = name('node-p2', 'disk2');
  const before = (await get(n)).metadata.resourceVersion;
  const client = await nd('reserve', n, '--owner', 'dave', '--dry-run=client', '-o', 'yaml');
  t.is(client.code, 0, client.stderr);
  // The precondition is part of what is sent: the write fails if the disk changed since it was read.
  t.is(
    client.stdout,
    `apiVersion: localtest.example.com/v1alpha1\nkind: NodeDisk\nmetadata:\n  name: ${n}\n  resourceVersion: '${before}'\nspec:\n  desired:\n    state: Reserved\n    owner: dave\n`,
  );
  const server = await nd('reserve', n, '--owner', 'dave', '--dry-run=server');
  t.is(server.code, 0, server.stderr);
  t.regex(server.stdout, /reserved for dave \(dry run: server\)/);
  const rejected = await nd('reserve', n, '--dry-run=server', '--field-manager', 'x'.repeat(200));
  t.is(rejected.code, 2);
  t.regex(rejected.stderr, /the API server rejected the change: .*fieldManager/i);
  t.is((await get(n)).metadata.resourceVersion, before, 'nothing was stored');
});

test.serial('fields owned by a GitOps controller are not fought over: the error points to git', async (t) => {
  const n = name('node-p2', 'disk3');
  const overlay = join(work, 'argo-overlay');
  const g = await nd('gitops', 'reserve', n, '--dir', overlay);
  t.is(g.code, 0, g.stderr);
  // Argo CD applies the overlay server-side as "argocd-controller".
  const applied = await kubectl(['apply', '--server-side', '--field-manager=argocd-controller', '-k', overlay]);
  t.is(applied.code, 0, applied.stderr);
  t.is((await nd('wait', n, '--for=phase=Reserved', '--timeout=30s')).code, 0);
  const rel = await nd('release', n);
  t.is(rel.code, 5);
  t.regex(rel.stderr, /label localtest\.example\.com\/auto-reserve of .* is managed from git by argocd-controller: change it in your GitOps repository/);
  const own = await nd('reserve', n, '--owner', 'erin', '--force');
  t.is(own.code, 5);
  t.regex(own.stderr, /the reservation \(label localtest\.example\.com\/auto-reserve\) of .* is managed from git by argocd-controller/);
});

test.serial('the GitOps overlay changes exactly what reserve changes, and is stable', async (t) => {
  const viaPlugin = name('node-p1', 'disk3');
  const viaGit = name('node-p2', 'disk2');
  const dir = join(work, 'overlay');
  t.is((await nd('gitops', 'reserve', viaGit, '--dir', dir)).code, 0);
  const first = readFileSync(join(dir, `${viaGit}.yaml`), 'utf8');
  const kustomization = readFileSync(join(dir, 'kustomization.yaml'), 'utf8');
  t.is((await nd('gitops', 'reserve', viaGit, '--dir', dir)).code, 0);
  t.is(readFileSync(join(dir, `${viaGit}.yaml`), 'utf8'), first, 'rerunning makes no diff');
  t.is(readFileSync(join(dir, 'kustomization.yaml'), 'utf8'), kustomization);
  t.regex(first, /argocd\.argoproj\.io\/sync-options: Prune=false,Delete=false,ServerSideApply=true/);
  t.regex(first, /kustomize\.toolkit\.fluxcd\.io\/prune: disabled/);
  t.regex(first, /kustomize\.toolkit\.fluxcd\.io\/ssa: Merge/);
  t.notRegex(first, /nodeName|diskID|path:|status/, 'only the fields git owns');
  t.notRegex(kustomization, /namespace/);

  t.is((await kubectl(['apply', '--server-side', '--field-manager=kustomize-controller', '-k', dir])).code, 0);
  t.is((await nd('reserve', viaPlugin)).code, 0);
  for (const n of [viaGit, viaPlugin]) t.is((await nd('wait', n, '--for=condition=Ready', '--timeout=30s')).code, 0);
  const [a, b] = [await get(viaPlugin), await get(viaGit)];
  t.deepEqual(a.spec.desired, b.spec.desired);
  t.is(a.metadata.labels?.['localtest.example.com/auto-reserve'], b.metadata.labels?.['localtest.example.com/auto-reserve']);
  t.is(a.status?.node?.phase, b.status?.node?.phase);

  // Another entry keeps the first; release writes "false", which the policy acts on.
  t.is((await nd('gitops', 'release', viaGit, '--dir', dir)).code, 0);
  t.is((await nd('gitops', 'reserve', name('node-p1', 'disk2'), '--dir', dir)).code, 0);
  const resources = readFileSync(join(dir, 'kustomization.yaml'), 'utf8');
  t.regex(resources, new RegExp(`resources:\\n  - ${name('node-p1', 'disk2')}\\.yaml\\n  - ${viaGit}\\.yaml\\n$`), 'both entries, sorted');
  const built = await kubectl(['kustomize', dir]);
  t.is(built.code, 0, built.stderr);
  t.regex(built.stdout, /localtest\.example\.com\/auto-reserve: "false"/);
});

test.serial('status summarises each node', async (t) => {
  const s = await nd('status');
  t.is(s.code, 0, s.stderr);
  t.regex(s.stdout, /^NODE\s+DISKS\s+RESERVED\s+AVAILABLE\s+MISSING\s+ERROR\s+CORDONED\s+FREE\s+RESERVED-CAPACITY\s+LAST-REPORT\s+AGENT\n/);
  t.regex(s.stdout, /node-p1\s+3\s+\d\s+\d\s+0\s+0\s+0\s+\d+Mi\s+\d+\w*\s+\d+s ago\s+ok/);
});

test.serial('failures name the cause, with distinct exit codes', async (t) => {
  const missing = await nd('status', 'node-disk-nope-disk9');
  t.is(missing.code, 3);
  t.regex(missing.stderr, /"node-disk-nope-disk9" not found; list disks with: kubectl nodedisks list/);
  const selector = await nd('list', '-l', 'a in (');
  t.is(selector.code, 2);
  t.regex(selector.stderr, /invalid label selector "a in \(" \(-l\)/);
  const phase = await nd('list', '--phase', 'Broken');
  t.is(phase.code, 2);
  t.regex(phase.stderr, /--phase must be one of Discovered, Available, Reserved, Missing, Error/);
  const unreachable = await nd('list', '--server', 'https://127.0.0.1:1', '--insecure-skip-tls-verify');
  t.is(unreachable.code, 7);
  t.regex(unreachable.stderr, /cannot reach the API server at https:\/\/127\.0\.0\.1:1: .*ECONNREFUSED.*; check that the cluster is running/);
  const nobody = await kubectl(['nodedisks', 'reserve', name('node-p1', 'disk1')], { kubeconfig: (await controlPlane().nobody()).kubeconfig });
  t.is(nobody.code, 4);
  t.regex(nobody.stderr, /User "nodedisks-nobody" cannot get resource "nodedisks"[\s\S]*nodedisks-editor/);
  const broken = join(work, 'broken-kubeconfig');
  writeFileSync(broken, 'clusters: [ {{');
  const bad = await kubectl(['nodedisks', 'list'], { kubeconfig: broken });
  t.is(bad.code, 2);
  t.regex(bad.stderr, /is not valid YAML/);
  const timeout = await nd('wait', name('node-p1', 'disk1'), '--for=phase=Reserved', '--timeout=1s');
  t.is(timeout.code, 6);
  t.regex(timeout.stderr, /timed out after 1s waiting for phase Reserved on node-disk-node-p1-disk1; see why with: kubectl nodedisks status/);
  const usage = await nd('release', '-l', 'localtest.example.com/node=node-p1');
  t.is(usage.code, 2);
  t.regex(usage.stderr, /add --all to confirm/);
});

test.serial('kubectl completes the plugin through kubectl_complete-nodedisks', async (t) => {
  const c = await kubectl(['__complete', 'nodedisks', 're']);
  t.is(c.code, 0, c.stderr);
  t.deepEqual(
    c.stdout.split('\n').filter((l) => l && !l.startsWith(':')),
    ['reserve', 'release'],
  );
  const names = await kubectl(['__complete', 'nodedisks', 'status', 'node-disk-node-p2']);
  t.true(names.stdout.includes('node-disk-node-p2-disk1'), names.stdout);
  const script = await nd('completion', 'bash');
  t.regex(script.stdout, /complete -F _kubectl_nodedisks kubectl-nodedisks/);
  t.regex((await nd('version')).stdout, /^kubectl-nodedisks v\d+\.\d+\.\d+ /);
});

test.serial('progress goes to a terminal, never to a pipe', async (t) => {
  const n = name('node-p1', 'disk1');
  const cmd = `${join(BIN, 'kubectl-nodedisks')} wait ${n} --for=phase=Reserved --timeout=2s`;
  // `script` gives the command a pseudo-terminal, as an interactive shell would.
  const tty = await new Promise<string>((resolve) =>
    execFile('script', ['-qec', cmd, '/dev/null'], { env: { ...process.env, KUBECONFIG: controlPlane().admin().kubeconfig } }, (_e, stdout) => resolve(stdout)),
  );
  t.regex(tty, /waiting for phase Reserved: 1 of 1 disks left/);
  const piped = await nd('wait', n, '--for=phase=Reserved', '--timeout=2s');
  t.notRegex(piped.stderr, /disks left/);
  t.regex(piped.stderr, /^error: timed out after 2s/);
});
