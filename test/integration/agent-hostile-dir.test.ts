// A disk dir nobody trusts: the real agent process, with its node-bound identity, against a real API server,
// and a dir that holds a huge marker, a FIFO for a marker, thousands of junk names, and a newcomer whose name
// makes the NodeDisk name of a reserved disk.
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync } from 'node:fs';
import { mkdtemp, readFile, rename, rm, truncate, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { seedDisks, startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
let work = '';
const started: Program[] = [];
const client = () => nodeDisksFor(controlPlane().admin());
const kubectl = (...args: string[]) => controlPlane().kubectl(controlPlane().admin(), args);
const MiB = 1024 * 1024;

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-hostile-'));
  started.push(await startController(controlPlane(), { logDir: join(work, 'logs') }));
});
test.afterEach.always((t) => {
  if (!t.passed) for (const p of started) console.error(`----- ${p.name} -----\n${p.logs(6000)}`);
});
test.after.always(async () => {
  await Promise.all(started.map((p) => p.stop()));
  await rm(work, { recursive: true, force: true });
});

async function launch(node: string, o: { disks?: number; rescanInterval?: string; before?: (dir: string) => Promise<void> } = {}): Promise<{ agent: Program; dir: string }> {
  const dir = join(work, node, 'disks');
  await seedDisks(dir, o.disks ?? 1, 64 * 1024);
  await o.before?.(dir);
  const agent = await startAgent(controlPlane(), { node, diskDir: dir, logDir: join(work, 'logs'), rescanInterval: o.rescanInterval ?? '1s', heartbeat: '5m' });
  started.push(agent);
  return { agent, dir };
}

async function phase(node: string, disk: string, check: (nd: NodeDisk) => boolean, what: string, timeoutMs = 30_000): Promise<NodeDisk> {
  return await eventually(
    `${node}/${disk} ${what}`,
    async () => {
      const nd = await client()
        .get(nodeDiskName(node, disk))
        .catch(() => undefined);
      return nd && check(nd) ? nd : undefined;
    },
    timeoutMs,
  );
}

const ready = (nd: NodeDisk) => nd.status?.conditions?.find((c) => c.type === 'Ready');
async function reserve(node: string, disk: string): Promise<void> {
  await phase(node, disk, (nd) => nd.status?.node?.phase === 'Available', 'discovered');
  await kubectl('patch', 'nodedisk', nodeDiskName(node, disk), '--type=merge', '-p', '{"spec":{"desired":{"state":"Reserved","owner":"team-db"}}}');
}
const reservedAndReady = (nd: NodeDisk) => nd.status?.node?.phase === 'Reserved' && ready(nd)?.status === 'True' && ready(nd)?.observedGeneration === nd.metadata.generation;

/** The agent process's peak resident memory (VmHWM), in bytes. */
async function peakRss(agent: Program): Promise<number> {
  const pid = await eventually(`${agent.name} pid`, async () => await agent.programPid());
  const kib = /^VmHWM:\s+(\d+) kB$/m.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1];
  if (!kib) throw new Error(`no VmHWM in /proc/${pid}/status`);
  return Number(kib) * 1024;
}

/** Polls a NodeDisk until stopped, and says every phase and Ready status it saw. */
function observe(name: string): { sofar: () => string[]; stop: () => Promise<string[]> } {
  const seen = new Set<string>();
  let running = true;
  const loop = (async () => {
    while (running) {
      const nd = await client()
        .get(name)
        .catch(() => undefined);
      if (nd) seen.add(`${nd.status?.node?.phase}/Ready=${ready(nd)?.status}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    sofar: () => [...seen],
    stop: async () => {
      running = false;
      await loop;
      return [...seen];
    },
  };
}

async function scans(agent: Program): Promise<number> {
  const port = await eventually(`${agent.name} http port`, async () => Number(/"httpPort":(\d+)/.exec(agent.logsOfThisRun())?.[1]) || undefined);
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return Number(/^nodedisks_agent_scan_duration_seconds_count (\d+)/m.exec(text)?.[1] ?? NaN);
}

test.serial('a 300 MB marker is not read into memory: the agent puts it right and the disk stays Reserved', async (t) => {
  const node = 'node-huge-marker';
  const { agent, dir } = await launch(node);
  await reserve(node, 'disk1');
  await phase(node, 'disk1', reservedAndReady, 'Reserved and Ready');
  const marker = join(dir, 'disk1.img.reserved');
  const before = await peakRss(agent);
  const seen = observe(nodeDiskName(node, 'disk1'));
  await truncate(marker, 300 * MiB); // sparse: no disk space, but 300 MiB for a reader that reads it whole
  // Its size first: the test itself does not read 300 MB at every look.
  await eventually('the marker put right', async () => lstatSync(marker).size === 9 && (await readFile(marker, 'utf8')) === 'reserved\n');
  const grew = (await peakRss(agent)) - before;
  t.true(grew < 64 * MiB, `the agent's peak RSS grew by ${Math.round(grew / MiB)} MiB`);
  await eventually('the agent says it put the marker right', async () => /"msg":"reservation marker put right".*"was":"it is 314572800 bytes/.test(agent.logsOfThisRun()));
  t.deepEqual(await seen.stop(), ['Reserved/Ready=True'], 'never anything but Reserved and Ready');
});

test.serial('a FIFO swapped in as a marker blocks nothing: the agent puts it right and goes on with other disks', async (t) => {
  const node = 'node-fifo-marker';
  const { dir } = await launch(node, { disks: 3 });
  await reserve(node, 'disk2');
  await phase(node, 'disk2', reservedAndReady, 'Reserved and Ready');
  const marker = join(dir, 'disk2.img.reserved');
  const seen = observe(nodeDiskName(node, 'disk2'));
  // Swapped in by one rename, so there is never a moment with no marker at all.
  execFileSync('mkfifo', [join(dir, 'pipe')]);
  await rename(join(dir, 'pipe'), marker);
  await reserve(node, 'disk3');
  await phase(node, 'disk3', reservedAndReady, 'another disk reserved meanwhile');
  await eventually('the FIFO replaced by a marker', async () => lstatSync(marker).isFile() && (await readFile(marker, 'utf8')) === 'reserved\n');
  const nd = await phase(node, 'disk2', reservedAndReady, 'still Reserved and Ready');
  t.deepEqual(nd.spec.desired, { state: 'Reserved', owner: 'team-db' });
  t.deepEqual(await seen.stop(), ['Reserved/Ready=True']);
});

test.serial('thousands of junk names and create/delete cycles cost a bounded number of log lines and scans', async (t) => {
  const node = 'node-junk';
  // The junk is there when the agent starts, so its first scan sees all of it: what one scan logs is bounded.
  const { agent, dir } = await launch(node, {
    before: async (d) => {
      for (let i = 0; i < 2000; i++) await writeFile(join(d, `junk name ${i}.img`), 'x');
    },
  });
  await phase(node, 'disk1', (nd) => nd.status?.node?.phase === 'Available', 'Available');
  const scansBefore = await scans(agent);
  const burstStart = Date.now();
  for (let i = 0; i < 20; i++) {
    // The pauses make a burst that lasts (as a script's would), not a synchronisation.
    await writeFile(join(dir, 'junk name extra.img'), 'x');
    await new Promise((r) => setTimeout(r, 50));
    await unlink(join(dir, 'junk name extra.img'));
    await new Promise((r) => setTimeout(r, 50));
  }
  const burstMs = Date.now() - burstStart;
  const scansInBurst = (await scans(agent)) - scansBefore;
  // Everything seen: a good disk added after the junk is discovered, and three more full scans have run.
  await writeFile(join(dir, 'after.img'), 'x');
  await phase(node, 'after', (nd) => nd.status?.node?.phase === 'Available', 'the disk added after the junk');
  const settled = await scans(agent);
  await eventually('three more scans', async () => (await scans(agent)) >= settled + 3, 30_000);

  const lines = agent.logsOfThisRun().split('\n').filter(Boolean);
  const ignoring = lines.filter((l) => l.includes('"msg":"ignoring file in disk dir"'));
  t.log(`${lines.length} log lines (${ignoring.length} naming an ignored file), ${scansInBurst} scans in a burst of ${burstMs} ms`);
  t.true(lines.length <= 100, `${lines.length} log lines, ${ignoring.length} naming an ignored file`);
  t.true(ignoring.length <= 10 + 20, `${ignoring.length} lines naming an ignored file`);
  t.is(lines.filter((l) => l.includes('"msg":"ignoring 1990 more files in disk dir, not named to keep the log short"')).length, 1);
  // Event-driven scans wait for a pause (at most 1 s); the periodic rescan is 1 s: about two a second.
  t.true(scansInBurst <= 2 * Math.ceil(burstMs / 1000) + 3, `${scansInBurst} scans in a burst of ${burstMs} ms`);
  t.is((await client().list({ fieldSelector: `spec.nodeName=${node}` })).items.length, 2, 'no NodeDisk for a junk name');
});

test.serial("a new file whose name makes a reserved disk's NodeDisk name does not take it: the newcomer is the collision", async (t) => {
  const node = 'node-collide';
  const { agent, dir } = await launch(node);
  const name = nodeDiskName(node, 'disk1');
  t.is(nodeDiskName(node, 'Disk1'), name);
  await reserve(node, 'disk1');
  await phase(node, 'disk1', reservedAndReady, 'Reserved and Ready');
  const seen = observe(name);
  // Disk1.img sorts before disk1.img.
  await writeFile(join(dir, 'Disk1.img'), 'x');
  await eventually('the agent has looked at Disk1.img', async () => /"file":"(D|d)isk1\.img"/.test(agent.logsOfThisRun()));
  const judged = await scans(agent);
  await eventually('two more scans', async () => (await scans(agent)) >= judged + 2);
  t.deepEqual(seen.sofar(), ['Reserved/Ready=True'], 'the reserved disk stays Reserved and Ready');
  const noted = await phase(
    node,
    'disk1',
    (nd) => /file Disk1\.img in the disk dir makes this NodeDisk's name too and is ignored/.test(nd.status?.node?.message ?? ''),
    'the collision noted on the NodeDisk',
  );
  t.regex(noted.status?.node?.message ?? '', /^reservation marker present; file Disk1\.img .* \(this NodeDisk stays with .*\/disk1\.img\): rename it$/);
  t.is(noted.spec.diskID, 'disk1');
  t.regex(agent.logsOfThisRun(), /"file":"Disk1\.img","reason":"its NodeDisk name node-disk-node-collide-disk1 is already used by disk1\.img; rename Disk1\.img"/);
  t.true(existsSync(join(dir, 'disk1.img.reserved')));

  // A restart scans the dir before it knows the NodeDisks: name order alone would hand the name to Disk1.img.
  await agent.crash();
  const again = await startAgent(controlPlane(), { node, diskDir: dir, logDir: join(work, 'logs'), rescanInterval: '1s', heartbeat: '5m' });
  started.push(again);
  await eventually('the restarted agent has scanned twice', async () => (await scans(again).catch(() => 0)) >= 2, 30_000);
  await phase(node, 'disk1', (nd) => reservedAndReady(nd) && /Disk1\.img/.test(nd.status?.node?.message ?? ''), 'still Reserved, the collision still noted');

  await unlink(join(dir, 'Disk1.img'));
  await phase(node, 'disk1', (nd) => nd.status?.node?.message === 'reservation marker present', 'the note gone with the newcomer');
  t.deepEqual(await seen.stop(), ['Reserved/Ready=True'], 'the reserved disk never left Reserved and Ready');
});
