// kubectl nodedisks cordon|uncordon and prune (ADR 35), through the real kubectl with the bundled plugin
// on PATH, against a real control plane with the real controller (node lifecycle on) and an agent.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { FIELD_MANAGER, FINALIZER, LABEL_AUTO_RESERVE, LABEL_CORDONED } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { seedDisks, startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { getOrGone as getOrGoneIn, type ReportedDisk, reportedNodeDisk } from '../harness/reported-disks.ts';
import { denied, nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const LIVE = 'node-c1';
let work = '';
const programs: Program[] = [];
const BIN = join(REPO_ROOT, 'dist', 'bin');

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
const nd = (...args: string[]) => kubectl(['nodedisks', ...args]);
const admin = () => nodeDisksFor(controlPlane().admin());
const getOrGone = (name: string) => getOrGoneIn(admin(), name);
const q = (name: string) => `nodedisk.localtest.example.com/${name}`;
const condition = (n: NodeDisk | undefined, type: string) => n?.status?.conditions?.find((c) => c.type === type);

test.serial.before(async () => {
  if (!existsSync(join(BIN, 'kubectl-nodedisks'))) throw new Error('run npm run build first (npm test does)');
  work = await mkdtemp(join(tmpdir(), 'nodedisks-plugin-lifecycle-'));
  const cp = controlPlane();
  programs.push(await startController(cp, { logDir: join(work, 'logs'), nodeLifecycle: true }));
  await seedDisks(join(work, LIVE), 3, 8 << 20);
  programs.push(await startAgent(cp, { node: LIVE, diskDir: join(work, LIVE), logDir: join(work, 'logs'), rescanInterval: '1s' }));
  await eventually('3 disks Ready', async () => {
    const items = (await admin().list({ fieldSelector: `spec.nodeName=${LIVE}` })).items;
    return items.length === 3 && items.every((i) => condition(i, 'Ready')?.status === 'True');
  });
});
test.afterEach.always((t) => {
  if (!t.passed) for (const p of programs) console.error(`----- ${p.name} -----\n${p.logs(4000)}`);
});
test.after.always(async () => {
  await Promise.all(programs.map((p) => p.stop()));
  await rm(work, { recursive: true, force: true });
});

test.serial('cordon takes a disk out of what is handed out, says so in list -o wide and status, and uncordon puts it back; quiet as kubectl cordon', async (t) => {
  const [d1, d2, d3] = [1, 2, 3].map((i) => nodeDiskName(LIVE, `disk${i}`)) as [string, string, string];
  const c = await nd('cordon', d1);
  t.is(c.code, 0, c.stderr);
  t.is(c.stdout, `${q(d1)} cordoned\n`);
  t.is(c.stderr, '');
  t.is((await admin().get(d1)).metadata.labels?.[LABEL_CORDONED], 'true');
  t.is((await nd('cordon', d1)).stdout, `${q(d1)} already cordoned\n`);
  t.is((await nd('uncordon', d2, '--dry-run=server')).stdout, `${q(d2)} already uncordoned (server dry run)\n`);
  // A bare --dry-run is read as kubectl reads it: a client dry run, with kubectl's own warning.
  const theirs = await kubectl(['delete', 'nodedisk', d3, '--dry-run']);
  t.is(theirs.stdout, `nodedisk.localtest.example.com "${d3}" deleted (dry run)\n`, theirs.stderr);
  t.regex(theirs.stderr, /--dry-run is deprecated and can be replaced with --dry-run=client\.\n/);
  const ours = await nd('cordon', d3, '--dry-run');
  t.is(ours.stdout, `${q(d3)} cordoned (dry run)\n`, ours.stderr);
  t.is(ours.stderr, 'Warning: --dry-run is deprecated and can be replaced with --dry-run=client.\n');
  t.is((await admin().get(d3)).metadata.labels?.[LABEL_CORDONED], undefined);

  const wide = await nd('list', '--node', LIVE, '-o', 'wide');
  t.regex(wide.stdout, /^NAME\s+NODE\s+DISK\s+DESIRED\s+PHASE\s+OWNER\s+CAPACITY\s+MEDIA\s+READY\s+CORDONED\s+AGE\n/);
  t.regex(wide.stdout, new RegExp(`\\n${d1}\\s+${LIVE}\\s+disk1\\s+Available\\s+Available\\s+\\d+\\s+True\\s+true\\s+\\S+\\n`));
  t.regex(wide.stdout, new RegExp(`\\n${d2}\\s+${LIVE}\\s+disk2\\s+Available\\s+Available\\s+\\d+\\s+True\\s+\\S+\\n`));
  t.regex((await nd('status', d1)).stdout, /Cordoned:\s+yes \(label localtest\.example\.com\/cordoned=true\): handed out by nobody; kubectl nodedisks uncordon puts it back/);
  t.regex((await nd('status', '--node', LIVE)).stdout, new RegExp(`\\n${LIVE}\\s+3\\s+0\\s+2\\s+0\\s+0\\s+1\\s+16Mi\\s`));

  // reserve --node hands out the first free disk by name: not the cordoned disk1, and says why.
  const r = await nd('reserve', '--node', LIVE, '--owner', 'team-a');
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, `${q(d2)} reserved for team-a\n`);
  // The label policy refuses a cordoned disk: Accepted False, Cordoned; nothing reserved.
  await admin().mergePatch(d1, { metadata: { labels: { [LABEL_AUTO_RESERVE]: 'true' } } }, { fieldManager: 'kubectl-label' });
  const refused = await eventually('the label refused', async () => {
    const n = await admin().get(d1);
    return condition(n, 'Accepted')?.reason === 'Cordoned' ? n : undefined;
  });
  t.is(condition(refused, 'Accepted')?.status, 'False');
  t.regex(condition(refused, 'Accepted')?.message ?? '', /^label localtest\.example\.com\/auto-reserve=true has no effect: the disk is cordoned/);
  t.is(refused.spec.desired?.state ?? 'Available', 'Available');

  // Cordoning every disk of the node leaves the reservation of disk2 as it is.
  const all = await nd('cordon', '--node', LIVE);
  t.is(all.stdout, `${q(d1)} already cordoned\n${q(d2)} cordoned\n${q(d3)} cordoned\n`);
  t.is((await admin().get(d2)).spec.desired?.owner, 'team-a');
  const none = await nd('reserve', '--node', LIVE, '--owner', 'team-b');
  t.is(none.code, 5, none.stdout);
  t.regex(none.stderr, /disk3 is cordoned \(label localtest\.example\.com\/cordoned=true; kubectl nodedisks uncordon puts it back\)/);

  const u = await nd('uncordon', d1);
  t.is(u.stdout, `${q(d1)} uncordoned\n`);
  t.is((await admin().get(d1)).metadata.labels?.[LABEL_CORDONED], undefined);
  await eventually('the label reserves it once uncordoned', async () => (await admin().get(d1)).spec.desired?.owner === 'auto');
  t.is((await nd('uncordon', '--node', LIVE)).stdout, `${q(d1)} already uncordoned\n${q(d2)} uncordoned\n${q(d3)} uncordoned\n`);
  t.is((await nd('cordon')).code, 2, 'no disk named: a usage error');
});

test.serial('the agent may not cordon or uncordon; a person may', async (t) => {
  const cp = controlPlane();
  const name = nodeDiskName(LIVE, 'disk3');
  const asAgent = nodeDisksFor(await cp.agent(LIVE));
  const err = await denied(t, asAgent.mergePatch(name, { metadata: { labels: { [LABEL_CORDONED]: 'true' } } }, { fieldManager: FIELD_MANAGER.agent }));
  t.is(err.statusCode, 403);
  t.regex(err.message, /the agent may set only the localtest\.example\.com\/node and localtest\.example\.com\/disk labels/);
  t.is((await nd('cordon', name)).code, 0);
  t.is((await nd('uncordon', name)).code, 0);
});

test.serial('prune lists the NodeDisks of gone nodes by default; --dry-run=none deletes the unreserved ones, reserved ones only with --reserved-by naming their owner', async (t) => {
  const cp = controlPlane();
  const gone = 'node-g1';
  await cp.ensureNode(gone);
  const make = (disk: string, o: ReportedDisk = {}) => reportedNodeDisk(admin(), gone, disk, o);
  const free = await make('disk1');
  const held = await make('disk2', { desired: { state: 'Reserved', owner: 'team-db' }, finalizers: [FINALIZER] });
  const guarded = await make('disk3', { finalizers: [FINALIZER] });
  const all = [free, held, guarded];
  await eventually('Ready while the Node exists', async () => (await Promise.all(all.map((n) => admin().get(n)))).every((n) => condition(n, 'Ready')?.reason === 'PhaseMatchesDesired'));
  t.regex((await nd('prune')).stderr, /No NodeDisks of gone nodes found/);
  await cp.kubectl(cp.admin(), ['delete', 'node', gone]);
  await eventually('NodeGone', async () => (await Promise.all(all.map((n) => admin().get(n)))).every((n) => condition(n, 'Ready')?.reason === 'NodeGone'));

  // status counts nothing of it as available, and says the node is gone.
  const summary = await nd('status', '--node', gone);
  t.regex(summary.stdout, /\nnode-g1\s+3\s+1\s+0\s+0\s+0\s+0\s+0\s+1Mi\s+never\s+GONE\n/);
  const listed = await nd('prune');
  t.is(listed.code, 0, listed.stderr);
  t.is(listed.stdout, `${q(free)} deleted (dry run)\n${q(guarded)} deleted (dry run)\n`);
  t.regex(listed.stderr, new RegExp(`${q(held)} kept: node node-g1 is gone, but it is reserved by team-db \\(add --reserved-by=team-db to remove it\\)`));
  t.regex(listed.stderr, /Nothing was deleted: run with --dry-run=none to delete these/);
  const bare = await nd('prune', '--dry-run');
  t.is(bare.code, 0, bare.stderr);
  t.is(bare.stdout, listed.stdout, 'a bare --dry-run is --dry-run=client, as in kubectl');
  t.true(bare.stderr.startsWith('Warning: --dry-run is deprecated and can be replaced with --dry-run=client.\n'), bare.stderr);
  t.is((await Promise.all(all.map(getOrGone))).filter(Boolean).length, 3, 'the default deletes nothing');
  t.is((await nd('prune', '--dry-run=server')).stdout, `${q(free)} deleted (server dry run)\n${q(guarded)} deleted (server dry run)\n`);
  t.truthy(await getOrGone(free));

  const pruned = await nd('prune', '--dry-run=none');
  t.is(pruned.code, 0, pruned.stderr);
  t.is(pruned.stdout, `${q(free)} deleted\n${q(guarded)} deleted\n`);
  await eventually('the unreserved ones gone, the finalized one too', async () => (await getOrGone(free)) === undefined && (await getOrGone(guarded)) === undefined);
  t.is((await admin().get(held)).spec.desired?.owner, 'team-db');
  t.regex((await nd('prune', '--dry-run=none', '--reserved-by', 'team-x')).stderr, /kept: node node-g1 is gone, but it is reserved by team-db/);
  t.truthy(await getOrGone(held));
  const dropped = await nd('prune', '--dry-run=none', '--reserved-by', 'team-db');
  t.is(dropped.stdout, `${q(held)} deleted: node node-g1 is gone; its reservation by team-db is dropped\n`);
  await eventually('the reserved one gone too', async () => (await getOrGone(held)) === undefined);
  // The live node's disks are none of prune's business.
  t.is((await admin().list({ fieldSelector: `spec.nodeName=${LIVE}` })).items.length, 3);
  t.is((await nd('prune', '--reserved-by=')).code, 2);
});
