// A team claims a disk on the local 3-node cluster with the install as deployed there (root only;
// `npm run test:e2e`): a user whose only rights are RoleBindings in the team's namespace to the built-in
// `edit` role (so nodedisks-claims-editor must be aggregated into it) creates a NodeDiskClaim with kubectl,
// it binds, and the marker appears on the claim's node; `kubectl nodedisks status claim/NAME` says where
// the disk is and points pods to a PVC (no hostPath pod); the user sees no other namespace's claims
// and cannot touch a NodeDisk; a reader bound to `view` reads the claim; deleting the claim has the agent
// wipe the disk, releases it and removes its marker. One cluster for the file; the tests run in order, each building on the last.
import test, { type ExecutionContext } from 'ava';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { load } from 'js-yaml';
import { readSysctls } from '../../hack/cluster/host.ts';
import { interruptAndCheckTornDown, onNode, until } from '../../hack/cluster/run.ts';
import { DISK_DIR, NODE_NAMES } from '../../hack/cluster/topology.ts';
import { clusterForFile, MINUTES, nodeDisksE2E, runPlugin } from './_nodedisks.ts';

const [M02, M03, M04] = NODE_NAMES as [string, string, string];
const TEAM = 'team-a';
const OTHER = 'team-b';
/** The team's member (RoleBinding to edit) and a reader (RoleBinding to view), impersonated by the admin. */
const MEMBER = 'alice';
const READER = 'victor';
const CLAIM = 'db';
const DISK_BYTES = 64 * 1024 * 1024;

// Read before any test is declared: AVA takes declarations only until the file's first pause.
const before = await readSysctls();
const cluster = clusterForFile(test);
const { dataDir, env } = cluster;
const kubeconfig = join(dataDir, 'kubeconfig');
const { k, ndName, allMarkers } = nodeDisksE2E(dataDir, env, cluster.kubectl);
/** kubectl as a person: the admin impersonates them, so RBAC and admission judge that person. */
const as = (user: string, args: string[]) => k([`--as=${user}`, ...args]);

/** The error of a command that must fail (the API server's words are in it), or a failed test. */
async function refused(t: ExecutionContext, what: Promise<string>): Promise<string> {
  try {
    const out = await what;
    t.fail(`expected a refusal, got: ${out}`);
    return '';
  } catch (err) {
    return (err as Error).message;
  }
}

/** `kubectl nodedisks …` as a person types it, KUBECONFIG set. */
const plugin = (args: string[]) => runPlugin(cluster.kubectl(), kubeconfig, args);

/** Creates what a manifest file says, as `user` (the admin when undefined), as a person keeps it in a file. */
async function createAs(user: string | undefined, name: string, manifest: unknown): Promise<string> {
  const file = join(dataDir, `${name}.json`);
  writeFileSync(file, JSON.stringify(manifest, null, 2));
  return user === undefined ? await k(['create', '-f', file]) : await as(user, ['create', '-f', file]);
}

const claimLine = (user: string, ns: string, name: string) =>
  as(user, ['-n', ns, 'get', 'ndc', name, '-o', 'jsonpath={.status.phase} {.status.diskName} {.status.nodeName} {.status.conditions[?(@.type=="Ready")].status} {.status.message}']);

let disk = '';
let path = '';

test.serial('a team member with only a RoleBinding to edit in the namespace claims a disk with kubectl: it binds and the marker is on that node only', async (t) => {
  t.timeout(8 * MINUTES);
  for (const ns of [TEAM, OTHER]) await k(['create', 'namespace', ns]);
  await k(['-n', TEAM, 'create', 'rolebinding', `${MEMBER}-edit`, '--clusterrole=edit', `--user=${MEMBER}`]);
  await k(['-n', TEAM, 'create', 'rolebinding', `${READER}-view`, '--clusterrole=view', `--user=${READER}`]);
  // The built-in roles carry the claims rules only through aggregation.
  t.is(await as(MEMBER, ['-n', TEAM, 'auth', 'can-i', 'create', 'nodediskclaims.localtest.example.com']), 'yes\n');
  t.is(await as(READER, ['-n', TEAM, 'auth', 'can-i', 'list', 'nodediskclaims.localtest.example.com']), 'yes\n');

  t.is(
    await createAs(MEMBER, CLAIM, {
      apiVersion: 'localtest.example.com/v1alpha1',
      kind: 'NodeDiskClaim',
      metadata: { name: CLAIM, namespace: TEAM },
      spec: { nodeName: M03, minCapacity: '32Mi' },
    }),
    `nodediskclaim.localtest.example.com/${CLAIM} created\n`,
  );
  const bound = await until(
    'the claim is Bound and Ready',
    2 * MINUTES,
    () => claimLine(MEMBER, TEAM, CLAIM),
    (l) => /^Bound \S+ \S+ True/.test(l),
  );
  [, disk = ''] = bound.split(' ');
  t.is(bound.split(' ')[2], M03, 'on the node it asked for');
  t.is(disk, ndName(M03, 'disk1'), 'the first free disk of that node by name');
  // The owner on the disk is the binding, as the admin sees it.
  t.is(await k(['get', 'nodedisk', disk, '-o', 'jsonpath={.spec.desired.state} {.spec.desired.owner} {.status.node.phase}']), `Reserved claim:${TEAM}/${CLAIM} Reserved`);
  t.deepEqual(await allMarkers(), { [M02]: [], [M03]: ['disk1.img.reserved'], [M04]: [] }, 'the marker is on the claim node only');
  path = await as(MEMBER, ['-n', TEAM, 'get', 'ndc', CLAIM, '-o', 'jsonpath={.status.path}']);
  t.is(path, `${DISK_DIR}/disk1.img`);
  t.is(await onNode(env, M03, ['stat', '-c', '%s', path]), `${DISK_BYTES}\n`);

  // The member's listing: the printer columns of a PVC.
  const table = await as(MEMBER, ['-n', TEAM, 'get', 'ndc']);
  t.regex(table, /^NAME\s+STATUS\s+DISK\s+NODE\s+CAPACITY\s+AGE\n/);
  t.regex(table, new RegExp(`^${CLAIM}\\s+Bound\\s+${disk}\\s+${M03}\\s+${DISK_BYTES}\\s+\\S+\\n$`, 'm'));
  // A reader bound to view reads it, and may not delete it.
  t.regex(await as(READER, ['-n', TEAM, 'get', 'ndc', CLAIM, '-o', 'name']), new RegExp(`^nodediskclaim.localtest.example.com/${CLAIM}\n$`));
  t.regex(await refused(t, as(READER, ['-n', TEAM, 'delete', 'ndc', CLAIM])), /forbidden: User "victor" cannot delete resource "nodediskclaims"/);

  // A second claim that cannot fit says what it asks, in one line, and nothing of the other disks.
  await createAs(MEMBER, 'big', { apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDiskClaim', metadata: { name: 'big', namespace: TEAM }, spec: { minCapacity: '1Gi' } });
  t.is(
    await until(
      'the big claim says why it is Pending',
      2 * MINUTES,
      () => as(MEMBER, ['-n', TEAM, 'get', 'ndc', 'big', '-o', 'jsonpath={.status.phase}: {.status.message}']),
      (l) => l.startsWith('Pending: '),
    ),
    'Pending: no free disk of at least 1Gi',
  );
  await as(MEMBER, ['-n', TEAM, 'delete', 'ndc', 'big', '--timeout=60s']);
});

test.serial("the member sees no claim of another namespace and cannot touch a NodeDisk; only the controller changes the claim's disk, not even an admin", async (t) => {
  t.timeout(3 * MINUTES);
  await createAs(undefined, 'other', {
    apiVersion: 'localtest.example.com/v1alpha1',
    kind: 'NodeDiskClaim',
    metadata: { name: 'other', namespace: OTHER },
    spec: { nodeName: 'no-such-node' },
  });
  t.regex(
    await refused(t, as(MEMBER, ['-n', OTHER, 'get', 'ndc', 'other'])),
    /forbidden: User "alice" cannot get resource "nodediskclaims" in API group "localtest.example.com" in the namespace "team-b"/,
  );
  t.regex(await refused(t, as(MEMBER, ['get', 'ndc', '-A'])), /forbidden: User "alice" cannot list resource "nodediskclaims" in API group "localtest.example.com" at the cluster scope/);
  t.regex(await refused(t, as(MEMBER, ['get', 'nodedisks'])), /forbidden: User "alice" cannot list resource "nodedisks"/);
  const release = JSON.stringify({ spec: { desired: { state: 'Available', owner: null } } });
  t.regex(
    await refused(t, as(MEMBER, ['patch', 'nodedisk', disk, '--type=merge', '-p', release])),
    /forbidden: User "alice" cannot (get|patch) resource "nodedisks" in API group "localtest.example.com" at the cluster scope/,
  );
  t.regex(
    await refused(t, k(['patch', 'nodedisk', disk, '--type=merge', '-p', release])),
    new RegExp(`NodeDisk ${disk} is reserved for NodeDiskClaim ${TEAM}/${CLAIM}: only the controller changes that reservation; release the disk by deleting the claim`),
  );
  t.is(await k(['get', 'nodedisk', disk, '-o', 'jsonpath={.spec.desired.owner}']), `claim:${TEAM}/${CLAIM}`);
  await k(['-n', OTHER, 'delete', 'ndc', 'other', '--timeout=60s']);
});

test.serial('kubectl nodedisks status claim/NAME tells the member where the disk is and points pods to a PVC of StorageClass nodedisks, with no hostPath pod', async (t) => {
  t.timeout(2 * MINUTES);
  const status = await plugin(['status', `claim/${CLAIM}`, '-n', TEAM, `--as=${MEMBER}`]);
  t.is(status.code, 0, status.stderr);
  t.regex(status.stdout, new RegExp(`Status:\\s+Bound to ${disk} on node ${M03}, Ready\n`));
  t.regex(status.stdout, new RegExp(`\n  Path:\\s+${path}\n`));
  // The hostPath pod it printed before is refused where baseline is enforced (docs/adr/0040).
  t.notRegex(status.stdout, /hostPath|nodeAffinity|Pod spec/);
  const pvc = load(status.stdout.slice(status.stdout.indexOf("# Pods do not mount a claim's disk."))) as { kind: string; metadata: { namespace: string }; spec: { storageClassName: string } };
  t.like(pvc, { kind: 'PersistentVolumeClaim', metadata: { namespace: TEAM }, spec: { storageClassName: 'nodedisks' } });
  // The reservation is what it was: the image on its node, its marker beside it.
  t.is(await onNode(env, M03, ['stat', '-c', '%s', path]), `${DISK_BYTES}\n`);
  t.deepEqual(await allMarkers(), { [M02]: [], [M03]: ['disk1.img.reserved'], [M04]: [] });
});

test.serial('the member deletes the claim: the disk is wiped, then released, and its marker removed', async (t) => {
  t.timeout(3 * MINUTES);
  // What the team's pod leaves on the disk, written on the node.
  await onNode(env, M03, ['sh', '-c', `printf 'team-a was here' | dd of=${path} bs=1 seek=4096 conv=notrunc status=none && sync`]);
  t.is(await onNode(env, M03, ['grep', '-c', 'team-a was here', path]), '1\n');
  t.regex(await as(MEMBER, ['-n', TEAM, 'delete', 'ndc', CLAIM, '--timeout=120s']), new RegExp(`^nodediskclaim.localtest.example.com "${CLAIM}" deleted`));
  // The finalizer held the claim until its disk was back: gone, the disk is Available already.
  t.regex(await refused(t, as(MEMBER, ['-n', TEAM, 'get', 'ndc', CLAIM])), /NotFound/);
  t.is(await k(['get', 'nodedisk', disk, '-o', 'jsonpath={.spec.desired.state} {.spec.desired.owner}']), 'Available ');
  await until(
    'the disk is reported Available and its marker is gone',
    2 * MINUTES,
    async () => [await k(['get', 'nodedisk', disk, '-o', 'jsonpath={.status.node.phase}']), JSON.stringify(await allMarkers())],
    ([phase, m]) => phase === 'Available' && m === JSON.stringify({ [M02]: [], [M03]: [], [M04]: [] }),
  );
  t.is(await onNode(env, M03, ['stat', '-c', '%s', path]), `${DISK_BYTES}\n`, 'the image itself stays');
  // Wiped by the agent before it was free again (ADR 38): the request's token reported done, zeros only.
  const [wipe, wipedFor] = (await k(['get', 'nodedisk', disk, '-o', 'jsonpath={.spec.desired.wipe} {.status.node.wipedFor}'])).split(' ');
  t.regex(wipe ?? '', /^claim-/);
  t.is(wipedFor, wipe);
  t.is(await onNode(env, M03, ['sh', '-c', `cmp -s -n ${DISK_BYTES} ${path} /dev/zero && echo zeros`]), 'zeros\n');
});

test.serial('Ctrl-C tears the cluster down and leaves the host as found', async (t) => {
  t.timeout(5 * MINUTES);
  await interruptAndCheckTornDown(t, cluster.run()!, before);
});
