// `kubectl nodedisks wait` against `kubectl wait` as the oracle, on the real API server: the same disks,
// the same --for/--timeout/-l/--all arguments (kubectl names them nodedisk/<name>), the same stdout lines
// ("nodedisk.localtest.example.com/<name> condition met", in the same order) and the same success or
// failure. On failure the plugin keeps its documented exit codes (6 timeout, 3 not found; kubectl: 1)
// and its own message, which says what to look at. Usage errors (a bad --for) exit 2 with a message
// naming the forms; kubectl refuses them too.
import test from 'ava';
import { API_VERSION, KIND } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { Condition } from '../../api/v1alpha1/types.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { execResult, PLUGIN_BIN, type ExecResult } from '../harness/exec.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { nodeDisksFor, openNodeDiskWatches, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const admin = () => nodeDisksFor(controlPlane().admin());
const meta = (name: string) => ({ apiVersion: API_VERSION, kind: KIND, metadata: { name } }) as const;

const READY = nodeDiskName('node-a', 'disk1'); // Reserved by alice, Ready=True
const PROGRESSING = nodeDiskName('node-a', 'disk2'); // Ready=False
const STALE = nodeDiskName('node-b', 'disk1'); // Ready=True, but for an older generation
const BARE = nodeDiskName('node-b', 'disk2'); // no status written
const MISSING = nodeDiskName('node-z', 'disk9');

const env = () => ({ KUBECONFIG: controlPlane().admin().kubeconfig });
const plugin = (args: string[]) => execResult(PLUGIN_BIN, args, { env: env(), timeoutMs: 90_000 });
const kubectl = (args: string[]) => execResult(controlPlane().binaries.kubectl, args, { env: env(), timeoutMs: 90_000 });

/** The same wait through both: kubectl takes nodedisk/<name> (or the resource, for -l/--all). */
async function both(names: string[], flags: string[]): Promise<{ kc: ExecResult; nd: ExecResult }> {
  const [kc, nd] = await Promise.all([kubectl(['wait', ...(names.length ? names.map((n) => `nodedisk/${n}`) : ['nodedisk']), ...flags]), plugin(['wait', ...names, ...flags])]);
  return { kc, nd };
}

function condition(type: string, status: Condition['status'], generation: number): Condition {
  return { type, status, reason: status === 'True' ? 'PhaseMatchesDesired' : 'Progressing', message: 'seeded', lastTransitionTime: '2026-01-02T03:04:05Z', observedGeneration: generation };
}

async function report(name: string, generation: number, ready: Condition['status'], phase: 'Available' | 'Reserved', observed = generation): Promise<void> {
  await admin().applyStatus(
    {
      ...meta(name),
      status: { node: { phase, capacityBytes: 67108864 }, observedGeneration: observed, conditions: [condition('Accepted', 'True', observed), condition('Ready', ready, observed)] },
    },
    { fieldManager: 'wait-parity', force: true },
  );
}

test.serial.before(async () => {
  for (const [node, disk] of [
    ['node-a', 'disk1'],
    ['node-a', 'disk2'],
    ['node-b', 'disk1'],
    ['node-b', 'disk2'],
  ] as const) {
    await admin().create(newNodeDisk(node, disk), { fieldManager: 'wait-parity' });
  }
  const reserved = await admin().apply({ ...meta(READY), spec: { desired: { state: 'Reserved', owner: 'alice' } } }, { fieldManager: 'wait-parity', force: true });
  await report(READY, reserved.metadata.generation!, 'True', 'Reserved');
  await report(PROGRESSING, 1, 'False', 'Available');
  const changed = await admin().apply({ ...meta(STALE), spec: { desired: { state: 'Reserved', owner: 'bob' } } }, { fieldManager: 'wait-parity', force: true });
  await report(STALE, changed.metadata.generation!, 'True', 'Reserved', changed.metadata.generation! - 1);
});

const met = (...names: string[]) => names.map((n) => `nodedisk.localtest.example.com/${n} condition met\n`).join('');

const CASES: [title: string, names: string[], flags: string[], stdout: string, ok: boolean][] = [
  ['condition=Ready', [READY], ['--for=condition=Ready'], met(READY), true],
  ['condition type and value are case-insensitive', [READY], ['--for=condition=ready=TRUE'], met(READY), true],
  ['condition=Ready=false', [PROGRESSING], ['--for=condition=Ready=false'], met(PROGRESSING), true],
  ['jsonpath with a value', [READY], ['--for=jsonpath={.status.node.phase}=Reserved'], met(READY), true],
  ['jsonpath with a number', [READY], ['--for=jsonpath={.status.node.capacityBytes}=67108864'], met(READY), true],
  ['jsonpath with a quoted value, as a shell may pass it', [READY], ["--for=jsonpath={.spec.desired.owner}='alice'"], met(READY), true],
  ['jsonpath relaxed form without braces', [READY], ['--for=jsonpath=.spec.desired.state=Reserved'], met(READY), true],
  ['jsonpath with a filter (== is not the separator)', [READY], ['--for=jsonpath={.status.conditions[?(@.type=="Ready")].status}=True'], met(READY), true],
  ['jsonpath existence form', [READY], ['--for=jsonpath={.spec.desired.owner}'], met(READY), true],
  ['jsonpath existence of an object', [READY], ['--for=jsonpath={.status.node}'], met(READY), true],
  ['several names print in the order given', [PROGRESSING, READY], ['--for=jsonpath={.spec.nodeName}=node-a'], met(PROGRESSING, READY), true],
  ['--all prints in list order', [], ['--all', '--for=jsonpath={.metadata.name}'], met(READY, PROGRESSING, STALE, BARE), true],
  [
    '-l with a set-based selector: the met disk printed, then the stale one times out',
    [],
    ['-l', 'localtest.example.com/disk in (disk1)', '--for=condition=Ready', '--timeout=2s'],
    met(READY),
    false,
  ],
  ['-l where every disk is met', [], ['-l', 'localtest.example.com/node=node-a', '--for=jsonpath={.spec.nodeName}=node-a'], met(READY, PROGRESSING), true],
  ['--timeout=0 when met', [READY], ['--for=condition=Ready', '--timeout=0'], met(READY), true],
  ['--timeout=0 with a name repeated prints it twice', [READY, PROGRESSING, READY], ['--for=condition=Accepted', '--timeout=0'], met(READY, PROGRESSING, READY), true],
  ['--timeout=0 checks every disk once: the met ones printed, the unmet one fails', [READY, PROGRESSING, READY], ['--for=condition=Ready', '--timeout=0'], met(READY, READY), false],
  ['a timeout on the first disk: the met one after it is not printed', [PROGRESSING, READY], ['--for=condition=Ready', '--timeout=2s'], '', false],
  ['--timeout=-1s (a week) when met', [READY], ['--for=condition=Ready', '--timeout=-1s'], met(READY), true],
  ['a condition for an older generation is not met', [STALE], ['--for=condition=Ready', '--timeout=0'], '', false],
  ['a disk with no status has no condition', [BARE], ['--for=condition=Ready', '--timeout=0'], '', false],
  ['a timeout', [PROGRESSING], ['--for=condition=Ready', '--timeout=1s'], '', false],
  ['--for=delete of a disk that does not exist: nothing to wait for', [MISSING], ['--for=delete', '--timeout=5s'], '', true],
  ['--for=delete of a selection that matches nothing', [], ['-l', 'localtest.example.com/node=nowhere', '--for=delete'], '', true],
  ['--for=delete of a disk that stays, --timeout=0', [READY], ['--for=delete', '--timeout=0'], '', false],
  ['a condition on a disk that does not exist', [MISSING], ['--for=condition=Ready', '--timeout=2s'], '', false],
];

for (const [title, names, flags, stdout, ok] of CASES) {
  test.serial(`wait like kubectl wait: ${title}`, async (t) => {
    const { kc, nd } = await both(names, flags);
    t.is(kc.stdout, stdout, `kubectl: ${kc.stderr}`);
    t.is(nd.stdout, kc.stdout, `plugin: ${nd.stderr}`);
    t.is(kc.code === 0, ok, kc.stderr);
    t.is(nd.code === 0, ok, nd.stderr);
    if (!ok) t.regex(nd.stderr, /^error: /);
  });
}

const openWatches = () => openNodeDiskWatches(controlPlane());

/** Starts the same wait through both, lets both reach their watch, changes the world, and compares. */
async function whileWaiting(names: string[], flags: string[], change: () => Promise<void>): Promise<{ kc: ExecResult; nd: ExecResult }> {
  const before = await openWatches();
  const running = both(names, flags);
  await eventually('both waits to be watching', async () => (await openWatches()) >= before + 2, 60_000, 100);
  await change();
  return await running;
}

test.serial('wait like kubectl wait: a condition that becomes True while waiting', async (t) => {
  const { kc, nd } = await whileWaiting([PROGRESSING], ['--for=condition=Ready', '--timeout=60s'], () => report(PROGRESSING, 1, 'True', 'Available'));
  t.is(kc.code, 0, kc.stderr);
  t.is(nd.code, 0, nd.stderr);
  t.is(nd.stdout, kc.stdout);
  t.is(kc.stdout, met(PROGRESSING));
});

test.serial('wait like kubectl wait: --for=delete of a disk deleted while waiting, with --timeout=-1s', async (t) => {
  const { kc, nd } = await whileWaiting([BARE], ['--for=delete', '--timeout=-1s'], async () => {
    await controlPlane().kubectl(controlPlane().admin(), ['delete', 'nodedisk', BARE, '--wait=false']);
  });
  t.is(kc.code, 0, kc.stderr);
  t.is(nd.code, 0, nd.stderr);
  t.is(nd.stdout, kc.stdout);
  t.is(kc.stdout, met(BARE));
});

test.serial('wait like kubectl wait: --for=create of a disk created while waiting', async (t) => {
  const name = nodeDiskName('node-c', 'disk1');
  const [kc, nd] = await Promise.all([
    kubectl(['wait', `nodedisk/${name}`, '--for=create', '--timeout=60s']),
    (async () => {
      const r = plugin(['wait', name, '--for=create', '--timeout=60s']);
      // kubectl polls every 0.5 s; the plugin watches: create once the plugin's watch is open.
      await eventually('the plugin to be watching', async () => (await openWatches()) >= 1, 60_000, 100);
      await admin().create(newNodeDisk('node-c', 'disk1'), { fieldManager: 'wait-parity' });
      return await r;
    })(),
  ]);
  t.is(kc.code, 0, kc.stderr);
  t.is(nd.code, 0, nd.stderr);
  t.is(nd.stdout, kc.stdout);
  t.is(kc.stdout, met(name));
});

test('the plugin also takes --timeout=-1 (kubectl wants a unit: -1s) and waits without a limit', async (t) => {
  const r = await plugin(['wait', READY, '--for=condition=Ready', '--timeout=-1']);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, met(READY));
  const k = await kubectl(['wait', `nodedisk/${READY}`, '--for=condition=Ready', '--timeout=-1']);
  t.not(k.code, 0);
  t.regex(k.stderr, /missing unit in duration "-1"/);
});

test('exit codes on failure stay the documented ones: 6 on a timeout, 3 for a disk that does not exist', async (t) => {
  const timeout = await plugin(['wait', PROGRESSING, '--for=jsonpath={.status.node.phase}=Reserved', '--timeout=1s']);
  t.is(timeout.code, 6);
  t.regex(timeout.stderr, new RegExp(`^error: timed out after 1s waiting for \\{\\.status\\.node\\.phase\\}=Reserved on ${PROGRESSING}; see why with: kubectl nodedisks status ${PROGRESSING}`));
  const once = await plugin(['wait', STALE, '--for=condition=Ready', '--timeout=0']);
  t.is(once.code, 6);
  t.regex(once.stderr, new RegExp(`condition Ready=true not met for ${STALE} \\(--timeout=0 checks once\\)`));
  const missing = await plugin(['wait', MISSING, '--for=condition=Ready']);
  t.is(missing.code, 3);
  t.regex(missing.stderr, new RegExp(`"${MISSING}" not found`));
});

const USAGE: [title: string, args: string[], message: RegExp][] = [
  ['an unknown --for', [READY, '--for=ready'], /--for must be delete, create, condition=<Type>\[=<value>\], jsonpath='\{<path>\}'\[=<value>\] or phase=<Phase>; got "ready"/],
  ['no --for', [READY], /--for is required: delete, create, condition=/],
  ['an empty condition name', [READY, '--for=condition='], /name the condition, e\.g\. --for=condition=Ready/],
  ['an empty jsonpath', [READY, '--for=jsonpath='], /the JSONPath expression is empty/],
  ['a jsonpath with = but no value', [READY, '--for=jsonpath={.status.node.phase}='], /a value must follow the =/],
  ['a jsonpath with two =', [READY, '--for=jsonpath={.status.node.phase}=a=b'], /one = between the path and the value/],
  ['a jsonpath template, not one expression', [READY, '--for=jsonpath={.a}{.b}=x'], /unexpected path "\{\.a\}\{\.b\}"/],
  ['a jsonpath that matches several values', [READY, '--for=jsonpath={.status.conditions[*].type}=Ready'], /matches more than one value \(2\); narrow it with a filter/],
  ['a jsonpath to an object compared with a value', [READY, '--for=jsonpath={.status.node}=x'], /leads to a nested object or list/],
  ['a bad phase', [READY, '--for=phase=Ready'], /the phase is one of Discovered, Available, Reserved, Missing, Error/],
  ['names and --all', [READY, '--all', '--for=delete'], /name disks or select them with -l\/--node\/--all, not both/],
  ['neither names nor a selection', ['--for=delete'], /wait needs disk names, a selection \(-l\/--node\) or --all/],
  ['a bad --timeout', [READY, '--for=delete', '--timeout=abc'], /invalid --timeout "abc"/],
];

for (const [title, args, message] of USAGE) {
  test(`wait usage error, exit 2 (kubectl refuses it too): ${title}`, async (t) => {
    const r = await plugin(['wait', ...args]);
    t.is(r.code, 2, r.stderr);
    t.regex(r.stderr, message);
    t.is(r.stdout, '');
    const names = args.filter((a) => !a.startsWith('-'));
    const k = await kubectl(['wait', ...(names.length ? names.map((n) => `nodedisk/${n}`) : ['nodedisk']), ...args.filter((a) => a.startsWith('-'))]);
    t.not(k.code, 0, `kubectl accepted it: ${k.stdout}`);
  });
}
