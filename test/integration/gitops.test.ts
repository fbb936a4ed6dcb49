// `kubectl nodedisks gitops` on a GitOps repository that people already edit: an existing
// kustomization.yaml keeps every byte but the new entry, disk files keep what the user added, labels are
// written "true" as kubectl and kustomize write them, and the result builds with the real kubectl and is
// accepted by the real API server. A name the cluster lacks is refused (the sync would fail) unless
// --offline.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { loadAll } from 'js-yaml';
import { FIELD_MANAGER } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { execResult, type ExecResult } from '../harness/exec.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const BIN = join(REPO_ROOT, 'dist', 'bin');
const NODE = 'node-g1';
const [disk1, disk2, disk3] = ['disk1', 'disk2', 'disk3'].map((d) => nodeDiskName(NODE, d)) as [string, string, string];
let work = '';

function kubectl(args: string[], o: { kubeconfig?: string } = {}): Promise<ExecResult> {
  return execResult('kubectl', args, { env: { PATH: `${BIN}:${process.env.PATH}`, KUBECONFIG: o.kubeconfig ?? controlPlane().admin().kubeconfig } });
}
const nd = (...args: string[]) => kubectl(['nodedisks', ...args]);

test.serial.before(async () => {
  if (!existsSync(join(BIN, 'kubectl-nodedisks'))) throw new Error('run npm run build first (npm test does)');
  work = await mkdtemp(join(tmpdir(), 'nodedisks-gitops-'));
  // NodeDisks as the agent creates them; no agent or controller is needed to write and apply overlays.
  for (const d of ['disk1', 'disk2', 'disk3']) await nodeDisksFor(controlPlane().admin()).create(newNodeDisk(NODE, d), { fieldManager: FIELD_MANAGER.agent });
});
test.after.always(async () => {
  await rm(work, { recursive: true, force: true });
});

// A kustomization as people write them: comments, kind before apiVersion, quoted and plain strings,
// unusual spacing, a non-indented list, flow style.
const HAND_WRITTEN = `# Production NodeDisks, reviewed by the storage team.
kind: Kustomization   # kind first, on purpose
apiVersion: 'kustomize.config.k8s.io/v1beta1'

commonAnnotations:
  team: "storage"   # quoted
  tier: '1'
resources:
# reservations, one file per disk
- "${disk3}.yaml"   # the first one

labels:
  - pairs: {owner: "ops"}
    includeSelectors: false
`;

test.serial('an existing kustomization.yaml keeps every byte but the new entry, and builds and applies for real', async (t) => {
  const dir = join(work, 'hand-written');
  mkdirSync(dir);
  writeFileSync(join(dir, 'kustomization.yaml'), HAND_WRITTEN);
  writeFileSync(join(dir, `${disk3}.yaml`), `apiVersion: localtest.example.com/v1alpha1\nkind: NodeDisk\nmetadata:\n  name: ${disk3}\n`);
  const r = await nd('gitops', 'reserve', disk1, '--dir', dir);
  t.is(r.code, 0, r.stderr);
  // The only change: one line, quoted like its neighbour, where it sorts.
  const expected = HAND_WRITTEN.replace(`- "${disk3}.yaml"`, `- "${disk1}.yaml"\n- "${disk3}.yaml"`);
  t.is(readFileSync(join(dir, 'kustomization.yaml'), 'utf8'), expected);
  // Again: no diff at all.
  t.is((await nd('gitops', 'reserve', disk1, '--dir', dir)).code, 0);
  t.is(readFileSync(join(dir, 'kustomization.yaml'), 'utf8'), expected);

  const built = await kubectl(['kustomize', dir]);
  t.is(built.code, 0, built.stderr);
  t.regex(built.stdout, /localtest\.example\.com\/auto-reserve: "true"/);
  t.regex(built.stdout, /team: storage/);
  const applied = await kubectl(['apply', '--server-side', '--dry-run=server', '--field-manager=argocd-controller', '-k', dir]);
  t.is(applied.code, 0, applied.stderr);
  t.regex(applied.stdout, new RegExp(`nodedisk\\.localtest\\.example\\.com/${disk1} serverside-applied \\(server dry run\\)`));
});

test.serial('labels are written "true" as kubectl and kustomize write them; a disk file keeps what the user added', async (t) => {
  const dir = join(work, 'labels');
  t.is((await nd('gitops', 'reserve', disk2, '--dir', dir)).code, 0);
  const file = join(dir, `${disk2}.yaml`);
  const written = readFileSync(file, 'utf8');
  t.regex(written, /^ {4}localtest\.example\.com\/auto-reserve: "true"$/m);
  t.is(readFileSync(join(dir, 'kustomization.yaml'), 'utf8'), `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ${disk2}.yaml\n`);

  // Someone adds a comment and a label of their own; releasing changes the one value and keeps theirs.
  const edited = written.replace('  labels:\n', '  labels:\n    # ticket OPS-1234\n    team: "storage"\n');
  writeFileSync(file, edited);
  t.is((await nd('gitops', 'release', disk2, '--dir', dir)).code, 0);
  t.is(readFileSync(file, 'utf8'), edited.replace('auto-reserve: "true"', 'auto-reserve: "false"'));

  // Switching to a manual reservation: the label goes, spec.desired comes, their label stays.
  t.is((await nd('gitops', 'reserve', disk2, '--owner', 'alice', '--dir', dir)).code, 0);
  const manual = readFileSync(file, 'utf8');
  t.notRegex(manual, /auto-reserve/);
  t.regex(manual, /# ticket OPS-1234\n\s+team: "storage"/);
  t.regex(manual, /spec:\n {2}desired:\n {4}state: Reserved\n {4}owner: alice\n$/);
  // Flux applies with force (it takes over spec.desired from the agent that created the NodeDisk).
  const applied = await kubectl(['apply', '--server-side', '--force-conflicts', '--dry-run=server', '--field-manager=kustomize-controller', '-k', dir]);
  t.is(applied.code, 0, applied.stderr);
});

test.serial('a name the cluster does not have is refused with the fix; --offline writes it; the sync would indeed fail', async (t) => {
  const dir = join(work, 'missing');
  const missing = nodeDiskName('node-nowhere', 'disk1');
  const refused = await nd('gitops', 'reserve', disk1, missing, '--dir', dir);
  t.is(refused.code, 3);
  t.regex(refused.stderr, new RegExp(`"${missing}" is not a NodeDisk in this cluster: .*spec: Required value.*kubectl nodedisks list, or pass --offline`));
  t.false(existsSync(dir), 'nothing was written, not even the other disk');

  const offline = await nd('gitops', 'reserve', missing, '--dir', dir, '--offline', '--kubeconfig', join(work, 'no-such-kubeconfig'));
  t.is(offline.code, 0, offline.stderr);
  t.true(existsSync(join(dir, `${missing}.yaml`)));
  // What the check prevents: the API server refuses the partial NodeDisk, as Argo CD or Flux would report.
  const sync = await kubectl(['apply', '--server-side', '--field-manager=argocd-controller', '-k', dir]);
  t.not(sync.code, 0);
  t.regex(sync.stderr, /spec: Required value/);

  // Without a cluster and without --offline, the error says both what failed and how to go on.
  const unreachable = await nd('gitops', 'reserve', disk1, '--dir', join(work, 'x'), '--server', 'https://127.0.0.1:1', '--insecure-skip-tls-verify');
  t.is(unreachable.code, 7);
  t.regex(unreachable.stderr, /cannot reach the API server .*pass --offline to write the overlay without the cluster/);
});

test('the Argo CD example sets no instance-wide option: the argocd-cm it merges holds only the NodeDisk and NodeDiskClaim health checks', async (t) => {
  // argocd-cm is the whole Argo CD instance's configuration; application.resourceTrackingMethod there
  // would switch tracking for every application (and lose track of their live resources).
  const built = await kubectl(['kustomize', join(REPO_ROOT, 'kustomize/gitops/argocd')]);
  t.is(built.code, 0, built.stderr);
  const cm = (loadAll(built.stdout) as { kind: string; metadata: { name: string }; data?: Record<string, string> }[]).find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'argocd-cm');
  t.deepEqual(Object.keys(cm?.data ?? {}).sort(), ['resource.customizations.health.localtest.example.com_NodeDisk', 'resource.customizations.health.localtest.example.com_NodeDiskClaim']);
  // The scripts the health tests judge, byte for byte.
  for (const kind of ['NodeDisk', 'NodeDiskClaim']) {
    t.is(
      cm?.data?.[`resource.customizations.health.localtest.example.com_${kind}`],
      readFileSync(join(REPO_ROOT, `kustomize/gitops/argocd/resource_customizations/localtest.example.com/${kind}/health.lua`), 'utf8'),
      kind,
    );
  }
});
