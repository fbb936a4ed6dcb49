// kubectl nodedisks claim / claims / status claim/NAME end to end: the bundled plugin found on PATH by the
// real kubectl, against a real control plane with the real controller and an agent, next to what
// `kubectl get ndc` prints for the same claims.
import { copyFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { load } from 'js-yaml';
import { NodeDiskClaimClient } from '../../api/claim-client.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDiskClaim } from '../../api/v1alpha1/claim-types.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { seedDisks, startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { execResult, type ExecResult } from '../harness/exec.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const BIN = join(REPO_ROOT, 'dist', 'bin');
const NODE = 'pclaim-n1';
const MiB = 2 ** 20;
let work = '';
const programs: Program[] = [];

const kubectl = (args: string[], kubeconfig = controlPlane().admin().kubeconfig): Promise<ExecResult> =>
  execResult('kubectl', args, { env: { PATH: `${BIN}:${process.env.PATH}`, KUBECONFIG: kubeconfig } });
const nd = (...args: string[]) => kubectl(['nodedisks', ...args]);
const claims = () => new NodeDiskClaimClient(nodeDisksFor(controlPlane().admin()).rest);
const ref = (name: string) => `nodediskclaim.localtest.example.com/${name}`;

async function namespace(name: string): Promise<void> {
  await controlPlane().kubectl(controlPlane().admin(), ['create', 'namespace', name]);
}

/** Whether the claim exists: a dry run must leave none. */
const exists = (ns: string, name: string) =>
  claims()
    .get(ns, name)
    .then(
      () => true,
      (err: { statusCode?: number }) => (err.statusCode === 404 ? false : Promise.reject(err)),
    );

/**
 * Ours and kubectl's output for the same claims, asked one after the other: equal once both fall in the
 * same second of AGE (a second boundary between the two calls is the only difference allowed).
 */
async function sameAsKubectl(ours: string[], theirs: string[]): Promise<{ ours: ExecResult; theirs: ExecResult }> {
  let last: { ours: ExecResult; theirs: ExecResult } | undefined;
  try {
    return await eventually(
      `nodedisks ${ours.join(' ')} = kubectl ${theirs.join(' ')}`,
      async () => {
        last = { ours: await nd(...ours), theirs: await kubectl(theirs) };
        return last.ours.stdout === last.theirs.stdout && last.ours.code === last.theirs.code ? last : undefined;
      },
      10_000,
    );
  } catch (err) {
    if (last) return last; // the assertions show the difference
    throw err;
  }
}

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-pclaim-'));
  programs.push(await startController(controlPlane(), { logDir: join(work, 'logs') }));
  await seedDisks(join(work, NODE), 2, 64 * MiB);
  programs.push(await startAgent(controlPlane(), { node: NODE, diskDir: join(work, NODE), logDir: join(work, 'logs'), rescanInterval: '1s' }));
  await eventually('2 Available disks', async () => (await nodeDisksFor(controlPlane().admin()).list()).items.filter((d) => d.status?.node?.phase === 'Available').length === 2);
  await namespace('pclaim-a');
  await namespace('pclaim-b');
});
test.afterEach.always((t) => {
  if (!t.passed) for (const p of programs) console.error(`----- ${p.name} -----\n${p.logs(4000)}`);
});
test.after.always(async () => {
  await Promise.all(programs.map((p) => p.stop()));
  if (work) await rm(work, { recursive: true, force: true });
});

test.serial('claim --wait returns once Bound and Ready and prints the node and path; status claim/NAME says where the disk is and points pods to a PVC, no hostPath', async (t) => {
  const r = await nd('claim', 'db', '-n', 'pclaim-a', '--node', NODE, '--min-capacity', '32Mi', '--wait', '--timeout', '60s');
  t.is(r.code, 0, r.stderr);
  const bound = await claims().get('pclaim-a', 'db');
  t.like(bound.status, { phase: 'Bound', nodeName: NODE, diskName: nodeDiskName(NODE, 'disk1') });
  t.true(bound.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
  t.deepEqual(bound.spec, { nodeName: NODE, minCapacity: '32Mi', reclaimPolicy: 'Delete' }); // Delete: the schema's default
  t.is(r.stdout, `${ref('db')} created\n${ref('db')} bound to ${bound.status?.diskName}: node ${NODE}, path ${bound.status?.path}\n`);
  t.is(r.stderr, '');

  const s = await nd('status', 'claim/db', '-n', 'pclaim-a');
  t.is(s.code, 0, s.stderr);
  t.regex(
    s.stdout,
    new RegExp(`^db \\(namespace pclaim-a\\)\\n  Asks: +node ${NODE}, at least 32Mi, reclaim policy Delete\\n  Status: +Bound to ${bound.status?.diskName} on node ${NODE}, Ready\\n`),
  );
  // No pod snippet any more (a hostPath pod is refused where baseline is enforced): the disk's place, then
  // a PVC of StorageClass nodedisks for pods, which the API server takes as it is.
  t.notRegex(s.stdout, /hostPath|nodeAffinity|Pod spec/);
  t.true(s.stdout.includes(`  Path:     ${bound.status?.path}\n\n# Pods do not mount a claim's disk.`), s.stdout);
  const pointer = s.stdout.slice(s.stdout.indexOf("# Pods do not mount a claim's disk."));
  const pvc = load(pointer) as { kind: string; metadata: { namespace: string }; spec: { storageClassName: string; resources: { requests: { storage: string } } } };
  t.like(pvc, { kind: 'PersistentVolumeClaim', metadata: { namespace: 'pclaim-a' }, spec: { storageClassName: 'nodedisks', resources: { requests: { storage: '32Mi' } } } });
  const pvcFile = join(work, 'pvc.yaml');
  writeFileSync(pvcFile, pointer);
  const dry = await kubectl(['create', '--dry-run=server', '-f', pvcFile]);
  t.is(dry.code, 0, dry.stderr);
  t.is(dry.stdout, 'persistentvolumeclaim/data created (server dry run)\n');
});

test.serial("in a namespace that enforces baseline the API server takes a pod of the pointer's PVC and refuses the hostPath pod status used to print", async (t) => {
  await controlPlane().kubectl(controlPlane().admin(), ['create', 'namespace', 'pclaim-baseline']);
  await controlPlane().kubectl(controlPlane().admin(), ['label', 'namespace', 'pclaim-baseline', 'pod-security.kubernetes.io/enforce=baseline']);
  const bound = await claims().get('pclaim-a', 'db');
  t.is(bound.status?.phase, 'Bound');
  const pod = (volume: Record<string, unknown>) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'app', namespace: 'pclaim-baseline' },
    spec: { volumes: [{ name: 'data', ...volume }], containers: [{ name: 'app', image: 'busybox', volumeMounts: [{ name: 'data', mountPath: '/data' }] }] },
  });
  const dryRun = async (obj: unknown) => {
    const file = join(work, 'baseline.json');
    writeFileSync(file, JSON.stringify(obj));
    return kubectl(['create', '--dry-run=server', '-f', file]);
  };
  const withPvc = await dryRun(pod({ persistentVolumeClaim: { claimName: 'data' } }));
  t.is(withPvc.code, 0, withPvc.stderr);
  t.is(withPvc.stdout, 'pod/app created (server dry run)\n');
  const withHostPath = await dryRun(pod({ hostPath: { path: bound.status?.path, type: 'File' } }));
  t.not(withHostPath.code, 0, withHostPath.stdout);
  t.regex(withHostPath.stderr, /violates PodSecurity "baseline:latest": hostPath volumes \(volume "data"\)/);
});

test.serial('a claim that cannot fit: --wait times out with the Pending line; status claim/NAME says why, with every disk counted only for a reader of NodeDisks', async (t) => {
  const r = await nd('claim', 'big', '-n', 'pclaim-a', '--min-capacity', '1Gi', '--wait', '--timeout', '3s');
  t.is(r.code, 6, r.stdout);
  t.is(r.stdout, `${ref('big')} created\n`);
  const pending = await claims().get('pclaim-a', 'big');
  t.is(pending.status?.phase, 'Pending');
  t.is(pending.status?.message, 'no free disk of at least 1Gi');
  t.is(r.stderr, `error: timed out after 3s waiting for ${ref('big')} to bind: Pending: ${pending.status?.message}\nsee it with: kubectl nodedisks status claim/big -n pclaim-a\n`);
  const s = await nd('status', 'claim/big', '-n', 'pclaim-a');
  t.is(s.code, 0, s.stderr);
  // The admin may list NodeDisks: the count of every disk by why it does not fit, as the controller judges it.
  t.is(
    s.stdout,
    'big (namespace pclaim-a)\n  Asks:   at least 1Gi, reclaim policy Delete\n  Status: Pending: no free disk of at least 1Gi\n  Disks:  0/2 disks fit: 1 reserved, 1 smaller than 1Gi\n',
  );
  // A team (the built-in edit in its namespace) may not: its own line only, and no error.
  const team = await controlPlane().namespacedUser('pclaim-a', 'dev');
  const mine = await kubectl(['nodedisks', 'status', 'claim/big', '-n', 'pclaim-a'], team.kubeconfig);
  t.is(mine.code, 0, mine.stderr);
  t.is(mine.stdout, 'big (namespace pclaim-a)\n  Asks:   at least 1Gi, reclaim policy Delete\n  Status: Pending: no free disk of at least 1Gi\n');
  t.is(mine.stderr, '');
  const missing = await nd('status', 'ndc/nope', '-n', 'pclaim-a');
  t.is(missing.code, 3);
  t.regex(missing.stderr, /nodediskclaim\.localtest\.example\.com "nope" not found in namespace pclaim-a/);
});

test.serial('claims prints what kubectl get ndc prints: the table, -o wide, -A, -o name', async (t) => {
  await claims().create(
    { apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDiskClaim', metadata: { name: 'other', namespace: 'pclaim-b' }, spec: { diskName: 'no-such-disk' } } as NodeDiskClaim,
    { fieldManager: 'test' },
  );
  await eventually('pclaim-b/other Pending', async () => (await claims().get('pclaim-b', 'other')).status?.phase === 'Pending');
  for (const [ours, theirs] of [
    [
      ['claims', '-n', 'pclaim-a'],
      ['get', 'ndc', '-n', 'pclaim-a'],
    ],
    [
      ['claims', '-n', 'pclaim-a', '-o', 'wide'],
      ['get', 'ndc', '-n', 'pclaim-a', '-o', 'wide'],
    ],
    [
      ['claims', '-A'],
      ['get', 'ndc', '-A'],
    ],
    [
      ['claims', '-A', '-o', 'wide'],
      ['get', 'ndc', '-A', '-o', 'wide'],
    ],
    [
      ['claims', '-n', 'pclaim-b', '-o', 'name'],
      ['get', 'ndc', '-n', 'pclaim-b', '-o', 'name'],
    ],
    [
      ['claims', '-n', 'pclaim-a', '--no-headers'],
      ['get', 'ndc', '-n', 'pclaim-a', '--no-headers'],
    ],
    [
      ['claims', '-n', 'pclaim-empty'],
      ['get', 'ndc', '-n', 'pclaim-empty'],
    ],
  ] as [string[], string[]][]) {
    const r = await sameAsKubectl(ours, theirs);
    t.is(r.ours.stdout, r.theirs.stdout, ours.join(' '));
    t.is(r.ours.code, r.theirs.code, ours.join(' '));
    t.is(r.ours.stderr, r.theirs.stderr, ours.join(' '));
  }
  const table = await nd('claims', '-A', '-o', 'wide');
  t.regex(table.stdout, /^NAMESPACE +NAME +STATUS +DISK +NODE +CAPACITY +AGE +MESSAGE\n/);
  t.regex(table.stdout, new RegExp(`\\npclaim-a +db +Bound +${nodeDiskName(NODE, 'disk1')} +${NODE} +67108864 +\\d+s +\\n`));
  const json = await nd('claims', '-n', 'pclaim-b', '-o', 'json');
  t.deepEqual(
    (JSON.parse(json.stdout) as { items: NodeDiskClaim[] }).items.map((c) => c.metadata.name),
    ['other'],
  );
});

test.serial('-n defaults to the kubeconfig context namespace, as kubectl picks it', async (t) => {
  const kubeconfig = join(work, 'kubeconfig-ns');
  copyFileSync(controlPlane().admin().kubeconfig, kubeconfig);
  t.is((await kubectl(['config', 'set-context', '--current', '--namespace=pclaim-b'], kubeconfig)).code, 0);
  const r = await kubectl(['nodedisks', 'claim', 'ctx', '--disk', 'no-such-disk'], kubeconfig);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, `${ref('ctx')} created\n`);
  t.true(await exists('pclaim-b', 'ctx'));
  t.false(await exists('default', 'ctx'));
  const list = await kubectl(['nodedisks', 'claims', '-o', 'name'], kubeconfig);
  t.is(list.stdout, `${ref('ctx')}\n${ref('other')}\n`);
});

test.serial('--dry-run=client and --dry-run=server create nothing', async (t) => {
  const client = await nd('claim', 'dry', '-n', 'pclaim-a', '--min-capacity', '32Mi', '--dry-run=client');
  t.is(client.code, 0, client.stderr);
  t.is(client.stdout, `${ref('dry')} created (dry run)\n`);
  const server = await nd('claim', 'dry', '-n', 'pclaim-a', '--min-capacity', '32Mi', '--dry-run=server', '-o', 'json');
  t.is(server.code, 0, server.stderr);
  const answer = JSON.parse(server.stdout) as NodeDiskClaim;
  t.like(answer, { metadata: { name: 'dry', namespace: 'pclaim-a' }, spec: { minCapacity: '32Mi' } });
  t.truthy(answer.metadata.uid, 'the server answered');
  const named = await nd('claim', 'dry', '-n', 'pclaim-a', '--dry-run=server');
  t.is(named.stdout, `${ref('dry')} created (server dry run)\n`);
  // The server validates a dry run as it would the real create.
  const bad = await nd('claim', 'dry', '-n', 'no-such-namespace', '--dry-run=server');
  t.not(bad.code, 0);
  t.regex(bad.stderr, /namespaces "no-such-namespace" not found/);
  t.false(await exists('pclaim-a', 'dry'));
});

test.serial('usage errors exit 2 and name the flag, before any request', async (t) => {
  for (const [args, message] of [
    [['claim', 'x', '--min-capacity', 'lots'], /--min-capacity must be a positive quantity/],
    [['claim', 'x', '--reclaim-policy', 'Keep'], /--reclaim-policy must be Delete or Retain, got "Keep"/],
    [['claim', 'x', '-l', 'a in (b'], /-l\/--selector "a in \(b": cannot read/],
    [['claim', 'x', '-o', 'wide'], /-o\/--output for claim is name, yaml or json, got "wide"/],
    [['claim', 'x', '--dry-run=maybe'], /--dry-run must be none, client or server/],
    [['claim', 'x', '--wait', '--timeout', 'soon'], /--timeout/],
    [['claim', 'x', '--wait', '--dry-run=client'], /--wait cannot be used with --dry-run/],
    [['claim', 'Bad_Name'], /invalid claim name "Bad_Name"/],
    [['claim'], /claim needs NAME/],
    [['claims', '-o', 'jsonpath={.items}'], /-o\/--output for claims is wide, name, yaml or json/],
    [['status', 'claim/db', 'node-disk-x'], /status takes NodeDisk names or claim\/NAME, not both/],
  ] as [string[], RegExp][]) {
    const r = await nd(...args);
    t.is(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    t.regex(r.stderr, message, args.join(' '));
    t.is(r.stdout, '');
  }
  t.false(await exists('default', 'x'));
});
