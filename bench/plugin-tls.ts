// What trusting only the kubeconfig's CA saves a plugin start (lib/kube/trust-only-ca.ts): fresh node
// processes that load a kubeconfig naming a CA, make the REST client and send one GET over TLS to a loopback
// server that CA signed, with the request's `ca` option (before) and with the CA as the process's whole
// store (the plugin now), taking turns; with NODE_EXTRA_CA_CERTS as this environment sets it and unset.
// Medians of wall time (spawn to exit) and of the child's own CPU time (user+sys), with the load average.
//   RUNS=40 node bench/plugin-tls.ts
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:https';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../hack/lib/paths.ts';

const RUNS = Number(process.env.RUNS ?? 40);
const run = promisify(execFile);
const dir = await mkdtemp(join(tmpdir(), 'nodedisks-bench-tls-'));
const openssl = (...args: string[]) => run('openssl', args, { cwd: dir });
const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
await openssl('req', '-x509', ...ec, '-days', '1', '-subj', '/CN=bench ca', '-keyout', 'ca.key', '-out', 'ca.crt');
await openssl('req', ...ec, '-subj', '/CN=127.0.0.1', '-keyout', 'server.key', '-out', 'server.csr');
await writeFile(join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
await openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1', '-extfile', 'san.ext', '-out', 'server.crt');
const server = createServer({ key: await readFile(join(dir, 'server.key')), cert: await readFile(join(dir, 'server.crt')) }, (_req, res) => res.writeHead(200).end('{}'));
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const addr = server.address();
const url = `https://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
const kubeconfig = join(dir, 'kubeconfig');
await writeFile(
  kubeconfig,
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: { server: url, 'certificate-authority': join(dir, 'ca.crt') } }],
    users: [{ name: 'u', user: { token: 't' } }],
    contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'x',
  }),
);
const script = (trustOnly: boolean) => `
  import { loadKubeConfig } from ${JSON.stringify(join(REPO_ROOT, 'lib/kube/kubeconfig.ts'))};
  import { RestClient } from ${JSON.stringify(join(REPO_ROOT, 'lib/kube/rest.ts'))};
  import { trustOnlyTheClusterCA } from ${JSON.stringify(join(REPO_ROOT, 'lib/kube/trust-only-ca.ts'))};
  const before = process.cpuUsage();
  const access = loadKubeConfig({ kubeconfig: ${JSON.stringify(kubeconfig)} });
  if (${trustOnly} && !trustOnlyTheClusterCA(access)) throw new Error('not trusted alone');
  const rest = new RestClient(access, { timeoutMs: 5000 });
  await rest.request('GET', '/version');
  rest.close();
  const used = process.cpuUsage(before);
  const all = process.cpuUsage();
  console.log(JSON.stringify({ requestCpuMs: (used.user + used.system) / 1000, processCpuMs: (all.user + all.system) / 1000 }));`;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const extra = process.env.NODE_EXTRA_CA_CERTS;
try {
  console.log(
    `${RUNS} runs each, taking turns; node ${process.version}; NODE_EXTRA_CA_CERTS=${extra ?? '(unset)'}; load before ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
  console.log('| NODE_EXTRA_CA_CERTS | trust | wall median | process CPU median | CPU from kubeconfig to answer, median |');
  console.log('| --- | --- | --- | --- | --- |');
  for (const env of extra ? [extra, ''] : ['']) {
    const figures = { option: { wall: [] as number[], cpu: [] as number[], req: [] as number[] }, only: { wall: [] as number[], cpu: [] as number[], req: [] as number[] } };
    for (let i = 0; i < RUNS; i++) {
      for (const mode of ['option', 'only'] as const) {
        const started = performance.now();
        const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script(mode === 'only')], { env: { ...process.env, NODE_EXTRA_CA_CERTS: env } });
        figures[mode].wall.push(performance.now() - started);
        const r = JSON.parse(stdout) as { requestCpuMs: number; processCpuMs: number };
        figures[mode].cpu.push(r.processCpuMs);
        figures[mode].req.push(r.requestCpuMs);
      }
    }
    for (const mode of ['option', 'only'] as const) {
      const f = figures[mode];
      console.log(
        `| ${env ? 'set' : 'unset'} | ${mode === 'option' ? "the request's ca option (before)" : 'the CA alone (now)'} | ${median(f.wall).toFixed(1)} ms | ${median(f.cpu).toFixed(1)} ms | ${median(f.req).toFixed(1)} ms |`,
      );
    }
  }
  console.log(
    `load after ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
} finally {
  server.closeAllConnections();
  server.close();
  await rm(dir, { recursive: true, force: true });
}
