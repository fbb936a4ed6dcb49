// `npm start` (hack/demo.ts) run for real, in a temp dir: a second start while one runs must say so
// and touch nothing; a lock left by a demo that crashed does not block the next start; the team it sets
// up claims a disk with namespaced rights only, through the real kubectl and the built plugin.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import test from 'ava';
import { REPO_ROOT, runKubectl } from '../../hack/controlplane/controlplane.ts';
import { ensureBinaries } from '../../hack/controlplane/binaries.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { type Demo, demoUp, startDemo as startDemoIn, stopDemo } from '../harness/demo.ts';
import { execResult } from '../harness/exec.ts';

const base = mkdtempSync(join(tmpdir(), 'nodedisks-demo-'));
const work = join(base, 'dev');
const BIN = join(REPO_ROOT, 'dist', 'bin');
// Each test starts a whole demo; on a loaded machine that outlasts ava's default timeout.
const DEMO_TEST_TIMEOUT = 5 * 60_000;

const startDemo = () => startDemoIn(work);
const running: Demo[] = [];

test.after.always(async () => {
  for (const d of running) if (d.child.exitCode === null) await stopDemo(d);
  await rm(base, { recursive: true, force: true });
});

test.serial('a second npm start while a demo runs says so and touches nothing', async (t) => {
  t.timeout(DEMO_TEST_TIMEOUT);
  const kubectl = (await ensureBinaries()).kubectl;
  const first = startDemo();
  running.push(first);
  await demoUp(first);
  const kubeconfig = join(work, 'kubeconfig');
  const before = readFileSync(kubeconfig, 'utf8');

  const second = startDemo();
  running.push(second);
  // It must stop at once; going ahead ("starting etcd …") means it has already wiped the first one's state.
  await eventually('the second start to stop or go ahead', async () => second.child.exitCode !== null || second.output().includes('starting etcd'), 60_000, 50);
  t.notRegex(second.output(), /starting etcd/, 'the second start went ahead');
  const code = await second.exited;
  t.not(code, 0);
  t.regex(
    second.output(),
    new RegExp(
      `^error: a demo is already running \\(pid ${first.child.pid}\\) in ${work.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}; stop it with Ctrl-C in its terminal \\(or kill ${first.child.pid}\\) first\\n$`,
    ),
  );
  t.notRegex(second.output(), /^\s+at /m, 'no stack trace');

  // The first demo is untouched and still answers.
  t.is(readFileSync(kubeconfig, 'utf8'), before);
  t.is(first.child.exitCode, null, 'the first demo still runs');
  const disks = await runKubectl(kubectl, ['--kubeconfig', kubeconfig, 'get', 'nodedisks', '-o', 'name']);
  t.is(disks.trim().split('\n').length, 9);

  t.is(await stopDemo(first), 0);
  t.false(existsSync(join(work, 'demo.pid')), 'a demo that stops removes its lock');
});

test.serial('a lock left by a demo that crashed is cleaned up by the next start', async (t) => {
  t.timeout(DEMO_TEST_TIMEOUT);
  // A pid that is certainly dead: a process that has already exited.
  const gone = spawn(process.execPath, ['-e', '']);
  await new Promise((resolve) => gone.on('exit', resolve));
  writeFileSync(join(work, 'demo.pid'), `${gone.pid}\n`);
  const demo = startDemo();
  running.push(demo);
  await demoUp(demo);
  t.regex(demo.output(), new RegExp(`removed a stale lock of pid ${gone.pid}`));
  t.is(readFileSync(join(work, 'demo.pid'), 'utf8').trim(), String(demo.child.pid));
  t.is(await stopDemo(demo), 0);
});

test.serial('the team of the demo claims a disk in team-a with namespaced rights only', async (t) => {
  t.timeout(DEMO_TEST_TIMEOUT);
  const bin = (await ensureBinaries()).kubectl;
  const demo = startDemo();
  running.push(demo);
  await demoUp(demo);
  const kubeconfig = join(work, 'kubeconfig-team-a');
  t.true(existsSync(kubeconfig), `no ${kubeconfig}`);
  t.regex(demo.output(), new RegExp(`export KUBECONFIG=${kubeconfig.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}\n`));
  // No -n anywhere: the kubeconfig's context namespace is team-a.
  const team = (...args: string[]) => execResult(bin, args, { env: { PATH: `${BIN}:${process.env.PATH}`, KUBECONFIG: kubeconfig } });

  const claimed = await team('nodedisks', 'claim', 'db', '--min-capacity', '32Mi', '--wait');
  t.is(claimed.code, 0, claimed.stderr);
  t.regex(claimed.stdout, /bound to node-disk-/);
  const got = await team('get', 'ndc', 'db', '-o', 'json');
  t.is(got.code, 0, got.stderr);
  const claim = JSON.parse(got.stdout) as { metadata: { namespace: string }; status: { phase: string; nodeName: string; path: string } };
  t.is(claim.metadata.namespace, 'team-a');
  const status = claim.status;
  t.is(status.phase, 'Bound');
  const marker = join(work, 'nodes', status.nodeName, 'disks', `${basename(status.path)}.reserved`);
  await eventually(`the marker ${marker}`, async () => existsSync(marker), 30_000, 100);

  const big = await team('nodedisks', 'claim', 'big', '--min-capacity', '1Gi');
  t.is(big.code, 0, big.stderr);
  const why = await eventually(
    'the 1Gi claim to say why it is Pending',
    async () => {
      const out = await team('nodedisks', 'status', 'claim/big');
      return /Status: Pending: /.test(out.stdout) ? out.stdout : undefined;
    },
    30_000,
    250,
  );
  // The team reads what its claim asks, not the state of the pool (it may not read NodeDisks).
  t.regex(why, /^ {2}Status: Pending: no free disk of at least 1Gi$/m);
  t.notRegex(why, /disks fit/);

  const cluster = await team('get', 'nodedisks');
  t.not(cluster.code, 0);
  t.regex(cluster.stderr, /Forbidden/);

  const deleted = await team('delete', 'ndc', 'db', 'big');
  t.is(deleted.code, 0, deleted.stderr);
  await eventually(`the marker ${marker} to go`, async () => !existsSync(marker), 30_000, 100);
  t.is(await stopDemo(demo), 0);
});
