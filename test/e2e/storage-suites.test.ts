// Kubernetes' own storage suites against the CSI driver, in CI: the subset of `npm run test:storage` in
// hack/e2e-storage/selection.ts (CI_FOCUS) on a cluster of its own, which must leave nothing behind. The
// whole run (every spec of the driver) is `sudo npm run test:storage` (`-- --drives` for a class of drives);
// its figures are in docs/benchmarks.md. The same subset runs twice: on disk images (the install's class),
// and on stand-in drives through a class of drives, with no images on the nodes.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { readSysctls } from '../../hack/cluster/host.ts';
import { assertNothingLeft } from '../../hack/cluster/run.ts';
import { runStorageSuites } from '../../hack/e2e-storage/run.ts';
import { CI_FOCUS, CI_MIN_PASSED } from '../../hack/e2e-storage/selection.ts';
import { MINUTES } from './_nodedisks.ts';

async function suitesPass(t: ExecutionContext, drives: boolean): Promise<void> {
  t.timeout(60 * MINUTES);
  const before = await readSysctls();
  const out = mkdtempSync(join(tmpdir(), 'nodedisks-storage-e2e-'));
  try {
    const s = await runStorageSuites({ focus: CI_FOCUS, out, echo: false, drives, log: (l) => t.log(l) });
    t.deepEqual(s.failures, [], `e2e.test's output: ${join(out, 'e2e.log')}`);
    t.true(s.passed >= CI_MIN_PASSED, `${s.passed} specs passed, fewer than the ${CI_MIN_PASSED} the focus selects`);
    t.false('(no message)' in s.skipReasons, 'a spec was skipped without a reason');
    // Each spec's volumes are on drives (there is nothing else), each wiped for the next once deleted.
    if (drives) t.true((s.drivesWipedAfterUse ?? 0) >= 3, `only ${s.drivesWipedAfterUse} drives backed a volume`);
    await assertNothingLeft(t, before);
    rmSync(out, { recursive: true, force: true });
  } catch (err) {
    t.log(`the run's report and e2e.test's output stay in ${out}`);
    throw err;
  }
}

test.serial('the storage suites of Kubernetes pass for the CSI driver, each skip with its reason, and the cluster leaves nothing', (t) => suitesPass(t, false));

test.serial('the storage suites pass for a class of drives: formatted, mounted and bound straight on the drive, wiped between specs', (t) => suitesPass(t, true));
