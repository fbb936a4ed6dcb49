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
import { newNodeDisk } from '../fixtures/nodedisks.ts';
import { History, reconciled } from '../harness/history.ts';
import { startController, type Program } from '../harness/programs.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const controlPlane = useControlPlane(test);
const DISKS = 20;
const ROUNDS = 3; // DISKS × ROUNDS trials in each direction
const NODE = 'node-race';
const OWNER = 'team-db';
let work = '';
let controller: Program;
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

const label = (name: string, value: string | null) =>
  admin().mergePatch(name, { metadata: { labels: { [LABEL_AUTO_RESERVE]: value } } }, { fieldManager: 'kubectl-label' });

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

const isManual = (nd: NodeDisk) => nd.spec.desired?.state === 'Reserved' && nd.spec.desired.owner === OWNER;
const accepted = (nd: NodeDisk) => nd.status?.controller?.conditions?.find((c) => c.type === CONDITION.accepted);

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
  const outcomes: Outcome[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const results = await Promise.all(
      names.map(async (name, i) => {
        await label(name, 'true');
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
  t.log(`label, then a manual reservation: ${outcomes.length} trials, ${overwrites.length} overwrites`);
  t.deepEqual(overwrites.map((o) => o.detail), []);
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
  const outcomes: Outcome[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const results = await Promise.all(
      names.map(async (name, i) => {
        await label(name, null);
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
  t.log(`unlabel, then a manual reservation: ${outcomes.length} trials, ${overwrites.length} overwrites`);
  t.deepEqual(overwrites.map((o) => o.detail), []);
});
