// kubectl nodedisks error paths against nock: each API failure becomes a message that names the cause
// and the fix, with its own exit code.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import nock from 'nock';
import { NODEDISKS_PATH } from '../../api/client.ts';
import { run } from '../../plugin/cli.ts';
import type { Io } from '../../plugin/context.ts';

const SERVER = 'https://k8s.plugin.test:6443';
const savedKubeconfig = process.env.KUBECONFIG;
const temp = mkdtempSync(join(tmpdir(), 'plugin-unit-'));

test.before(() => {
  nock.disableNetConnect();
  // No kubeconfig on this machine may leak into the tests: --server and --token say everything.
  process.env.KUBECONFIG = join(temp, 'none');
});
test.afterEach.always(() => nock.cleanAll());
test.after.always(() => {
  nock.enableNetConnect();
  rmSync(temp, { recursive: true, force: true });
  if (savedKubeconfig === undefined) delete process.env.KUBECONFIG;
  else process.env.KUBECONFIG = savedKubeconfig;
});

async function plugin(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: Io = { out: (s) => void (out += s), err: (s) => void (err += s), progress: () => {} };
  const code = await run([...args, '--server', SERVER, '--token', 'tok'], io);
  return { code, out, err };
}

const status = (code: number, reason: string, message: string, details?: object) => ({
  kind: 'Status',
  apiVersion: 'v1',
  status: 'Failure',
  code,
  reason,
  message,
  ...(details ? { details } : {}),
});
const disk = (name: string, extra: object = {}) => ({
  apiVersion: 'localtest.example.com/v1alpha1',
  kind: 'NodeDisk',
  metadata: { name, resourceVersion: '5', generation: 1, managedFields: [] },
  spec: { nodeName: 'node-a', diskID: 'disk1', path: '/d/disk1.img', desired: { state: 'Available' } },
  status: { node: { phase: 'Available', capacityBytes: 1024 } },
  ...extra,
});
/** The API server's Table of NodeDisks without objects, what list asks for the default table and -o name. */
const table = (names: string[], cont?: string) => ({
  kind: 'Table',
  apiVersion: 'meta.k8s.io/v1',
  metadata: { resourceVersion: '9', ...(cont ? { continue: cont } : {}) },
  columnDefinitions: [
    { name: 'Name', type: 'string', priority: 0 },
    { name: 'Node', type: 'string', priority: 0 },
  ],
  rows: names.map((n) => ({ cells: [n, 'node-a'] })),
});
const list = (items: object[], cont?: string) => ({
  apiVersion: 'localtest.example.com/v1alpha1',
  kind: 'NodeDiskList',
  metadata: { resourceVersion: '9', ...(cont ? { continue: cont } : {}) },
  items,
});

test.serial('403: exit 4, the verb and resource, and which role to ask for', async (t) => {
  nock(SERVER)
    .get(NODEDISKS_PATH)
    .query(true)
    .reply(403, status(403, 'Forbidden', 'nodedisks.localtest.example.com is forbidden: User "bob" cannot list resource "nodedisks" in API group "localtest.example.com" at the cluster scope'));
  const r = await plugin('list');
  t.is(r.code, 4);
  t.regex(r.err, /User "bob" cannot list resource "nodedisks"/);
  t.regex(r.err, /nodedisks-viewer \(read\), nodedisks-editor \(reserve\/release\) or nodedisks-pruner \(prune\)/);
});

test.serial('a server message quoted in an error reaches the terminal without its control characters', async (t) => {
  nock(SERVER)
    .get(NODEDISKS_PATH)
    .query(true)
    .reply(500, status(500, 'InternalError', 'boom\x1b]52;c;ZXZpbA==\x07\x1b[2K\rall fine'));
  const r = await plugin('list');
  t.is(r.code, 1);
  t.is(r.err, 'error: the API server is busy or failing (500): boom^[]52;c;ZXZpbA==\\x07^[[2K\\rall fine; try again\n');
});

test.serial('no CRD installed: exit 3 and how to install it', async (t) => {
  nock(SERVER)
    .get(NODEDISKS_PATH)
    .query(true)
    .reply(404, status(404, 'NotFound', 'the server could not find the requested resource'));
  const r = await plugin('list');
  t.is(r.code, 3);
  t.regex(r.err, /the NodeDisk API \(nodedisks\.localtest\.example\.com\) is not installed in this cluster; install it with: kubectl apply --server-side -k kustomize\/crd/);
});

test.serial('410 on a continue token: no half list (kubectl prints one table of all pages), and the message says to run again', async (t) => {
  nock(SERVER)
    .get(NODEDISKS_PATH)
    .query({ limit: '1', includeObject: 'None' })
    .reply(200, table(['node-disk-node-a-disk1'], 'c1'))
    .get(NODEDISKS_PATH)
    .query({ limit: '1', continue: 'c1', includeObject: 'None' })
    .reply(410, status(410, 'Expired', 'The provided continue parameter is too old'));
  const r = await plugin('list', '--chunk-size', '1');
  t.is(r.code, 1);
  t.is(r.out, '');
  t.regex(r.err, /continue token expired: The provided continue parameter is too old\); run the command again, or raise --chunk-size/);
});

test.serial('429 with Retry-After: the read is retried and succeeds', async (t) => {
  nock(SERVER)
    .get(NODEDISKS_PATH)
    .query(true)
    .reply(429, status(429, 'TooManyRequests', 'slow down'), { 'Retry-After': '1' })
    .get(NODEDISKS_PATH)
    .query(true)
    .reply(200, table(['node-disk-node-a-disk1']));
  const r = await plugin('list', '-o', 'name');
  t.is(r.code, 0, r.err);
  t.is(r.out, 'nodedisk.localtest.example.com/node-disk-node-a-disk1\n');
});

test.serial('a request that times out: exit 6 and how to wait longer', async (t) => {
  nock(SERVER).get(NODEDISKS_PATH).query(true).delay(2000).reply(200, list([]));
  const r = await plugin('list', '--request-timeout', '100ms');
  t.is(r.code, 6);
  t.regex(r.err, /request timed out after 100 ms; raise --request-timeout/);
});

test.serial('409 from git on reserve: exit 5 and the git route', async (t) => {
  const name = 'node-disk-node-a-disk1';
  nock(SERVER)
    .get(`${NODEDISKS_PATH}/${name}`)
    .reply(200, disk(name))
    .patch(`${NODEDISKS_PATH}/${name}`)
    .query({ fieldManager: 'kubectl-nodedisks' })
    .reply(
      409,
      status(409, 'Conflict', 'Apply failed with 1 conflict: conflict with "kustomize-controller": .spec.desired.state', {
        causes: [{ reason: 'FieldManagerConflict', message: 'conflict with "kustomize-controller"', field: '.spec.desired.state' }],
      }),
    );
  const r = await plugin('reserve', name, '--owner', 'alice');
  t.is(r.code, 5);
  t.regex(r.err, /managed from git by kustomize-controller: change them in your GitOps repository/);
});

test.serial('409 only with the agent (the defaulted Available): forced, guarded by the resourceVersion', async (t) => {
  const name = 'node-disk-node-a-disk1';
  let forcedBody: { metadata?: { resourceVersion?: string } } | undefined;
  nock(SERVER)
    .get(`${NODEDISKS_PATH}/${name}`)
    .reply(200, disk(name))
    .patch(`${NODEDISKS_PATH}/${name}`)
    .query({ fieldManager: 'kubectl-nodedisks' })
    .reply(409, status(409, 'Conflict', 'Apply failed with 1 conflict: conflict with "node-disks-agent": .spec.desired.state'))
    .patch(`${NODEDISKS_PATH}/${name}`, (body: { metadata?: { resourceVersion?: string } }) => {
      forcedBody = body;
      return true;
    })
    .query({ fieldManager: 'kubectl-nodedisks', force: 'true' })
    .reply(200, disk(name));
  const r = await plugin('reserve', name, '--owner', 'alice');
  t.is(r.code, 0, r.err);
  t.is(forcedBody?.metadata?.resourceVersion, '5');
});

test.serial('reserve --node loses the race for a disk (409 on its resourceVersion): re-reads the node and takes the next free disk', async (t) => {
  const free = (d: string) => disk(`node-disk-node-a-${d}`, { spec: { nodeName: 'node-a', diskID: d, path: `/d/${d}.img`, desired: { state: 'Available' } } });
  const taken = disk('node-disk-node-a-disk1', {
    metadata: { name: 'node-disk-node-a-disk1', resourceVersion: '6', generation: 2, managedFields: [] },
    spec: { nodeName: 'node-a', diskID: 'disk1', path: '/d/disk1.img', desired: { state: 'Reserved', owner: 'bob' } },
  });
  const writes: { name: string; force: boolean; resourceVersion?: string | undefined }[] = [];
  let forced = false;
  const forceOf = (q: Record<string, unknown>) => {
    forced = q.force === 'true';
    return true;
  };
  const record = (name: string) => (body: { metadata?: { resourceVersion?: string } }) => {
    writes.push({ name, force: forced, resourceVersion: body.metadata?.resourceVersion });
    return true;
  };
  nock(SERVER)
    .get(NODEDISKS_PATH)
    .query((q) => q.fieldSelector === 'spec.nodeName=node-a')
    .reply(200, list([free('disk1'), free('disk2')]))
    .patch(`${NODEDISKS_PATH}/node-disk-node-a-disk1`, record('disk1'))
    .query(forceOf)
    .reply(
      409,
      status(
        409,
        'Conflict',
        'Operation cannot be fulfilled on nodedisks.localtest.example.com "node-disk-node-a-disk1": the object has been modified; please apply your changes to the latest version and try again',
      ),
    )
    .get(NODEDISKS_PATH)
    .query((q) => q.fieldSelector === 'spec.nodeName=node-a')
    .reply(200, list([taken, free('disk2')]))
    .patch(`${NODEDISKS_PATH}/node-disk-node-a-disk2`, record('disk2'))
    .query(forceOf)
    .reply(200, free('disk2'));
  const r = await plugin('reserve', '--node', 'node-a', '--owner', 'alice');
  t.is(r.code, 0, r.err);
  t.is(r.out, 'nodedisk.localtest.example.com/node-disk-node-a-disk2 reserved for alice\n');
  t.deepEqual(
    writes,
    [
      { name: 'disk1', force: false, resourceVersion: '5' },
      { name: 'disk2', force: false, resourceVersion: '5' },
    ],
    "bob's disk is never written again, let alone forced",
  );
});

test.serial("reserve loses the race on its forced take-over of the agent's default: run again, never --force-conflicts", async (t) => {
  const name = 'node-disk-node-a-disk1';
  nock(SERVER)
    .get(`${NODEDISKS_PATH}/${name}`)
    .reply(200, disk(name))
    .patch(`${NODEDISKS_PATH}/${name}`)
    .query({ fieldManager: 'kubectl-nodedisks' })
    .reply(409, status(409, 'Conflict', 'Apply failed with 1 conflict: conflict with "node-disks-agent": .spec.desired.state'))
    .patch(`${NODEDISKS_PATH}/${name}`)
    .query({ fieldManager: 'kubectl-nodedisks', force: 'true' })
    .reply(
      409,
      status(
        409,
        'Conflict',
        `Operation cannot be fulfilled on nodedisks.localtest.example.com "${name}": the object has been modified; please apply your changes to the latest version and try again`,
      ),
    );
  const r = await plugin('reserve', name, '--owner', 'alice');
  t.is(r.code, 5);
  t.is(r.err, `error: ${name} changed while the command ran (someone else wrote it first); run the command again\n`);
});

test.serial('release loses a race: the JSON Patch test fails and nothing is overwritten', async (t) => {
  const name = 'node-disk-node-a-disk1';
  const reserved = disk(name, { spec: { nodeName: 'node-a', diskID: 'disk1', path: '/d/disk1.img', desired: { state: 'Reserved', owner: 'alice' } } });
  nock(SERVER)
    .get(`${NODEDISKS_PATH}/${name}`)
    .reply(200, reserved)
    .patch(`${NODEDISKS_PATH}/${name}`)
    .query(true)
    .reply(422, status(422, 'Invalid', 'the server rejected our request due to an error in our request: testing value /metadata/resourceVersion failed'));
  const r = await plugin('release', name, '--owner', 'alice');
  t.is(r.code, 5);
  t.regex(r.err, /changed while it was being released; run the command again/);
});

test.serial('usage errors: exit 2 with the fix', async (t) => {
  t.is((await plugin()).code, 2);
  const owner = await plugin('reserve', 'x', '--owner', 'auto');
  t.is(owner.code, 2);
  t.regex(owner.err, /--owner auto is reserved for the label policy/);
  const dry = await plugin('reserve', 'x', '--dry-run=maybe');
  t.is(dry.code, 2);
  t.regex(dry.err, /--dry-run must be none, client or server/);
  const out = await plugin('list', '-o', 'table');
  t.regex(out.err, /unknown output format "table"/);
  const waitFor = await plugin('wait', 'x', '--for', 'ready');
  t.is(waitFor.code, 2);
  t.regex(waitFor.err, /--for must be delete, create, condition=<Type>\[=<value>\], jsonpath=.{<path>}.\[=<value>\] or phase=<Phase>; got "ready"/);
});

test.serial('gitops refuses bad names and overlays with a namespace', async (t) => {
  const dir = mkdtempSync(join(temp, 'gitops-'));
  const bad = await plugin('gitops', 'reserve', '../etc/passwd', '--dir', dir);
  t.is(bad.code, 2);
  t.regex(bad.err, /"\.\.\/etc\/passwd" is not a NodeDisk name/);
  writeFileSync(join(dir, 'kustomization.yaml'), 'namespace: prod\nresources: []\n');
  const ns = await plugin('gitops', 'reserve', 'node-disk-a-b', '--dir', dir);
  t.is(ns.code, 2);
  t.regex(ns.err, /sets a namespace; NodeDisks are cluster-scoped/);
});

test.serial('status of an unknown disk: exit 3 and where to look', async (t) => {
  nock(SERVER)
    .get(`${NODEDISKS_PATH}/node-disk-x-y`)
    .reply(404, status(404, 'NotFound', 'nodedisks.localtest.example.com "node-disk-x-y" not found', { name: 'node-disk-x-y' }));
  const r = await plugin('status', 'node-disk-x-y');
  t.is(r.code, 3);
  t.regex(r.err, /"node-disk-x-y" not found; list disks with: kubectl nodedisks list/);
});

test.serial("wait lists, then follows the watch stream from the list's resourceVersion until the phase is reached", async (t) => {
  const name = 'node-disk-node-a-disk1';
  const reserved = disk(name, { metadata: { name, resourceVersion: '10', generation: 2 }, status: { node: { phase: 'Reserved' } } });
  nock(SERVER)
    .get(`${NODEDISKS_PATH}/${name}`)
    .reply(200, disk(name))
    .get(NODEDISKS_PATH)
    .query((q) => q.watch === undefined && q.fieldSelector === `metadata.name=${name}`)
    .reply(200, list([disk(name)]))
    // The list's resourceVersion (9), not the object's (5), which may have left the watch cache long ago.
    .get(NODEDISKS_PATH)
    .query((q) => q.watch === 'true' && q.resourceVersion === '9')
    .reply(200, `${JSON.stringify({ type: 'MODIFIED', object: disk('node-disk-other') })}\n${JSON.stringify({ type: 'MODIFIED', object: reserved })}\n`);
  const r = await plugin('wait', name, '--for=phase=Reserved', '--timeout=5s');
  t.is(r.code, 0, r.err);
  t.is(r.out, `nodedisk.localtest.example.com/${name} condition met\n`);
});

test.serial('wait on a watch that keeps answering 410 Gone re-lists and backs off instead of flooding the API server', async (t) => {
  const name = 'node-disk-node-a-disk1';
  const watchVersions: string[] = [];
  let lists = 0;
  let listVersion = 9;
  const gone = JSON.stringify({ type: 'ERROR', object: status(410, 'Expired', 'too old resource version: 5 (100)') });
  nock(SERVER)
    .persist()
    .get(`${NODEDISKS_PATH}/${name}`)
    .reply(200, disk(name))
    .get(NODEDISKS_PATH)
    .query((q) => q.watch === undefined)
    .reply(() => {
      lists++;
      return [200, { ...list([disk(name)]), metadata: { resourceVersion: String(listVersion++) } }];
    })
    .get(NODEDISKS_PATH)
    .query((q) => {
      if (q.watch !== 'true') return false;
      watchVersions.push(String(q.resourceVersion));
      return true;
    })
    .reply(200, `${gone}\n`);
  const r = await plugin('wait', name, '--for=phase=Reserved', '--timeout=3s');
  t.is(r.code, 6, r.err);
  t.regex(r.err, /timed out after 3s waiting for phase Reserved/);
  t.true(watchVersions.length >= 2 && watchVersions.length <= 8, `${watchVersions.length} watches in 3 s: ${watchVersions.join(',')}`);
  t.false(watchVersions.includes('5'), "never from the object's own resourceVersion");
  t.is(new Set(watchVersions).size, watchVersions.length, 'each watch starts from a fresh list');
  t.is(lists, watchVersions.length, 'one list before each watch');
});

test.serial('wait on a watch the server refuses: exit 4 with the RBAC message', async (t) => {
  const name = 'node-disk-node-a-disk1';
  nock(SERVER)
    .get(`${NODEDISKS_PATH}/${name}`)
    .reply(200, disk(name))
    .get(NODEDISKS_PATH)
    .query((q) => q.watch === undefined)
    .reply(200, list([disk(name)]))
    .get(NODEDISKS_PATH)
    .query((q) => q.watch === 'true')
    .reply(403, status(403, 'Forbidden', 'nodedisks.localtest.example.com is forbidden: User "bob" cannot watch resource "nodedisks"'));
  const r = await plugin('wait', name, '--for=phase=Reserved', '--timeout=5s');
  t.is(r.code, 4);
  t.regex(r.err, /cannot watch resource "nodedisks"/);
});
