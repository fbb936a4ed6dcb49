// The harness itself: it reports the version it runs, stops without leaving processes or files, and its
// servers die with the test process even when that process is killed outright.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import test from 'ava';
import { ControlPlane, freePort } from '../../hack/controlplane/controlplane.ts';

function alive(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** PIDs of processes whose command line mentions `needle` (via /proc, no ps needed). */
async function pidsMatching(needle: string): Promise<number[]> {
  const { readdir, readFile } = await import('node:fs/promises');
  const out: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(needle)) out.push(Number(entry));
  }
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('stop() ends etcd and kube-apiserver and removes the work dir', async (t) => {
  const cp = await ControlPlane.start({ install: false });
  t.log(`kube-apiserver ${cp.binaries.kubernetesVersion}, etcd ${cp.binaries.etcdVersion} (${cp.binaries.source})`);
  const version = JSON.parse(await cp.kubectl(cp.admin(), ['version', '-o', 'json'])) as { serverVersion: { gitVersion: string } };
  t.is(version.serverVersion.gitVersion, cp.binaries.kubernetesVersion);
  const pids = [cp.etcd.pid, cp.apiserver.pid];
  const dir = cp.dir;
  t.true(pids.every(alive));
  const children = await pidsMatching(dir);
  t.true(children.length >= 2, 'etcd and kube-apiserver run with the work dir on their command lines');
  await cp.stop();
  t.false(pids.some(alive));
  t.deepEqual(await pidsMatching(dir), []);
  t.false(existsSync(dir));
});

test('servers die with a test process that is killed with SIGKILL', async (t) => {
  // A child Node process starts a control plane, prints its work dir, and is then killed outright.
  const script = `
    import { ControlPlane } from ${JSON.stringify(new URL('../../hack/controlplane/controlplane.ts', import.meta.url).href)};
    const cp = await ControlPlane.start({ install: false });
    console.log(cp.dir);
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const dir = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (b: Buffer) => resolve(b.toString().trim()));
    child.on('exit', (code) => reject(new Error(`child exited ${code} before starting the control plane`)));
  });
  t.true((await pidsMatching(dir)).length >= 2);
  child.kill('SIGKILL');
  const deadline = Date.now() + 20_000;
  while ((await pidsMatching(dir)).length > 0 && Date.now() < deadline) await sleep(200);
  t.deepEqual(await pidsMatching(dir), [], 'no etcd or kube-apiserver left behind');
  const { rm } = await import('node:fs/promises');
  await rm(dir, { recursive: true, force: true });
});

test('a port taken between being picked and being bound is picked again (etcd and kube-apiserver)', async (t) => {
  // Another process holds `taken`. The picker hands it out as etcd's client port first, then as the
  // API server's port on the next try: exactly the race of "picked free, then taken by someone else".
  const { createServer } = await import('node:net');
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  const taken = (holder.address() as { port: number }).port;
  const picks: number[] = [];
  const pickPort = async () => {
    const n = picks.length;
    const port = n === 0 || n === 5 ? taken : await freePort();
    picks.push(port);
    return port;
  };
  try {
    const cp = await ControlPlane.start({ install: false, pickPort });
    try {
      t.not(new URL(cp.server).port, String(taken));
      t.is(picks.length, 9, 'three tries of three ports each');
      t.is((await cp.kubectl(cp.admin(), ['get', '--raw', '/readyz'])).trim(), 'ok');
    } finally {
      await cp.stop();
    }
  } finally {
    holder.close();
  }
});

test('concurrent callers of an identity all get a complete kubeconfig, and one token', async (t) => {
  const cp = await ControlPlane.start();
  try {
    const { readFile } = await import('node:fs/promises');
    const { load } = await import('js-yaml');
    // Each caller reads its kubeconfig the moment its promise settles, as a test using it would.
    const read = async (p: Promise<{ kubeconfig: string; token: string }>) => {
      const id = await p;
      return { token: id.token, text: await readFile(id.kubeconfig, 'utf8') };
    };
    const got = await Promise.all([
      ...Array.from({ length: 4 }, () => read(cp.controller())),
      ...Array.from({ length: 4 }, () => read(cp.agent('harness-node-a'))),
      ...Array.from({ length: 4 }, () => read(cp.nobody())),
    ]);
    for (const { text } of got) {
      const config = load(text) as { users?: { user?: { token?: string } }[] } | undefined;
      t.truthy(config?.users?.[0]?.user?.token, `a kubeconfig was read before it was complete: ${JSON.stringify(text.slice(0, 80))}`);
    }
    for (const group of [got.slice(0, 4), got.slice(4, 8), got.slice(8)]) {
      t.is(new Set(group.map((g) => g.token)).size, 1, 'one identity, one token');
    }
  } finally {
    await cp.stop();
  }
});

test('once start() returns, the admission policies are in force: the first forbidden write is refused', async (t) => {
  const cp = await ControlPlane.start();
  try {
    const { runKubectl } = await import('../../hack/controlplane/controlplane.ts');
    // The agent's ServiceAccount, impersonated (with system:masters, so RBAC lets it through to admission):
    // its identity carries no node, which the agent policy refuses whatever the object.
    const as = ['--as', `system:serviceaccount:${cp.namespace}:node-disks-agent`, '--as-group', 'system:masters'];
    const lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'node-disks-agent-probe', namespace: cp.namespace }, spec: { holderIdentity: 'probe' } };
    const refused = await runKubectl(cp.binaries.kubectl, ['--kubeconfig', cp.admin().kubeconfig, ...as, 'create', '--dry-run=server', '-f', '-'], JSON.stringify(lease)).then(
      () => '',
      (err: Error) => err.message,
    );
    t.regex(refused, /nodedisks-agent-heartbeat\.localtest\.example\.com/, 'the heartbeat policy let the first write through');
  } finally {
    await cp.stop();
  }
});
