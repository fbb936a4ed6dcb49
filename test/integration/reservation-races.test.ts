// A manual reservation is never changed by the controller, whenever it is written: right after the
// auto-reserve label is set (the controller is about to reserve for "auto") or right after it is removed
// (the controller is about to release). Many trials run at once on separate NodeDisks, each writing the
// manual reservation the moment the API server acknowledges the label change, and every version of every
// NodeDisk is recorded: a version after the manual write that is not the manual reservation is an overwrite,
// even if it was later undone.
import test from 'ava';
import { CONDITION, FIELD_MANAGER, LABEL_AUTO_RESERVE } from '../../api/constants.ts';
import type { NodeDiskClient } from '../../api/client.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { History, reconciled } from '../harness/history.ts';
import { startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const controlPlane = useControlPlane(test);
const DISKS = 20;
const ROUNDS = 5; // DISKS × ROUNDS trials in each direction
const NODE = 'node-race';
const OWNER = 'team-db';
let work = '';
let controller: Program;
let controllerPort = 0;
const history = new History();
const names: string[] = [];
const admin = (): NodeDiskClient => nodeDisksFor(controlPlane().admin());

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-races-'));
  for (let i = 1; i <= DISKS; i++) {
    const nd = await admin().create(newNodeDisk(NODE, `disk${i}`), { fieldManager: FIELD_MANAGER.agent });
    names.push(nd.metadata.name ?? '');
  }
  await history.start(admin());
  // As many workers as trials in flight, so the controller is as quick to act as it can be.
  controller = await startController(controlPlane(), { logDir: join(work, 'logs'), extraArgs: [`--workers=${DISKS}`] });
  controllerPort = await eventually('controller http port', async () => Number(/"httpPort":(\d+)/.exec(controller.logs())?.[1]) || undefined);
  await Promise.all(names.map((n) => history.until(n, 'first reconcile', reconciled)));
});

test.afterEach.always((t) => {
  if (!t.passed) console.error(`----- controller -----\n${controller.logs(8000)}`);
});

test.after.always(async () => {
  await controller?.stop();
  await history.close();
  await rm(work, { recursive: true, force: true });
});

async function metric(line: RegExp): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${controllerPort}/metrics`)).text();
  return Number(line.exec(text)?.[1] ?? 0);
}
/** Reconciles that failed so far: a write the API server refused counts here. */
const failedReconciles = () => metric(/^nodedisks_controller_reconcile_total\{result="error"\} (\d+)$/m);
/** Writes refused as stale (409) and decided again from a fresh read: the races the trials provoked. */
const staleWrites = () => metric(/^nodedisks_controller_stale_writes_total (\d+)$/m);

const label = (name: string, value: string | null) => admin().mergePatch(name, { metadata: { labels: { [LABEL_AUTO_RESERVE]: value } } }, { fieldManager: 'kubectl-label' });

/** A person's reservation, as `kubectl patch` (even trials) or as the plugin's forced apply (odd trials) writes it. */
function reserveManually(name: string, trial: number): Promise<NodeDisk> {
  if (trial % 2 === 0) {
    return admin().mergePatch(name, { spec: { desired: { state: 'Reserved', owner: OWNER } } }, { fieldManager: 'kubectl-patch' });
  }
  return admin().apply(
    { apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDisk', metadata: { name }, spec: { desired: { state: 'Reserved', owner: OWNER } } },
    { fieldManager: FIELD_MANAGER.plugin, force: true },
  );
}

/**
 * "As soon as the label is acknowledged", spread over the next few ms: the controller's window (its
 * watch event, queue, decision and write) lasts about that long, and a fixed offset would hit only one
 * point of it.
 */
const pause = (_i: number) => Promise.resolve();

const isManual = (nd: NodeDisk) => nd.spec.desired?.state === 'Reserved' && nd.spec.desired.owner === OWNER;
const accepted = (nd: NodeDisk) => nd.status?.conditions?.find((c) => c.type === CONDITION.accepted);

interface Outcome {
  overwritten: boolean;
  detail: string;
}

/** After the manual write (at `rv`), waits for the controller to have looked at it, and judges every later version. */
async function judge(name: string, manual: NodeDisk): Promise<Outcome> {
  const rv = manual.metadata.resourceVersion ?? '';
  await history.until(name, 'the controller reconciled the manual reservation', (nd) => Number(nd.metadata.resourceVersion) >= Number(rv) && reconciled(nd));
  const bad = history.of(name, rv).find((nd) => !isManual(nd));
  return bad
    ? { overwritten: true, detail: `${name}: manual reservation at rv ${rv} became ${JSON.stringify(bad.spec.desired)} at rv ${bad.metadata.resourceVersion}` }
    : { overwritten: false, detail: '' };
}

/** Back to Available with no owner and no label, and wait until the controller has seen it. */
async function reset(name: string): Promise<void> {
  await admin().mergePatch(name, { metadata: { labels: { [LABEL_AUTO_RESERVE]: null } }, spec: { desired: { state: 'Available', owner: null } } }, { fieldManager: 'kubectl-patch' });
  await history.until(name, 'reset reconciled', (nd) => nd.spec.desired?.state === 'Available' && nd.metadata.labels?.[LABEL_AUTO_RESERVE] === undefined && reconciled(nd));
}

test.serial('a manual reservation written right after the auto-reserve label is set is never overwritten', async (t) => {
  const staleBefore = await staleWrites();
  const outcomes: Outcome[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const results = await Promise.all(
      names.map(async (name, i) => {
        await label(name, 'true');
        await pause(i);
        const manual = await reserveManually(name, round * DISKS + i);
        const outcome = await judge(name, manual);
        // The controller reports that the label could not take effect: Accepted=False, ReservedByOther.
        const last = history.latest(name)!;
        const cond = accepted(last);
        if (!outcome.overwritten && !(cond?.status === 'False' && cond.reason === 'ReservedByOther')) {
          outcome.detail = `${name}: manual reservation kept but Accepted is ${JSON.stringify(cond)}`;
        }
        await reset(name);
        return outcome;
      }),
    );
    outcomes.push(...results);
  }
  const overwrites = outcomes.filter((o) => o.overwritten);
  t.log(`label, then a manual reservation: ${outcomes.length} trials, ${overwrites.length} overwrites, ${(await staleWrites()) - staleBefore} stale writes refused and decided again`);
  t.deepEqual(
    overwrites.map((o) => o.detail),
    [],
  );
  t.deepEqual(outcomes.map((o) => o.detail).filter(Boolean), [], 'Accepted=False ReservedByOther after every kept reservation');
});

test.serial('a manual reservation written right after the auto-reserve label is removed is never released', async (t) => {
  // Start from auto reservations made by the controller.
  await Promise.all(
    names.map(async (name) => {
      await label(name, 'true');
      await history.until(name, 'auto reserved', (nd) => nd.spec.desired?.owner === 'auto' && reconciled(nd));
    }),
  );
  const failedBefore = await failedReconciles();
  const staleBefore = await staleWrites();
  const outcomes: Outcome[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const results = await Promise.all(
      names.map(async (name, i) => {
        await label(name, null);
        await pause(i);
        const manual = await reserveManually(name, round * DISKS + i);
        const outcome = await judge(name, manual);
        await reset(name);
        await label(name, 'true');
        await history.until(name, 'auto reserved again', (nd) => nd.spec.desired?.owner === 'auto' && reconciled(nd));
        return outcome;
      }),
    );
    outcomes.push(...results);
  }
  const overwrites = outcomes.filter((o) => o.overwritten);
  const refused = (await failedReconciles()) - failedBefore;
  t.log(
    `unlabel, then a manual reservation: ${outcomes.length} trials, ${overwrites.length} overwrites, ${refused} failed reconciles, ${(await staleWrites()) - staleBefore} stale writes refused and decided again`,
  );
  t.deepEqual(
    overwrites.map((o) => o.detail),
    [],
  );
  // Not even tried: a release decided from a stale version would be refused (its {Available, owner team-db}
  // breaks the CRD's rule), which is luck, not design; the controller must not send it at all.
  const failures = controller
    .logs()
    .split('\n')
    .filter((l) => l.includes('reconcile failed'))
    .slice(0, 3);
  t.is(refused, 0, `failed reconciles, first ones:\n${failures.join('\n')}`);
});
