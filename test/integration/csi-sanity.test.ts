// The CSI driver held to csi-sanity (kubernetes-csi/csi-test, built from its module): the checks every CSI
// driver is held to, run against both sides of node-disks-csi as they run in a cluster — the controller
// side with its own ServiceAccount against the real API server (the install's RBAC and admission policies),
// the node side as root with real loop devices, ext4 and mounts, and a real agent reporting the disks and
// carrying out the wipes. Once with Filesystem volumes, once with Block volumes.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { ensureCsiSanity, ensureToolRunner } from '../../hack/csi/tools.ts';
import { seedDisks, startAgent, startCsiController, startCsiNode, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const NODE = 'csi-n1';
const MiB = 2 ** 20;
let work = '';
let sanity = '';
const programs: Program[] = [];

interface SanityRun {
  code: number | null;
  output: string;
  passed: number;
  failed: number;
  skipped: number;
}

function runSanity(args: string[]): Promise<SanityRun> {
  return new Promise((resolve) => {
    execFile(sanity, args, { timeout: 15 * 60_000, maxBuffer: 64 * MiB }, (err, stdout, stderr) => {
      const output = `${stdout}\n${stderr}`;
      // Ginkgo's summary: "Ran 61 of 93 Specs … SUCCESS! -- 61 Passed | 0 Failed | 0 Pending | 32 Skipped".
      const m = /(\d+) Passed \| (\d+) Failed \| \d+ Pending \| (\d+) Skipped/.exec(output);
      const code: unknown = err ? (err as { code?: unknown }).code : 0;
      resolve({ code: typeof code === 'number' ? code : 1, output, passed: Number(m?.[1] ?? 0), failed: Number(m?.[2] ?? -1), skipped: Number(m?.[3] ?? 0) });
    });
  });
}

/** The loop devices attached to images under `dir`, and what is mounted under it: both must be none after a run. */
async function leftovers(dir: string): Promise<string[]> {
  const out: string[] = [];
  const loops = await new Promise<string>((resolve) => execFile('losetup', ['-J', '-l'], (_e, stdout) => resolve(stdout || '{"loopdevices":[]}')));
  for (const d of (JSON.parse(loops) as { loopdevices?: { name: string; 'back-file': string | null }[] }).loopdevices ?? [])
    if ((d['back-file'] ?? '').startsWith(dir)) out.push(`${d.name} on ${d['back-file']}`);
  for (const line of (await readFile('/proc/self/mountinfo', 'utf8')).split('\n')) {
    const point = line.split(' ')[4];
    if (point?.startsWith(dir)) out.push(`mount at ${point}`);
  }
  return out;
}

test.before(async () => {
  if (process.getuid?.() !== 0) throw new Error('the CSI node side needs root (loop devices, mounts): run the integration tests as root, as .ci/run does');
  sanity = await ensureCsiSanity();
  work = await mkdtemp(join(tmpdir(), 'nodedisks-csi-sanity-'));
  const logDir = join(work, 'logs');
  await mkdir(logDir, { recursive: true });
  const diskDir = join(work, 'disks');
  // csi-sanity creates a volume or two per spec and deletes it; each deleted volume is wiped by the agent
  // before it is free again: twelve disks keep the specs from waiting for each other's wipes.
  await seedDisks(diskDir, 12, 64 * MiB);
  programs.push(await startAgent(controlPlane(), { node: NODE, diskDir, logDir, rescanInterval: '1s' }));
  programs.push(await startCsiController(controlPlane(), { logDir, csiAddress: join(work, 'controller.sock') }));
  // The node side starts its tools through nodedisks-toolrunner, as csi-node does with --tool-runner.
  programs.push(startCsiNode({ logDir, csiAddress: join(work, 'node.sock'), node: NODE, diskDir, extraArgs: [`--tool-runner=${await ensureToolRunner()}`] }));
  const disks = nodeDisksFor(controlPlane().admin());
  await eventually('12 Available disks', async () => (await disks.list()).items.filter((d) => d.status?.node?.phase === 'Available').length === 12, 60_000);
});

test.afterEach.always((t) => {
  if (!t.passed) for (const p of programs) console.error(`----- ${p.name} -----\n${p.logs(8000)}`);
});

test.after.always(async () => {
  await Promise.all(programs.map((p) => p.stop()));
  if (work) await rm(work, { recursive: true, force: true });
});

for (const accessType of ['mount', 'block'] as const) {
  test.serial(`csi-sanity passes every spec for the capabilities the driver advertises (${accessType} volumes), and leaves no loop device or mount behind`, async (t) => {
    const run = await runSanity([
      `--csi.endpoint=unix://${join(work, 'node.sock')}`,
      `--csi.controllerendpoint=unix://${join(work, 'controller.sock')}`,
      `--csi.stagingdir=${join(work, `staging-${accessType}`)}`,
      `--csi.mountdir=${join(work, `mount-${accessType}`)}`,
      // The disks' own size: a request with limit_bytes = required_bytes fits only a disk of exactly that size.
      `--csi.testvolumesize=${64 * MiB}`,
      `--csi.testvolumeaccesstype=${accessType}`,
      '--ginkgo.no-color',
    ]);
    t.log(`csi-sanity (${accessType}): ${run.passed} passed, ${run.failed} failed, ${run.skipped} skipped`);
    if (run.code !== 0) t.log(run.output.slice(-20_000));
    t.is(run.code, 0);
    t.is(run.failed, 0);
    // The specs of the Identity, Controller (create/delete, capacity) and Node (stage, publish, stats) services.
    t.true(run.passed >= 30, `only ${run.passed} specs ran`);
    t.deepEqual(await leftovers(work), []);
  });
}
