// csi-node's tool runs through nodedisks-toolrunner (csi/toolrunner, built from the repository's module)
// give what they give when csi-node starts them itself: output, exit codes, the answers a caller accepts,
// a tool not installed, a run past its time limit, output past the limit kept. Many runs at once are each
// answered with their own output; a runner killed half way fails the runs it had with that reason, and the
// next run starts a new one. No root needed.
import { readdirSync, readFileSync } from 'node:fs';
import test, { type ExecutionContext } from 'ava';
import { NodeVolumeError } from '../../csi/node-errors.ts';
import { runTool, useToolRunner } from '../../csi/run-tool.ts';
import { ensureToolRunner } from '../../hack/csi/tools.ts';

let bin = '';
test.before(async () => {
  bin = await ensureToolRunner();
});
test.after.always(() => useToolRunner(undefined));

/** What a run gives (its result, or its error's message), started by this process and by the runner. */
async function bothWays(file: string, args: string[], o: Parameters<typeof runTool>[2]) {
  const settle = (p: Promise<unknown>) =>
    p.then(
      (r) => ({ result: r }),
      (err: NodeVolumeError) => ({ error: err.message, code: err.code }),
    );
  await useToolRunner(undefined);
  const direct = await settle(runTool(file, args, o));
  await useToolRunner(bin);
  const viaRunner = await settle(runTool(file, args, o));
  return { direct, viaRunner };
}

async function same(t: ExecutionContext, file: string, args: string[], o: Parameters<typeof runTool>[2]) {
  const { direct, viaRunner } = await bothWays(file, args, o);
  t.deepEqual(viaRunner, direct, `${file} ${args.join(' ')}`);
  return viaRunner;
}

/** The runner processes this process has started, by PID. */
function runnerPids(): number[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === process.pid && readFileSync(`/proc/${p}/comm`, 'utf8').startsWith('nodedisks-tool');
      } catch {
        return false;
      }
    })
    .map(Number);
}

test.serial('output, exit codes, accepted answers, a missing tool and the C locale are the same through the runner as without it', async (t) => {
  t.like(await same(t, 'sh', ['-c', 'echo out; echo err >&2'], { timeoutMs: 10_000 }), { result: { stdout: 'out\n', stderr: 'err\n', exitCode: 0 } });
  t.like(await same(t, 'sh', ['-c', 'echo "no such device" >&2; exit 3'], { timeoutMs: 10_000 }), {
    code: 'internal',
    error: `sh -c "echo \\"no such device\\" >&2; exit 3" failed (exit 3): no such device`,
  });
  t.like(await same(t, 'sh', ['-c', 'exit 2'], { timeoutMs: 10_000, okExitCodes: [2] }), { result: { exitCode: 2 } });
  t.like(await same(t, 'nodedisks-no-such-tool', ['x'], { timeoutMs: 10_000 }), { error: 'nodedisks-no-such-tool is not installed on this node (needed for: nodedisks-no-such-tool x)' });
  t.like(await same(t, 'sh', ['-c', 'echo "$LC_ALL"'], { timeoutMs: 10_000 }), { result: { stdout: 'C\n' } });
  // The tools' sbin dirs are on the runner's PATH as on csi-node's own.
  t.like(await same(t, 'sh', ['-c', 'command -v losetup'], { timeoutMs: 10_000 }), { result: { exitCode: 0 } });
});

test.serial('a run past its time limit is killed and said so; output past 4 MiB is refused, not cut silently', async (t) => {
  await useToolRunner(bin);
  const started = Date.now();
  await t.throwsAsync(runTool('sleep', ['30'], { timeoutMs: 1000 }), { instanceOf: NodeVolumeError, message: 'sleep 30 did not finish within 1 s (stopped with SIGKILL)' });
  t.true(Date.now() - started < 10_000);
  await t.throwsAsync(runTool('head', ['-c', String(5 * 2 ** 20), '/dev/zero'], { timeoutMs: 10_000 }), { message: /printed more than the 4 MiB kept of its output/ });
});

test.serial('200 runs at once are each answered with their own output', async (t) => {
  await useToolRunner(bin);
  const outs = await Promise.all(Array.from({ length: 200 }, (_, i) => runTool('sh', ['-c', `echo ${i}`], { timeoutMs: 30_000 })));
  t.deepEqual(
    outs.map((o) => o.stdout),
    Array.from({ length: 200 }, (_, i) => `${i}\n`),
  );
});

test.serial('a runner killed half way fails the runs it had with that reason; the next run starts a new runner', async (t) => {
  await useToolRunner(bin);
  await runTool('true', [], { timeoutMs: 10_000 });
  const [pid] = runnerPids();
  t.truthy(pid, 'a runner runs');
  const cut = runTool('sleep', ['30'], { timeoutMs: 60_000 });
  await new Promise((r) => setTimeout(r, 200));
  process.kill(pid!, 'SIGKILL');
  await t.throwsAsync(cut, { instanceOf: NodeVolumeError, message: /^cannot run sleep 30: the tool runner .*nodedisks-toolrunner exited \(SIGKILL\)/ });
  t.is((await runTool('sh', ['-c', 'echo again'], { timeoutMs: 10_000 })).stdout, 'again\n');
  t.not(runnerPids()[0], pid);
});

test.serial('a runner that is not there fails each run with why', async (t) => {
  await useToolRunner('/nonexistent/nodedisks-toolrunner');
  await t.throwsAsync(runTool('true', [], { timeoutMs: 10_000 }), {
    message: /^cannot run true: the tool runner \/nonexistent\/nodedisks-toolrunner could not be started \(spawn \/nonexistent\/nodedisks-toolrunner ENOENT\)/,
  });
  await useToolRunner(undefined);
});
