// The upgrade from the previous release on the local 3-node cluster (root only; `npm run test:e2e`): a
// cluster started with `--install=none` (this checkout's images imported as `:dev`, disks seeded), the
// previous release exported from git at a pinned commit and built with its own scripts, its images
// imported under its own tag, and its kustomize install applied. Reservations of every kind are made on
// it (the label policy's, one by hand, one whose NodeDisk was deleted and is held by the agent's
// finalizer, a NodeDiskClaim's), then this checkout's install is applied over it: the rolling update
// must keep every NodeDisk, reservation, finalizer and claim, and no marker may be rewritten or removed
// while it runs (each marker's inode, mtime, ctime and content watched throughout); the label policy and
// a release work after it. Then the rollback to the previous release keeps everything too, and its agent
// completes the held deletion once it is released. Last, the Helm route: the previous release's chart
// adopts the kustomize install, `helm upgrade` to this checkout's chart and `helm rollback`, each rolling
// update held to the same checks. One cluster for the whole file; the tests run in order.
import test from 'ava';
import { readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { ensureBinaries } from '../../hack/controlplane/binaries.ts';
import { readSysctls, sleep } from '../../hack/cluster/host.ts';
import { imageRef } from '../../hack/cluster/images.ts';
import { DISK_DIR, NODE_NAMES, nodeSpec } from '../../hack/cluster/topology.ts';
import { clusterEnv, interruptAndCheckTornDown, onNode, startCluster, UP, until, waitForOutput, type Run } from '../../hack/cluster/run.ts';
import { ensureHelm, helm } from '../../hack/helm/helm.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { FINALIZER, LABEL, MINUTES, NS, nodeDisksE2E } from './_nodedisks.ts';
import { buildPreviousRelease, importIntoNodes, nodeImage, type PreviousRelease } from './_previous-release.ts';

/**
 * The previous release: fb0cf9b, the last release landed on main before this test (NodeDiskClaims and the
 * node lifecycle of docs/adr/0035 included). Move it to the last release when cutting a new one.
 */
const PREVIOUS_RELEASE = 'fb0cf9be212842eea71d204e1529aa2946c7a202';
const CURRENT_OVERLAY = join(REPO_ROOT, 'kustomize', 'overlays', 'local-cluster');
const [M02, M03, M04] = NODE_NAMES as [string, string, string];
const AGENT = 'node-disks-agent';
const OPERATOR = 'node-disks-operator';
const CLAIM_NS = 'team-a';

const { dataDir, env } = clusterEnv();
const sysctls = await readSysctls();
const releaseDir = mkdtempSync(join(tmpdir(), 'nodedisks-previous-release-'));
let run: Run | undefined;
let kubectl = '';
let helmBin = '';
let previous: PreviousRelease;
const { k, ndName, seedLine, markers, reserve, release, pods } = nodeDisksE2E(dataDir, env, () => kubectl);

const AUTO = ndName(M02, 'disk1');
const MANUAL = ndName(M03, 'disk1');
const HELD = ndName(M04, 'disk1');

test.before(async (t) => {
  kubectl = (await ensureBinaries()).kubectl;
  const t0 = Date.now();
  run = startCluster(env, ['--install=none']);
  // The release builds while the cluster starts; its images go in once the nodes' containerd runs.
  [previous] = await Promise.all([buildPreviousRelease(PREVIOUS_RELEASE, join(releaseDir, 'tree')), waitForOutput(run, UP, 40 * MINUTES)]);
  const ti = Date.now();
  await importIntoNodes(dataDir, previous);
  t.log(
    `previous release ${previous.commit}: node_modules ${previous.nodeModules}; ${Object.entries(previous.seconds)
      .map(([s, v]) => `${s} ${v} s`)
      .join(', ')}; imported into 3 nodes in ${((Date.now() - ti) / 1000).toFixed(1)} s; cluster and release ready ${((Date.now() - t0) / 1000).toFixed(1)} s after the start`,
  );
});

test.after.always(async () => {
  if (run && run.child.exitCode === null) {
    run.child.kill('SIGINT');
    await run.exited;
  }
  rmSync(dataDir, { recursive: true, force: true });
  await rm(releaseDir, { recursive: true, force: true });
});

// ---- what must survive -------------------------------------------------------------------------

/** The node's disk dir as the host sees it: the dir its mount namespace binds over DISK_DIR. */
const hostDiskDir = (node: string) => join(nodeSpec(dataDir, node, NODE_NAMES.indexOf(node)).dir, 'node-disks-manager', 'disks');

/** `<node>/<marker>` → inode, mtime and ctime (ns), content of every marker on every node. */
async function markerFiles(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const node of NODE_NAMES) {
    for (const f of (await readdir(hostDiskDir(node))).filter((n) => n.endsWith('.reserved')).sort()) {
      const path = join(hostDiskDir(node), f);
      try {
        const s = await stat(path, { bigint: true });
        out[`${node}/${f}`] = `ino ${s.ino} mtime ${s.mtimeNs} ctime ${s.ctimeNs} ${JSON.stringify(await readFile(path, 'utf8'))}`;
      } catch (err) {
        // Removed between the listing and the stat: that is a removal, and the comparison says so.
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
  }
  return out;
}

interface NodeDiskJson {
  metadata: { name: string; uid: string; labels?: Record<string, string>; finalizers?: string[]; deletionTimestamp?: string; namespace?: string };
  spec: { desired?: unknown; nodeName?: string; diskName?: string; minCapacity?: string };
  status?: { node?: { phase?: string; nodeUID?: string; capacityBytes?: number }; phase?: string; diskName?: string; nodeName?: string; path?: string };
}

function withoutOwnerUID(desired: unknown): unknown {
  if (!desired || typeof desired !== 'object') return desired;
  const { ownerUID: _uid, ...rest } = desired as Record<string, unknown>;
  return rest;
}

/** Every NodeDisk and NodeDiskClaim as far as a reservation goes, and every marker. */
async function snapshot(): Promise<{ disks: Record<string, string>; claims: Record<string, string>; markers: Record<string, string> }> {
  const items = async (what: string[]) => (JSON.parse(await k(['get', ...what, '-o', 'json'])) as { items: NodeDiskJson[] }).items;
  const disks = Object.fromEntries(
    (await items(['nodedisks'])).map((d) => [
      d.metadata.name,
      JSON.stringify({
        uid: d.metadata.uid,
        // Without the claim's UID, which this checkout's controller records on a claim's reservation that
        // has none (ADR 34) and a previous release's API server does not serve: checked on its own below.
        desired: withoutOwnerUID(d.spec.desired),
        labels: d.metadata.labels ?? {},
        finalizers: d.metadata.finalizers ?? [],
        deletionTimestamp: d.metadata.deletionTimestamp ?? null,
        phase: d.status?.node?.phase,
        nodeUID: d.status?.node?.nodeUID ?? null,
        capacityBytes: d.status?.node?.capacityBytes,
      }),
    ]),
  );
  const claims = Object.fromEntries(
    (await items(['nodediskclaims', '-A'])).map((c) => [
      `${c.metadata.namespace}/${c.metadata.name}`,
      JSON.stringify({ uid: c.metadata.uid, finalizers: c.metadata.finalizers ?? [], phase: c.status?.phase, diskName: c.status?.diskName, nodeName: c.status?.nodeName, path: c.status?.path }),
    ]),
  );
  return { disks, claims, markers: await markerFiles() };
}

/**
 * Watches every marker from now until stop(): each change of a marker's inode, mtime, ctime or content,
 * a marker gone or a new one, is recorded once, with the time it was seen. A read every 100 ms of a few files
 * in the host's view of the nodes' disk dirs.
 */
function watchMarkers(expected: Record<string, string>): { stop: () => Promise<{ changes: string[]; reads: number }> } {
  const changes: string[] = [];
  let reads = 0;
  let stopped = false;
  const t0 = Date.now();
  const loop = (async () => {
    let last = expected;
    while (!stopped) {
      const now = await markerFiles();
      reads++;
      for (const key of new Set([...Object.keys(last), ...Object.keys(now)])) {
        if (now[key] !== last[key]) changes.push(`${((Date.now() - t0) / 1000).toFixed(1)} s: ${key}: ${last[key] ?? '(none)'} → ${now[key] ?? '(gone)'}`);
      }
      last = now;
      if (changes.length > 20) break;
      await sleep(100);
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      return { changes, reads };
    },
  };
}

const readiness = async () =>
  (await k(['get', 'nodedisks', '-o', 'jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}'])).split('\n').filter(Boolean).sort();
const allReady = (r: string[]) => r.length === 9 && r.every((l) => l.endsWith('=True'));

/** uid → image of every pod of the install (containers[0]). */
async function installPods(): Promise<{ uid: string; image: string; ready: string; node: string }[]> {
  const out: { uid: string; image: string; ready: string; node: string }[] = [];
  for (const app of [AGENT, OPERATOR]) {
    const images = await k(['-n', NS, 'get', 'pods', '-l', `app.kubernetes.io/name=${app}`, '-o', 'jsonpath={range .items[*]}{.metadata.uid} {.spec.containers[0].image}{"\\n"}{end}']);
    const byUid = Object.fromEntries(
      images
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(' ') as [string, string]),
    );
    for (const p of await pods(app)) out.push({ uid: p.uid, image: byUid[p.uid] ?? '', ready: p.ready, node: p.node });
  }
  return out;
}

/** Applies an install (a kustomization dir) as `npm run cluster` does, retrying while the API server is not ready for it. */
const apply = (dir: string) =>
  until(
    `kubectl apply --server-side -k ${dir}`,
    2 * MINUTES,
    () => k(['apply', '--server-side', '-k', dir]),
    () => true,
  );

/** Every pod of the install replaced (when `old` is given) by a Ready one running `tag`: three agents, two controllers. */
async function rolledOutTo(tag: string, old: Set<string> = new Set()): Promise<void> {
  await k(['-n', NS, 'rollout', 'status', `daemonset/${AGENT}`, '--timeout=300s'], 6 * MINUTES);
  await k(['-n', NS, 'rollout', 'status', `deployment/${OPERATOR}`, '--timeout=300s'], 6 * MINUTES);
  await until(
    `three agents and two controllers running :${tag} are Ready, and no earlier pod is left`,
    3 * MINUTES,
    installPods,
    (p) => p.length === 5 && p.every((x) => !old.has(x.uid) && x.ready === 'True' && x.image.endsWith(`:${tag}`)),
  );
}

/** What the agents of the install logged about markers: any line that says one was written, removed or put right. */
async function markerLogLines(): Promise<string[]> {
  const lines: string[] = [];
  for (const p of await pods(AGENT)) {
    const log = await k(['-n', NS, 'logs', p.name]);
    lines.push(...log.split('\n').filter((l) => /reservation marker (written|removed|put right|found with no NodeDisk)/.test(l)));
  }
  return lines;
}

/** The objects an overlay renders, as `kind/namespace/name`. */
async function renderedObjects(overlay: string): Promise<Set<string>> {
  const docs = loadAll(await k(['kustomize', overlay])) as { kind?: string; metadata?: { name?: string; namespace?: string } }[];
  return new Set(docs.filter((d) => d?.kind).map((d) => `${d.kind}/${d.metadata?.namespace ?? ''}/${d.metadata?.name ?? ''}`));
}

// ---- the tests -------------------------------------------------------------------------------------

test.serial('the previous release, exported from git and built with its own scripts, installs with kustomize beside this checkout’s images: nine NodeDisks Ready', async (t) => {
  t.timeout(10 * MINUTES);
  // Both builds are in every node, under different tags.
  for (const { ref } of previous.images) {
    const [name = '', digest = ''] = ref.split('@');
    for (const node of NODE_NAMES) t.is(await nodeImage(dataDir, node, name), digest, `${node}: ${name}`);
  }
  for (const node of NODE_NAMES) t.truthy(await nodeImage(dataDir, node, imageRef(AGENT)), `${node}: this checkout's ${imageRef(AGENT)}`);
  const t0 = Date.now();
  await apply(previous.overlay);
  await rolledOutTo(previous.tag);
  await until('every NodeDisk is reported and Ready', 5 * MINUTES, readiness, allReady);
  t.log(`previous release installed, nine NodeDisks Ready: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
});

let held: Awaited<ReturnType<typeof snapshot>>;

test.serial('on the previous release: a reservation of every kind (label, by hand, deleted but held by its finalizer, a NodeDiskClaim)', async (t) => {
  t.timeout(10 * MINUTES);
  const t0 = Date.now();
  await reserve(M02, 'disk1');
  const byHand = async (nd: string, owner: string) => {
    await k(['patch', 'nodedisk', nd, '--type=merge', '-p', JSON.stringify({ spec: { desired: { state: 'Reserved', owner } } })]);
    await until(
      `${nd} is reserved for ${owner}`,
      3 * MINUTES,
      () => seedLine(nd),
      (l) => l === `Reserved ${owner} Reserved 67108864`,
    );
    await until(
      `${nd} carries the agent's finalizer`,
      2 * MINUTES,
      () => k(['get', 'nodedisk', nd, '-o', 'jsonpath={.metadata.finalizers}']),
      (f) => f.includes(FINALIZER),
    );
  };
  await byHand(MANUAL, 'team-db');
  await byHand(HELD, 'team-held');
  await k(['delete', 'nodedisk', HELD, '--wait=false']);
  await until(
    'the deleted NodeDisk is held by its finalizer',
    MINUTES,
    () => k(['get', 'nodedisk', HELD, '-o', 'jsonpath={.metadata.deletionTimestamp}']),
    (d) => d !== '',
  );
  await k(['create', 'namespace', CLAIM_NS]);
  const claimFile = join(releaseDir, 'claim.json');
  await writeFile(
    claimFile,
    JSON.stringify({
      apiVersion: 'localtest.example.com/v1alpha1',
      kind: 'NodeDiskClaim',
      metadata: { name: 'db', namespace: CLAIM_NS },
      spec: { nodeName: M03, minCapacity: '32Mi' },
    }),
  );
  await k(['create', '-f', claimFile]);
  const bound = await until(
    'the claim is Bound and Ready',
    3 * MINUTES,
    () => k(['-n', CLAIM_NS, 'get', 'nodediskclaim', 'db', '-o', 'jsonpath={.status.phase} {.status.conditions[?(@.type=="Ready")].status} {.status.diskName}']),
    (s) => s.startsWith('Bound True '),
  );
  const claimed = bound.split(' ')[2] ?? '';
  t.is(claimed, ndName(M03, 'disk2'), 'the first free disk of its node');
  await until(
    `the claim's marker is on ${M03}`,
    2 * MINUTES,
    () => markers(M03),
    (m) => m.includes('disk2.img.reserved'),
  );

  held = await snapshot();
  const disk = (nd: string) =>
    JSON.parse(held.disks[nd] ?? '{}') as { desired: unknown; labels: Record<string, string>; finalizers: string[]; deletionTimestamp: string | null; nodeUID: string | null };
  t.like(disk(AUTO), { desired: { state: 'Reserved', owner: 'auto' }, finalizers: [FINALIZER], deletionTimestamp: null });
  t.is(disk(AUTO).labels[LABEL], 'true');
  t.like(disk(MANUAL), { desired: { state: 'Reserved', owner: 'team-db' }, finalizers: [FINALIZER] });
  t.like(disk(HELD), { desired: { state: 'Reserved', owner: 'team-held' }, finalizers: [FINALIZER] });
  t.truthy(disk(HELD).deletionTimestamp);
  t.like(disk(claimed), { desired: { state: 'Reserved', owner: `claim:${CLAIM_NS}/db` }, finalizers: [FINALIZER] });
  t.truthy(disk(AUTO).nodeUID, 'the previous release records the node UID');
  t.deepEqual(Object.keys(held.markers), [`${M02}/disk1.img.reserved`, `${M03}/disk1.img.reserved`, `${M03}/disk2.img.reserved`, `${M04}/disk1.img.reserved`]);
  t.deepEqual(Object.keys(held.claims), [`${CLAIM_NS}/db`]);
  // The host's view of a node's disk dir is the node's own: the same file.
  t.is((await onNode(env, M03, ['stat', '-c', '%i', `${DISK_DIR}/disk2.img.reserved`])).trim(), /ino (\d+)/.exec(held.markers[`${M03}/disk2.img.reserved`] ?? '')?.[1] ?? '(no marker)');
  t.log(`four reservations made on the previous release: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
});

/** Changes the install (`change`: an apply, a helm command) and checks that the rolling update to `tag` lost nothing; returns its seconds. */
async function changeInstall(t: import('ava').ExecutionContext, change: () => Promise<unknown>, tag: string, expected: Awaited<ReturnType<typeof snapshot>>): Promise<number> {
  const old = new Set((await installPods()).map((p) => p.uid));
  t.is(old.size, 5);
  const versions = () => k(['get', 'nodedisks', '-o', 'jsonpath={range .items[*]}{.metadata.name}={.metadata.resourceVersion}{"\\n"}{end}']).then((o) => new Set(o.split('\n').filter(Boolean)));
  const versionsBefore = await versions();
  const watch = watchMarkers(expected.markers);
  const t0 = Date.now();
  let seen: { changes: string[]; reads: number };
  try {
    await change();
    await rolledOutTo(tag, old);
    // Ready: each new agent has listed, scanned and reconciled its disks; each NodeDisk reported again.
    await until('every NodeDisk but the held one is Ready', 3 * MINUTES, readiness, (r) => r.filter((l) => !l.startsWith(`${HELD}=`)).every((l) => l.endsWith('=True')));
  } finally {
    seen = await watch.stop();
  }
  const seconds = (Date.now() - t0) / 1000;
  t.deepEqual(seen.changes, [], 'no marker rewritten, removed or added during the rolling update');
  t.true(seen.reads > 10, `the markers were read ${seen.reads} times`);
  const after = await snapshot();
  t.deepEqual(after.disks, expected.disks, 'every NodeDisk, reservation, label, finalizer and deletion as before');
  t.deepEqual(after.claims, expected.claims, 'the claim as before');
  t.deepEqual(after.markers, expected.markers, 'every marker as before');
  t.deepEqual(await markerLogLines(), [], 'the new agents wrote or removed no marker');
  const written = [...(await versions())].filter((v) => !versionsBefore.has(v)).length;
  t.log(`rolling update to :${tag}: ${seconds.toFixed(1)} s, the markers read ${seen.reads} times meanwhile; ${written} of 9 NodeDisks written during it`);
  return seconds;
}

test.serial(
  'the upgrade to this checkout (kustomize apply): the rolling update keeps every NodeDisk, reservation, finalizer, claim and marker, rewrites no marker, and the label policy and a release work after it',
  async (t) => {
    t.timeout(15 * MINUTES);
    await changeInstall(t, () => apply(CURRENT_OVERLAY), 'dev', held);
    // The claim's reservation, made by the previous release by name only, now carries the claim's UID.
    const claim = JSON.parse(held.claims[`${CLAIM_NS}/db`] ?? '{}') as { uid: string; diskName: string };
    await until(
      "the claim's UID recorded on its reservation",
      2 * MINUTES,
      () => k(['get', 'nodedisk', claim.diskName, '-o', 'jsonpath={.spec.desired.owner} {.spec.desired.ownerUID}']),
      (s) => s === `claim:${CLAIM_NS}/db ${claim.uid}`,
    );
    const t0 = Date.now();
    // The policy after the upgrade: a new label reserves, a removed one releases.
    await reserve(M04, 'disk2');
    await release(M02, 'disk1');
    t.deepEqual(await markers(M02), []);
    t.log(`a label reserved and another released after the upgrade: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    held = await snapshot();
  },
);

test.serial('the rollback to the previous release (its kustomize apply) keeps everything, and its agent completes the held deletion once it is released', async (t) => {
  t.timeout(15 * MINUTES);
  await changeInstall(t, () => apply(previous.overlay), previous.tag, held);
  // What only this checkout's install has stays after the previous one's apply (docs/upgrade.md, Rollback):
  // deleted, as the procedure says, all but CRDs (deleting one would delete its objects), so that the
  // install can move to Helm after (Helm adopts no object that lacks its ownership metadata).
  const previousObjects = await renderedObjects(previous.overlay);
  const added = [...(await renderedObjects(CURRENT_OVERLAY))].filter((o) => !previousObjects.has(o) && !o.startsWith('CustomResourceDefinition/'));
  for (const o of added) {
    const [kind, namespace, name] = o.split('/') as [string, string, string];
    await k(['delete', kind, name, '--ignore-not-found', ...(namespace ? ['-n', namespace] : [])]);
  }
  t.log(`objects of this checkout's install deleted after the rollback: ${added.join(', ') || 'none'}`);
  const afterDelete = await snapshot();
  t.deepEqual([afterDelete.disks, afterDelete.claims, afterDelete.markers], [held.disks, held.claims, held.markers], 'nothing of the NodeDisks, claims or markers changed with it');
  const uid = (JSON.parse(held.disks[HELD] ?? '{}') as { uid: string }).uid;
  await k(['patch', 'nodedisk', HELD, '--type=merge', '-p', '{"spec":{"desired":{"state":"Available","owner":null}}}']);
  const back = await until(
    'the held NodeDisk is gone and its disk reported again, Available',
    3 * MINUTES,
    () => k(['get', 'nodedisk', HELD, '-o', 'jsonpath={.metadata.uid} {.spec.desired.state} {.status.node.phase} {.metadata.deletionTimestamp}']),
    (s) => !s.startsWith(`${uid} `) && /^\S+ Available Available $/.test(s),
  );
  t.not(back.split(' ')[0], uid);
  await until(
    `the marker is gone from ${M04}`,
    2 * MINUTES,
    () => markers(M04),
    (m) => !m.includes('disk1.img.reserved'),
  );
});

// ---- the Helm route ---------------------------------------------------------------------------

const RELEASE = 'node-disks-manager';
const h = (args: string[]) => helm(helmBin, [...args, '-n', NS], { env: { KUBECONFIG: join(dataDir, 'kubeconfig') } });
/** `helm upgrade --install` of a chart with its local-cluster values and the images at `tag`, as `npm run cluster --install=helm` does. */
const helmInstall = (chart: string, tag: string) =>
  h([
    'upgrade',
    '--install',
    RELEASE,
    chart,
    '-f',
    join(chart, 'ci', 'local-cluster-values.yaml'),
    ...['--set', `controller.image.repository=${OPERATOR}`, '--set', `controller.image.tag=${tag}`, '--set', `agent.image.repository=${AGENT}`, '--set', `agent.image.tag=${tag}`],
  ]);
async function history(): Promise<Record<number, string>> {
  const revs = JSON.parse(await h(['history', RELEASE, '-o', 'json'])) as { revision: number; status: string }[];
  return Object.fromEntries(revs.map((r) => [r.revision, r.status]));
}

test.serial(
  'Helm: the previous release’s chart takes the kustomize install over (docs/upgrade.md), then helm upgrade to this checkout’s chart and helm rollback each keep everything and rewrite no marker',
  async (t) => {
    t.timeout(20 * MINUTES);
    helmBin = await ensureHelm();
    held = await snapshot();
    // The adoption: Helm takes objects that carry its release's label and annotations.
    const rendered = join(releaseDir, 'previous-install.yaml');
    await writeFile(rendered, await k(['kustomize', previous.overlay]));
    await k(['label', '-f', rendered, 'app.kubernetes.io/managed-by=Helm', '--overwrite']);
    await k(['annotate', '-f', rendered, `meta.helm.sh/release-name=${RELEASE}`, `meta.helm.sh/release-namespace=${NS}`, '--overwrite']);
    // The chart's pods carry Helm's labels: a rolling update, to the same images.
    await changeInstall(t, () => helmInstall(previous.chart, previous.tag), previous.tag, held);
    t.deepEqual(await history(), { 1: 'deployed' });
    await changeInstall(t, () => helmInstall(join(REPO_ROOT, 'charts', 'node-disks-manager'), 'dev'), 'dev', held);
    t.deepEqual(await history(), { 1: 'superseded', 2: 'deployed' });
    await changeInstall(t, () => h(['rollback', RELEASE, '1']), previous.tag, held);
    t.deepEqual(await history(), { 1: 'superseded', 2: 'superseded', 3: 'deployed' });
  },
);

test.serial('Ctrl-C tears the cluster down and leaves the host as found', async (t) => {
  t.timeout(5 * MINUTES);
  await interruptAndCheckTornDown(t, run!, sysctls);
});
