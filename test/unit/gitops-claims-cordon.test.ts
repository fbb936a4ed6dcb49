// `kubectl nodedisks gitops claim|unclaim|cordon|uncordon`: the files they write and edit, in a temp dir
// with --offline where a disk is named (no cluster is involved). A claim's file is deterministic (sorted
// selector, no timestamps), edited in place, refused where the API server would refuse it (names, spec,
// an immutable field changed), never written through a link; unclaim removes the file and its entry and
// keeps every other byte; cordon writes only its label, next to a reservation of the same disk.
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { nodeDiskName } from '../../api/names.ts';
import { run } from '../../plugin/cli.ts';
import type { Io } from '../../plugin/context.ts';
import { addResources, removeResources } from '../../plugin/gitops/files.ts';

const DISK = nodeDiskName('node-c1', 'disk1');
const temp = mkdtempSync(join(tmpdir(), 'gitops-claims-'));
let dirs = 0;
test.after.always(() => rmSync(temp, { recursive: true, force: true }));
const fresh = (): string => {
  const d = join(temp, `t${dirs++}`);
  mkdirSync(d);
  return d;
};

async function gitops(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: Io = { out: (s) => void (out += s), err: (s) => void (err += s), progress: () => {} };
  const code = await run(['gitops', ...args], io);
  return { code, out, err };
}
const read = (dir: string, file: string) => readFileSync(join(dir, file), 'utf8');
const CLAIM_FILE = 'nodediskclaim.team-a.db.yaml';

test('claim writes one sorted claim whatever the order of -l, and the same run again changes no byte', async (t) => {
  const a = fresh();
  const b = fresh();
  const r = await gitops('claim', 'db', '-n', 'team-a', '--dir', a, '--node', 'node-c1', '--min-capacity', '32Mi', '-l', 'z=1,tier in (slow,fast),a=2', '--reclaim-policy', 'Retain');
  t.is(r.code, 0, r.err);
  t.is(r.out, `${join(a, CLAIM_FILE)}\n`);
  // --offline is accepted and changes nothing: a claim never asks the cluster.
  t.is(
    (await gitops('claim', 'db', '-n', 'team-a', '--dir', b, '--reclaim-policy', 'Retain', '-l', 'a=2,tier in (fast,slow),z=1', '--min-capacity', '32Mi', '--node', 'node-c1', '--offline')).code,
    0,
  );
  t.is(read(a, CLAIM_FILE), read(b, CLAIM_FILE));
  t.is(
    read(a, CLAIM_FILE),
    [
      '# Written by `kubectl nodedisks gitops claim`. The controller binds this claim to a free disk that fits; removing it (gitops unclaim, then a sync that prunes) releases the disk.',
      'apiVersion: localtest.example.com/v1alpha1',
      'kind: NodeDiskClaim',
      'metadata:',
      '  name: db',
      '  namespace: team-a',
      'spec:',
      '  nodeName: node-c1',
      '  minCapacity: 32Mi',
      '  selector:',
      '    matchLabels:',
      '      a: "2"',
      '      z: "1"',
      '    matchExpressions:',
      '      - key: tier',
      '        operator: In',
      '        values:',
      '          - fast',
      '          - slow',
      '  reclaimPolicy: Retain',
      '',
    ].join('\n'),
  );
  t.is(read(a, 'kustomization.yaml'), `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ${CLAIM_FILE}\n`);
  const before = read(a, CLAIM_FILE);
  t.is((await gitops('claim', 'db', '-n', 'team-a', '--dir', a, '--node', 'node-c1', '--min-capacity', '32Mi', '-l', 'a=2,z=1,tier in (fast,slow)', '--reclaim-policy', 'Retain')).code, 0);
  t.is(read(a, CLAIM_FILE), before);
});

test('an existing claim file is edited in place: comments and labels stay; an immutable field, reclaimPolicy included, may not change', async (t) => {
  const dir = fresh();
  t.is((await gitops('claim', 'db', '-n', 'team-a', '--dir', dir, '--min-capacity', '32Mi', '--reclaim-policy', 'Retain')).code, 0);
  const edited = read(dir, CLAIM_FILE).replace('  namespace: team-a\n', "  namespace: team-a\n  labels:\n    app: 'postgres' # the team's label\n");
  writeFileSync(join(dir, CLAIM_FILE), edited);
  t.is((await gitops('claim', 'db', '-n', 'team-a', '--dir', dir, '--min-capacity', '32Mi', '--reclaim-policy', 'Retain')).code, 0);
  t.is(read(dir, CLAIM_FILE), edited);
  // Retain to Delete (the flag left out means the default): a claim that could change it could be
  // switched to Retain before its deletion, keeping its disk past the namespace's limit.
  const policy = await gitops('claim', 'db', '-n', 'team-a', '--dir', dir, '--min-capacity', '32Mi');
  t.is(policy.code, 2);
  t.regex(policy.err, /already claims team-a\/db with another spec\.reclaimPolicy, which the API server keeps as created/);

  const changed = await gitops('claim', 'db', '-n', 'team-a', '--dir', dir, '--min-capacity', '64Mi', '--node', 'node-c1', '--reclaim-policy', 'Retain');
  t.is(changed.code, 2);
  t.is(
    changed.err,
    `error: ${join(dir, CLAIM_FILE)} already claims team-a/db with another spec.nodeName, spec.minCapacity, which the API server keeps as created: write a claim under another name (and gitops unclaim this one), or edit the file yourself if the claim was never synced; nothing was written\n`,
  );
  t.is(read(dir, CLAIM_FILE), edited);
});

test('claim refuses, before writing, what the API server or the claim command would refuse', async (t) => {
  const cases: [string[], RegExp][] = [
    [['claim', 'db', '--dir'], /gitops claim needs -n\/--namespace: the claim's namespace is written into the file, so it is not taken from the kubeconfig/],
    [['claim', 'db', '-n', 'Team_A', '--dir'], /-n "Team_A" is not a namespace name \(a DNS label/],
    [['claim', 'Db', '-n', 'team-a', '--dir'], /invalid claim name "Db": a DNS subdomain of at most 183 characters/],
    [['claim', 'a'.repeat(184), '-n', 'team-a', '--dir'], /invalid claim name "a{184}": a DNS subdomain of at most 183 characters/],
    [['claim', 'db', 'web', '-n', 'team-a', '--dir'], /gitops claim takes one claim name, got 2/],
    [['claim', 'db', '-n', 'team-a', '--min-capacity=-1Mi', '--dir'], /--min-capacity must be a positive quantity such as 32Mi or 1Gi, got "-1Mi"/],
    [['claim', 'db', '-n', 'team-a', '--node', 'Node_A', '--dir'], /--node: node name "Node_A" is not a DNS subdomain/],
    [['claim', 'db', '-n', 'team-a', '--disk', 'Disk 1', '--dir'], /--disk "Disk 1" is not a NodeDisk name/],
    [['claim', 'db', '-n', 'team-a', '-l', 'a in b', '--dir'], /-l\/--selector "a in b": cannot read/],
    [['claim', 'db', '-n', 'team-a', '--reclaim-policy', 'Recycle', '--dir'], /--reclaim-policy must be Delete or Retain, got "Recycle"/],
    [['claim', 'db', '-n', 'team-a', '--owner', 'bob', '--dir'], /--owner is not a flag of gitops claim \(it is one of gitops reserve, release\)/],
    [['reserve', DISK, '-n', 'team-a', '--offline', '--dir'], /--namespace is not a flag of gitops reserve/],
    [['cordon', DISK, '--min-capacity', '1Mi', '--offline', '--dir'], /--min-capacity is not a flag of gitops cordon/],
    [['cordon', '--node', 'node-c1', '--offline', '--dir'], /--node and -l select the disks in the cluster: name the disks instead to write the overlay --offline/],
  ];
  for (const [args, err] of cases) {
    const dir = fresh();
    const r = await gitops(...args, dir);
    t.is(r.code, 2, args.join(' '));
    t.regex(r.err, err, args.join(' '));
    t.deepEqual(readdirSync(dir), [], `nothing written for ${args.join(' ')}`);
  }
});

test('a kustomization that sets the claim namespace is fine, another namespace is refused; NodeDisks still refuse any', async (t) => {
  const dir = fresh();
  const k = 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: team-a\nresources:\n  - app.yaml\n';
  writeFileSync(join(dir, 'kustomization.yaml'), k);
  t.is((await gitops('claim', 'db', '-n', 'team-a', '--dir', dir)).code, 0);
  t.is(read(dir, 'kustomization.yaml'), `${k}  - ${CLAIM_FILE}\n`);
  const other = await gitops('claim', 'db', '-n', 'team-b', '--dir', dir);
  t.is(other.code, 2);
  t.regex(other.err, /sets namespace "team-a", which kustomize would give the claim instead of "team-b": pass -n team-a, or use another --dir/);
  const disk = await gitops('cordon', DISK, '--offline', '--dir', dir);
  t.is(disk.code, 2);
  t.regex(disk.err, /sets a namespace; NodeDisks are cluster-scoped/);
});

test('unclaim removes the file and its entry, keeping every other byte; again, it says there is nothing to remove', async (t) => {
  const dir = fresh();
  const k = `# the team's disks\nkind: Kustomization\napiVersion: kustomize.config.k8s.io/v1beta1\nresources:\n- app.yaml   # the app\n- "${CLAIM_FILE}" # our database disk\n- z.yaml\n`;
  writeFileSync(join(dir, 'kustomization.yaml'), k);
  t.is((await gitops('claim', 'db', '-n', 'team-a', '--dir', dir)).code, 0);
  const r = await gitops('unclaim', 'db', '-n', 'team-a', '--dir', dir);
  t.is(r.code, 0, r.err);
  t.is(r.out, `${join(dir, CLAIM_FILE)} removed\n`);
  t.false(existsSync(join(dir, CLAIM_FILE)));
  t.is(read(dir, 'kustomization.yaml'), k.replace(`- "${CLAIM_FILE}" # our database disk\n`, ''));
  const again = await gitops('unclaim', 'db', '-n', 'team-a', '--dir', dir);
  t.is(again.code, 0);
  t.is(again.out, '');
  t.is(again.err, `${CLAIM_FILE} is not in ${dir}: nothing to remove\n`);
});

test('resources entries are removed from flow lists and at the end of a file without a newline', (t) => {
  const p = 'kustomization.yaml';
  t.is(removeResources('resources: [a.yaml, b.yaml, c.yaml]\n', ['b.yaml'], p), 'resources: [a.yaml, c.yaml]\n');
  t.is(removeResources('resources: [a.yaml, "c.yaml"]\n', ['c.yaml'], p), 'resources: [a.yaml]\n');
  t.is(removeResources('resources: [c.yaml]\n', ['c.yaml'], p), 'resources: []\n');
  t.is(removeResources('resources:\n  - a.yaml\n  - c.yaml', ['c.yaml'], p), 'resources:\n  - a.yaml\n');
  t.is(removeResources('resources:\n  - a.yaml\n', ['x.yaml'], p), 'resources:\n  - a.yaml\n');
  t.is(removeResources('namespace: team-a\nresources: [a.yaml]\n', ['a.yaml'], p, 'team-a'), 'namespace: team-a\nresources: []\n');
  t.throws(() => addResources('namespace: team-a\nresources: []\n', ['a.yaml'], p), { message: /sets a namespace; NodeDisks are cluster-scoped/ });
});

test('claim and unclaim never write or remove through a link, nor remove a file that is not the claim', async (t) => {
  const dir = fresh();
  const outside = fresh();
  writeFileSync(join(outside, 'target.yaml'), 'kept: true\n');
  symlinkSync(join(outside, 'target.yaml'), join(dir, CLAIM_FILE));
  for (const action of ['claim', 'unclaim']) {
    const r = await gitops(action, 'db', '-n', 'team-a', '--dir', dir);
    t.is(r.code, 2, action);
    t.regex(r.err, /is a symbolic link \(to .*target\.yaml\); gitops writes only regular files inside --dir/, action);
    t.true(lstatSync(join(dir, CLAIM_FILE)).isSymbolicLink(), action);
    t.is(readFileSync(join(outside, 'target.yaml'), 'utf8'), 'kept: true\n', action);
  }
  const other = fresh();
  writeFileSync(join(other, CLAIM_FILE), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db\n');
  const r = await gitops('unclaim', 'db', '-n', 'team-a', '--dir', other);
  t.is(r.code, 2);
  t.regex(r.err, /exists and is not the overlay of NodeDiskClaim team-a\/db; move it away or remove it yourself; nothing was changed/);
  t.true(existsSync(join(other, CLAIM_FILE)));
});

test('cordon writes only its label, next to a reservation of the same disk; uncordon writes "false" and keeps the rest', async (t) => {
  const dir = fresh();
  t.is((await gitops('reserve', DISK, '--offline', '--dir', dir)).code, 0);
  const reserved = read(dir, `${DISK}.yaml`);
  const c = await gitops('cordon', DISK, '--offline', '--dir', dir);
  t.is(c.code, 0, c.err);
  t.is(c.out, `${join(dir, `${DISK}.yaml`)}\n`);
  const cordoned = read(dir, `${DISK}.yaml`);
  t.is(cordoned, reserved.replace('    localtest.example.com/auto-reserve: "true"\n', '    localtest.example.com/auto-reserve: "true"\n    localtest.example.com/cordoned: "true"\n'));
  t.is((await gitops('uncordon', DISK, '--offline', '--dir', dir)).code, 0);
  t.is(read(dir, `${DISK}.yaml`), cordoned.replace('cordoned: "true"', 'cordoned: "false"'));
  t.is((await gitops('release', DISK, '--offline', '--dir', dir)).code, 0);
  t.regex(read(dir, `${DISK}.yaml`), /auto-reserve: "false"\n {4}localtest\.example\.com\/cordoned: "false"\n/);

  const only = fresh();
  t.is((await gitops('cordon', DISK, '--offline', '--dir', only)).code, 0);
  t.is(
    read(only, `${DISK}.yaml`),
    `# Written by \`kubectl nodedisks gitops\`. Only the fields git owns; the NodeDisk itself is discovered by the node agent.\napiVersion: localtest.example.com/v1alpha1\nkind: NodeDisk\nmetadata:\n  name: ${DISK}\n  labels:\n    localtest.example.com/cordoned: "true"\n  annotations:\n    argocd.argoproj.io/sync-options: Prune=false,Delete=false,ServerSideApply=true\n    kustomize.toolkit.fluxcd.io/prune: disabled\n    kustomize.toolkit.fluxcd.io/ssa: Merge\n`,
  );
  t.false(read(only, `${DISK}.yaml`).includes('spec'), 'a label patch only: no spec.desired');
});
