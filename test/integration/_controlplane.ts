// One real control plane per test file: started before the file's tests, stopped after them, and its
// logs printed when a test fails.
import type { TestFn } from 'ava';
import { NodeDiskClient } from '../../api/client.ts';
import { ApiError } from '../../lib/kube/errors.ts';
import { loadKubeConfig } from '../../lib/kube/kubeconfig.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import { ControlPlane, type Identity, type StartOptions } from '../../hack/controlplane/controlplane.ts';

export function useControlPlane(test: TestFn, opts: StartOptions = {}): () => ControlPlane {
  let cp: ControlPlane | undefined;
  // serial: a test file's own before hooks (declared after this) run once the control plane is up.
  test.serial.before(async () => {
    cp = await ControlPlane.start(opts);
  });
  test.afterEach.always((t) => {
    if (!t.passed && cp) console.error(`\n${t.title} failed; control plane logs (tail):\n${cp.logs(8 * 1024)}`);
  });
  test.after.always(async () => {
    await cp?.stop();
  });
  return () => {
    if (!cp) throw new Error('control plane not started');
    return cp;
  };
}

export function restFor(identity: Identity, timeoutMs = 30_000): RestClient {
  return new RestClient(loadKubeConfig({ kubeconfig: identity.kubeconfig }), { timeoutMs });
}

export function nodeDisksFor(identity: Identity): NodeDiskClient {
  return new NodeDiskClient(restFor(identity));
}

/** Watches of NodeDisks open right now on `cp` (the API server's own gauge of long-running requests). */
export async function openNodeDiskWatches(cp: ControlPlane): Promise<number> {
  const metrics = await cp.kubectl(cp.admin(), ['get', '--raw', '/metrics']);
  return metrics
    .split('\n')
    .filter((l) => l.startsWith('apiserver_longrunning_requests{') && l.includes('resource="nodedisks"') && l.includes('verb="WATCH"'))
    .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

/** The API server's refusal of `p`, for tests that try what an identity must not do; fails the test if it was allowed. */
export async function denied(t: { fail: (m: string) => void }, p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  t.fail('the API server allowed it');
  throw new Error('allowed');
}

/** A heartbeat Lease as an agent writes it (ADR 24): named for `node`, held by `holder`, renewed now. */
export function heartbeatLease(node: string, holder = node) {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: `node-disks-agent-${node}` } as { name: string; resourceVersion?: string },
    spec: { holderIdentity: holder, leaseDurationSeconds: 240, renewTime: new Date().toISOString().replace(/Z$/, '000Z') } as {
      holderIdentity?: string;
      renewTime?: string;
      leaseDurationSeconds?: number;
    },
  };
}
