// What the agent acts on when its view of the API server lags or fails: the agent in this process, against
// a real API server, with only the delivery of its watch events in the test's hands (held back, or a watch
// that ends at once, as behind a proxy that closes long requests).
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import type { NodeDiskClient } from '../../api/client.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { Agent } from '../../agent/agent.ts';
import { agentMetrics } from '../../agent/metrics.ts';
import type { WatchEvent } from '../../lib/kube/watch.ts';
import { createLogger } from '../../lib/runtime/log.ts';
import { SYSTEM_NAMESPACE } from '../../hack/controlplane/controlplane.ts';
import { seedDisks } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { nodeDisksFor, restFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
let work = '';
const admin = () => nodeDisksFor(controlPlane().admin());

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-agent-view-'));
});
test.after.always(async () => {
  await rm(work, { recursive: true, force: true });
});

/**
 * An agent of `node` in this process. Its NodeDisk watch passes every event on, unless the test holds them
 * (`hold(true)`: kept back until `deliver` hands over those it picks) or ends watches (`endWatches(true)`:
 * the open watch ends, and every new one ends at once with no event, as behind a proxy that closes them).
 */
async function inProcessAgent(t: import('ava').ExecutionContext, node: string, o: { heartbeatMs?: number } = {}) {
  const dir = join(work, node, 'disks');
  await seedDisks(dir, 1, 4096);
  const client: NodeDiskClient = nodeDisksFor(controlPlane().admin());
  const realWatch = client.watch.bind(client);
  const realGet = client.get.bind(client);
  let holding = false;
  let ending = false;
  let gets = 0;
  const held: WatchEvent<NodeDisk>[] = [];
  const ready: WatchEvent<NodeDisk>[] = [];
  const wakers = new Set<() => void>();
  const wakeAll = () => {
    for (const w of [...wakers]) w();
  };
  client.get = async (name: string) => {
    gets++;
    return await realGet(name);
  };
  client.watch = async function* (w, signal) {
    if (ending) {
      await new Promise((r) => setImmediate(r)); // a request is I/O: a watch loop must never starve the event loop
      return;
    }
    const inner = new AbortController();
    const stopInner = () => inner.abort();
    signal?.addEventListener('abort', stopInner, { once: true });
    let done = false;
    let failure: unknown;
    void (async () => {
      try {
        for await (const ev of realWatch(w, inner.signal)) {
          (holding && ev.type !== 'BOOKMARK' && ev.type !== 'ERROR' ? held : ready).push(ev);
          wakeAll();
        }
      } catch (err) {
        failure = err;
      }
      done = true;
      wakeAll();
    })();
    try {
      for (;;) {
        if (ending || signal?.aborted) return;
        const ev = ready.shift();
        if (ev) {
          yield ev;
          continue;
        }
        if (done) {
          if (failure) throw failure;
          return;
        }
        await new Promise<void>((resolve) => {
          const wake = () => {
            wakers.delete(wake);
            resolve();
          };
          wakers.add(wake);
        });
      }
    } finally {
      inner.abort();
      signal?.removeEventListener('abort', stopInner);
    }
  };
  const metrics = agentMetrics();
  let renewals = 0;
  const countHeartbeat = metrics.heartbeats.inc.bind(metrics.heartbeats) as (labels: { result: string }) => void;
  metrics.heartbeats.inc = ((labels: { result: string }) => {
    if (labels.result === 'renewed') renewals++;
    countHeartbeat(labels);
  }) as typeof metrics.heartbeats.inc;
  const lines: string[] = [];
  const agent = new Agent({
    client,
    nodeName: node,
    diskDir: dir,
    hostDiskDir: dir,
    heartbeatMs: o.heartbeatMs ?? 60_000,
    leaseNamespace: SYSTEM_NAMESPACE,
    rescanMs: 60_000,
    log: createLogger('node-disks-agent', { level: 'debug', write: (l: string) => void lines.push(l) }),
    metrics,
  });
  const stop = new AbortController();
  const running = agent.run(stop.signal);
  t.teardown(async () => {
    stop.abort();
    wakeAll();
    await running;
  });
  t.teardown(() => {
    if (!t.passed) console.error(`----- agent ${node} -----\n${lines.slice(-60).join('\n')}`);
  });
  return {
    agent,
    dir,
    metrics,
    gets: () => gets,
    /** Heartbeat Lease renewals that went through. */
    renewals: () => renewals,
    /** Markers the agent removed, from its log. */
    removes: () => lines.filter((l) => l.includes('reservation marker removed')).length,
    held: () => held.length,
    hold: (on: boolean) => {
      holding = on;
    },
    /** Hands the held events that `pick` chooses to the agent's watch, in order. */
    deliver: (pick: (ev: WatchEvent<NodeDisk>) => boolean) => {
      for (let i = 0; i < held.length; ) {
        if (pick(held[i]!)) ready.push(...held.splice(i, 1));
        else i++;
      }
      wakeAll();
    },
    endWatches: (on: boolean) => {
      ending = on;
      wakeAll();
    },
  };
}

const desiredOf = (ev: WatchEvent<NodeDisk>) => (ev.type === 'ERROR' ? undefined : ev.object.spec.desired?.state);
const patchDesired = (name: string, desired: object) => admin().mergePatch(name, { spec: { desired } }, { fieldManager: 'test-person' });

test.serial('a release the watch delivers late does not remove the marker of a disk reserved again since: the agent reads fresh first', async (t) => {
  const node = 'node-late-release';
  const name = nodeDiskName(node, 'disk1');
  const a = await inProcessAgent(t, node);
  await eventually(
    'the NodeDisk reported Available',
    async () =>
      (
        await admin()
          .get(name)
          .catch(() => undefined)
      )?.status?.node?.phase === 'Available',
    30_000,
  );
  await patchDesired(name, { state: 'Reserved', owner: 'team-db' });
  const marker = join(a.dir, 'disk1.img.reserved');
  await eventually('the marker written', async () => existsSync(marker) && (await admin().get(name)).status?.node?.phase === 'Reserved', 30_000);

  // The server sees a release, then a new reservation; the agent's watch is held back meanwhile.
  a.hold(true);
  await patchDesired(name, { state: 'Available', owner: null });
  await patchDesired(name, { state: 'Reserved', owner: 'team-web' });
  await eventually('both changes held back from the agent', async () => a.held() >= 2);
  // The agent's cache learns of the release only: it says Available while the server says Reserved.
  const getsBefore = a.gets();
  a.deliver((ev) => desiredOf(ev) === 'Available');
  await eventually('the agent acted on the late release (read fresh, or removed the marker)', async () => a.gets() > getsBefore || a.removes() > 0);
  t.is(a.removes(), 0, 'no marker removed');
  t.true(existsSync(marker), 'the marker of the disk reserved again is kept');
  // And once the watch catches up, nothing changes: the disk stays reserved, its marker in place.
  a.hold(false);
  a.deliver(() => true);
  await eventually('the agent reports the reservation', async () => (await admin().get(name)).status?.node?.phase === 'Reserved');
  t.is(a.removes(), 0);
  t.true(existsSync(marker));
});

const lease = (node: string) =>
  restFor(controlPlane().admin())
    .request<{ spec: { renewTime?: string } }>('GET', `/apis/coordination.k8s.io/v1/namespaces/${SYSTEM_NAMESPACE}/leases/node-disks-agent-${node}`)
    .then(
      (l) => l.spec.renewTime,
      () => undefined,
    );

test.serial('while every watch of its NodeDisks ends at once the agent does not renew its heartbeat Lease, and says why', async (t) => {
  const node = 'node-watch-cut';
  const a = await inProcessAgent(t, node, { heartbeatMs: 1000 });
  const first = await eventually('the heartbeat Lease renewed', async () => lease(node), 30_000);
  await eventually('renewed again', async () => ((await lease(node)) ?? first) !== first, 10_000);

  a.endWatches(true);
  await eventually('readiness says it cannot watch', async () => /cannot list or watch NodeDisks: .*watch ended at once/.test(a.agent.readiness() ?? ''), 10_000);
  const renewedBefore = a.renewals();
  // Four heartbeat periods (1 s each): four renewals today; none now but one that was already on its way.
  const deadline = Date.now() + 4000;
  await eventually('four heartbeat periods to pass', async () => Date.now() >= deadline, 6000);
  t.true(a.renewals() - renewedBefore <= 1, `${a.renewals() - renewedBefore} renewals while the agent cannot watch its NodeDisks`);
  const stopped = await lease(node);
  const deadline2 = Date.now() + 2000;
  await eventually('two more periods to pass', async () => Date.now() >= deadline2, 4000);
  t.is(await lease(node), stopped, 'the Lease is left to lapse');

  a.endWatches(false);
  await eventually('renewed again once it can watch', async () => ((await lease(node)) ?? stopped) !== stopped, 40_000);
  t.is(a.agent.readiness(), undefined);
});
