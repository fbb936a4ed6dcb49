// Differential tests with kubectl as the oracle: the same arguments through `kubectl get nodedisks …`
// and `kubectl nodedisks list …` (the bundled plugin, found on PATH by the real kubectl), on the real
// API server, must print the same text. Only AGE values are masked (both sides), since the two runs
// happen a moment apart. Error cases compare stderr too, and success or failure of the exit code (the
// plugin keeps its documented distinct non-zero codes, e.g. 3 for not found, where kubectl exits 1).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { A1, A2, B1, B2, C10, MISSING, seed } from '../fixtures/parity-seeds.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const BIN = join(REPO_ROOT, 'dist', 'bin');
const work = mkdtempSync(join(tmpdir(), 'nodedisks-parity-'));

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

function kubectl(args: string[]): Promise<Result> {
  return new Promise((resolve) => {
    execFile('kubectl', args, { env: { ...process.env, PATH: `${BIN}:${process.env.PATH}`, KUBECONFIG: controlPlane().admin().kubeconfig }, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

const CC_FILE = join(work, 'columns.txt');
const JP_FILE = join(work, 'template.jsonpath');

test.serial.before(async () => {
  if (!existsSync(join(BIN, 'kubectl-nodedisks'))) throw new Error('run npm run build first (npm test does)');
  writeFileSync(CC_FILE, 'NAME          NODE           CAPACITY\n.metadata.name .spec.nodeName .status.node.capacityBytes\n');
  writeFileSync(JP_FILE, '{range .items[*]}{.metadata.name}{"\\t"}{.metadata.labels.localtest\\.example\\.com/disk}{"\\n"}{end}');
  await seed(controlPlane());
});
test.after.always(() => rmSync(work, { recursive: true, force: true }));

/** AGE values (45s, 3m20s, 5h, …) are the one thing the two runs may honestly disagree on. */
const maskAges = (text: string) => text.replace(/(?<=\s|^)\d+[smhdy](\d+[smh])?(?=\s|$)/gm, '<age>');

const CASES: [title: string, args: string[]][] = [
  ['the default table', []],
  ['-o wide (blank cells, raw capacity, AGE)', ['-o', 'wide']],
  ['-o name', ['-o', 'name']],
  ['-o json of everything is a List', ['-o', 'json']],
  ['-o yaml of everything is a List', ['-o', 'yaml']],
  ['-o json of one name is the object', [A1, '-o', 'json']],
  ['-o yaml of one name is the object', [A2, '-o', 'yaml']],
  ['-o json of several names is a List', [A1, B1, '-o', 'json']],
  ['-o yaml of several names is a List', [A2, C10, '-o', 'yaml']],
  ['one name as a table', [A1]],
  ['a missing name in the middle: the others printed, the error after', [A1, MISSING, B1]],
  ['a missing name in the middle, -o name', [A1, MISSING, B1, '-o', 'name']],
  ['only a missing name', [MISSING]],
  ['custom-columns with a filter', ['-o', 'custom-columns=NAME:.metadata.name,CAP:.status.node.capacityBytes,READY:.status.conditions[?(@.type=="Ready")].status']],
  ['custom-columns with an escaped dotted label', ['-o', 'custom-columns=NAME:.metadata.name,OWNER:.metadata.labels.team\\.example\\.com/owner,DISK:.spec.diskID']],
  ['custom-columns-file', ['-o', `custom-columns-file=${CC_FILE}`]],
  ['custom-columns with --no-headers', ['-o', 'custom-columns=N:.spec.nodeName,D:.spec.diskID', '--no-headers']],
  ['jsonpath: a wildcard', ['-o', 'jsonpath={.items[*].metadata.name}']],
  ['jsonpath: range and end with escapes', ['-o', 'jsonpath={range .items[*]}{.metadata.name}{"\\t"}{.status.node.phase}{"\\n"}{end}']],
  ['jsonpath: \\. escapes a dotted label', ['-o', 'jsonpath={range .items[*]}{.metadata.labels.localtest\\.example\\.com/node}{" "}{end}']],
  ['jsonpath: slice [0:2]', ['-o', 'jsonpath={.items[0:2].metadata.name}']],
  ['jsonpath: slice [-1:]', ['-o', 'jsonpath={.items[-1:].metadata.name}']],
  ['jsonpath: recursive descent', ['-o', 'jsonpath={..diskID}']],
  ['jsonpath: a filter on a string', ['-o', 'jsonpath={.items[?(@.status.node.phase=="Available")].metadata.name}']],
  ['jsonpath: a numeric filter', ['-o', 'jsonpath={.items[?(@.status.node.capacityBytes>100000000)].metadata.name}']],
  ['jsonpath: @ inside a range', ['-o', 'jsonpath={range .items[*]}{@.metadata.name}={@.spec.nodeName}{"\\n"}{end}']],
  ['jsonpath: a map value', ['-o', 'jsonpath={.items[1].metadata.labels}']],
  ['jsonpath of one name applies to the object', [B1, '-o', 'jsonpath={.metadata.name} {.status.node.capacityBytes}']],
  ['jsonpath-file', ['-o', `jsonpath-file=${JP_FILE}`]],
  ['--sort-by a string field', ['--sort-by', '.spec.diskID']],
  ['--sort-by a number', ['--sort-by=.status.node.capacityBytes', '-o', 'wide']],
  ['--sort-by with -o name', ['--sort-by', '{.spec.nodeName}', '-o', 'name']],
  ['--show-labels', ['--show-labels']],
  ['-L label columns', ['-L', 'localtest.example.com/node,tier']],
  ['-L twice with --show-labels and -o wide', ['-o', 'wide', '-L', 'tier', '--label-columns', 'team.example.com/owner', '--show-labels']],
  ['--no-headers', ['--no-headers']],
  ['--no-headers -o wide', ['--no-headers', '-o', 'wide']],
  ['-l set-based: in', ['-l', 'tier in (fast,slow)']],
  ['-l set-based: does not exist', ['-l', '!tier']],
  ['-l set-based: notin and exists', ['-l', 'localtest.example.com/node notin (node-a),team.example.com/owner']],
  ['-l with no match', ['-l', 'nothing=here']],
  ['-l with no match, -o json', ['-l', 'nothing=here', '-o', 'json']],
  ['--field-selector on the node', ['--field-selector', 'spec.nodeName=node-a']],
  ['--field-selector with a comma', ['--field-selector=spec.nodeName=node-b,status.node.phase=Available']],
  ['--field-selector !=', ['--field-selector', 'spec.desired.state!=Reserved', '-o', 'name']],
  ['--field-selector on diskID and metadata.name', ['--field-selector', `spec.diskID=disk1,metadata.name!=${A1}`]],
  ['--chunk-size 2: one table aligned across pages', ['--chunk-size', '2']],
  ['--chunk-size 1 -o wide', ['--chunk-size=1', '-o', 'wide']],
  // Pages read one by one, turned into text as they arrive, printed as one output (ADR 25).
  ['--chunk-size 2 -o name', ['--chunk-size', '2', '-o', 'name']],
  ['--chunk-size 2 -o json: one List', ['--chunk-size', '2', '-o', 'json']],
  ['--chunk-size 3 -o yaml: one List', ['--chunk-size', '3', '-o', 'yaml']],
  ['--chunk-size 2 custom-columns aligned across pages', ['--chunk-size', '2', '-o', 'custom-columns=NAME:.metadata.name,CAP:.status.node.capacityBytes']],
  ['--chunk-size 2 jsonpath range', ['--chunk-size', '2', '-o', 'jsonpath={range .items[*]}{.metadata.name}{"\\n"}{end}']],
  ['--chunk-size 2 jsonpath wildcard and filter', ['--chunk-size', '2', '-o', 'jsonpath={.items[*].spec.diskID}|{.items[?(@.status.node.phase=="Available")].metadata.name}']],
  ['--chunk-size 2 jsonpath slice over all pages', ['--chunk-size', '2', '-o', 'jsonpath={.items[-2:].metadata.name}']],
  ['--chunk-size 2 -L and --show-labels aligned across pages', ['--chunk-size', '2', '-L', 'tier', '--show-labels']],
  ['--chunk-size 2 with a selector matching nothing', ['--chunk-size', '2', '-l', 'tier=nonexistent']],
  ['--chunk-size 2 -o json of nothing', ['--chunk-size', '2', '-l', 'tier=nonexistent', '-o', 'json']],
  ['--chunk-size 2 -o yaml of nothing', ['--chunk-size', '2', '-l', 'tier=nonexistent', '-o', 'yaml']],
  ['-n on a cluster-scoped resource', ['-n', 'default']],
  ['-A on a cluster-scoped resource', ['-A']],
  ['--all-namespaces -o name', ['--all-namespaces', '-o', 'name']],
  ['--namespace with names', ['--namespace=kube-system', A1, A2]],
  ['-o=FORMAT, as pflag reads it, with a union [0,2]', ['-o=jsonpath={.items[0,2].metadata.name}']],
  ["jsonpath: ['key'] after a wildcard", ['-o', "jsonpath={.items[*].status.node['capacityBytes']}"]],
  ['jsonpath: an existence filter', ['-o', 'jsonpath={.items[?(@.status.node.capacityBytes)].metadata.name}']],
  ['jsonpath: [-1] and a slice with a step', ['-o', 'jsonpath={.items[-1].spec.diskID}{.items[0:6:2].spec.diskID}']],
  ['custom-columns: a wildcard and a map', ['-o', 'custom-columns=NAME:.metadata.name,TYPES:.status.conditions[*].type,ALL:.spec.desired']],
  ['--show-labels=true and --no-headers=false', ['--show-labels=true', '--no-headers=false']],
  ['a bad custom-columns spec', ['-o', 'custom-columns=BAD']],
  ['--sort-by a label, -o wide --no-headers', ['--sort-by=.metadata.labels.tier', '-o', 'wide', '--no-headers']],
  ['-l=SELECTOR, as pflag reads it', ['-l=tier']],
];

for (const [title, args] of CASES) {
  test.serial(`same as kubectl get: ${title}`, async (t) => {
    // A pair run just as an age crosses a width (9s → 10s) differs in alignment only: try once more.
    let diff: { kubectl: Result; plugin: Result } | undefined;
    for (let attempt = 0; attempt < 2; attempt++) {
      const want = await kubectl(['get', 'nodedisks', ...args]);
      const got = await kubectl(['nodedisks', 'list', ...args]);
      const same = maskAges(got.stdout) === maskAges(want.stdout) && got.stderr === want.stderr && (got.code === 0) === (want.code === 0);
      if (same) {
        t.pass();
        return;
      }
      diff = { kubectl: want, plugin: got };
    }
    t.is(maskAges(diff!.plugin.stdout), maskAges(diff!.kubectl.stdout), 'stdout');
    t.is(diff!.plugin.stderr, diff!.kubectl.stderr, 'stderr');
    t.is(diff!.plugin.code === 0, diff!.kubectl.code === 0, `exit codes: plugin ${diff!.plugin.code}, kubectl ${diff!.kubectl.code}`);
  });
}

test.serial('-o go-template answers with a clear error naming jsonpath and custom-columns', async (t) => {
  const r = await kubectl(['nodedisks', 'list', '-o', 'go-template={{.kind}}']);
  t.is(r.code, 2);
  t.regex(r.stderr, /go-template.*not supported.*jsonpath.*custom-columns/);
});

/** A long-running `kubectl …` whose output is collected as it comes. */
function follow(args: string[]): { child: ChildProcess; out: () => string } {
  const child = spawn('kubectl', args, { env: { ...process.env, PATH: `${BIN}:${process.env.PATH}`, KUBECONFIG: controlPlane().admin().kubeconfig } });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  return { child, out: () => out };
}

const lineCount = (text: string) => text.split('\n').length - 1;

const WATCHES: [title: string, args: string[]][] = [
  ['-w: the table, then a row per change, lined up', ['-w', '-o', 'wide']],
  ['--watch-only: a header and a row per change', ['--watch-only']],
  ['-w -o yaml of a selection: each object a document', ['-w', '-o', 'yaml', '-l', 'tier=slow']],
];

/** Watches of NodeDisks open right now (the API server's own gauge). */
async function openWatches(): Promise<number> {
  const metrics = await controlPlane().kubectl(controlPlane().admin(), ['get', '--raw', '/metrics']);
  return metrics
    .split('\n')
    .filter((l) => l.startsWith('apiserver_longrunning_requests{') && l.includes('resource="nodedisks"') && l.includes('verb="WATCH"'))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

for (const [title, args] of WATCHES) {
  test.serial(`same as kubectl get: ${title}`, async (t) => {
    const admin = nodeDisksFor(controlPlane().admin());
    const baseline = await openWatches();
    const want = follow(['get', 'nodedisks', ...args]);
    const got = follow(['nodedisks', 'list', ...args]);
    try {
      // Both are watching (so both have listed) before anything changes.
      await eventually('both watching', async () => (await openWatches()) >= baseline + 2, 30_000).catch((err: Error) => {
        throw new Error(`${err.message}\nkubectl printed:\n${want.out()}\nthe plugin printed:\n${got.out()}`);
      });
      const printed = [lineCount(want.out()), lineCount(got.out())] as const;
      // A longer owner than any before: the new row must widen its column the way kubectl does.
      await admin.apply(
        { apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDisk', metadata: { name: A2 }, spec: { desired: { state: 'Reserved', owner: 'an-owner-with-a-long-name' } } },
        { fieldManager: 'parity-test', force: true },
      );
      await admin.apply({ apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDisk', metadata: { name: B2, labels: { tier: 'slow' } } }, { fieldManager: 'parity-watch', force: true });
      // Both printed both changes and, a multi-line object being written in pieces, agree (or time runs out).
      await eventually(
        'both printed the changes',
        async () => lineCount(want.out()) > printed[0] + 1 && lineCount(got.out()) > printed[1] + 1 && maskAges(got.out()) === maskAges(want.out()),
        30_000,
      ).catch(() => undefined);
      t.true(lineCount(want.out()) > printed[0] + 1, `kubectl printed the changes: ${want.out()}`);
      t.is(maskAges(got.out()), maskAges(want.out()));
    } finally {
      want.child.kill();
      got.child.kill();
      await admin.apply(
        { apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDisk', metadata: { name: A2 }, spec: { desired: { state: 'Reserved', owner: 'alice' } } },
        { fieldManager: 'parity-test', force: true },
      );
      await admin.apply({ apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDisk', metadata: { name: B2 } }, { fieldManager: 'parity-watch', force: true });
      await eventually('both watches closed', async () => (await openWatches()) <= baseline, 30_000);
    }
  });
}
