// The controller's /readyz tells whether it can do its job, not only whether it started: when the API
// server refuses its writes (here: its RBAC loses `patch`), it turns unready and says why; when writes
// go through again, it is ready again and the work it could not do is done.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { FIELD_MANAGER, LABEL_AUTO_RESERVE } from '../../api/constants.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
let work = '';
let controller: Program | undefined;

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-readiness-'));
});
test.afterEach.always((t) => {
  if (!t.passed && controller) console.error(`----- controller -----\n${controller.logs(8000)}`);
});
test.after.always(async () => {
  await controller?.stop();
  await rm(work, { recursive: true, force: true });
});

const portOf = (p: Program) => eventually(`${p.name} http port`, async () => Number(/"httpPort":(\d+)/.exec(p.logs())?.[1]) || undefined);
async function readyz(p: Program): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${await portOf(p)}/readyz`, { signal: AbortSignal.timeout(2000) });
  return { status: res.status, body: await res.text() };
}

test.serial('a controller whose writes are refused is not ready, says why, and recovers when they are allowed again', async (t) => {
  const cp = controlPlane();
  const kubectl = (...args: string[]) => cp.kubectl(cp.admin(), args);
  const client = nodeDisksFor(cp.admin());
  const name = (await client.create(newNodeDisk('node-ready', 'disk1'), { fieldManager: FIELD_MANAGER.agent })).metadata.name ?? '';
  controller = await startController(cp, { logDir: join(work, 'logs'), identity: 'ready-a' });
  const p = controller;
  await eventually('status reported', async () => (await client.get(name)).status?.controller?.observedGeneration === 1);
  await eventually('ready, as the leader at work', async () => (await readyz(p)).status === 200);

  // Take `patch` away from the controller: it can still watch, but no longer write.
  await kubectl(
    'patch',
    'clusterrole',
    'node-disks-operator',
    '--type=json',
    '-p',
    JSON.stringify([
      { op: 'replace', path: '/rules/0/verbs', value: ['get', 'list', 'watch'] },
      { op: 'replace', path: '/rules/1/verbs', value: ['get'] },
    ]),
  );
  try {
    await client.mergePatch(name, { metadata: { labels: { [LABEL_AUTO_RESERVE]: 'true' } } }, { fieldManager: 'kubectl-label' });
    const unready = await eventually('unready', async () => {
      const r = await readyz(p);
      return r.status === 503 ? r.body : undefined;
    });
    t.regex(unready, new RegExp(`the last write failed \\(nodedisk ${name}\\): .*forbidden`));
  } finally {
    await kubectl('apply', '--server-side', '--force-conflicts', '-k', join(REPO_ROOT, 'kustomize', 'rbac'));
  }
  await eventually('reserved once writes are allowed', async () => (await client.get(name)).spec.desired?.owner === 'auto', 60_000);
  await eventually('ready again', async () => (await readyz(p)).status === 200);
});
