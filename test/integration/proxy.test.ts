// Proxies, as kubectl honours them: a cluster's proxy-url (http, https, socks5) and HTTPS_PROXY/NO_PROXY,
// through real proxies (test/harness/forward-proxies.ts) to the real API server, with the plugin run by the
// real kubectl next to `kubectl get` on the same kubeconfig and environment, and the REST client that the
// agent and controller use. The server is named nodedisks-apiserver.invalid, a name that never resolves
// (RFC 2606): only the proxy knows it, so an answer proves the request went through the proxy.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { load, dump } from 'js-yaml';
import { NodeDiskClient } from '../../api/client.ts';
import { loadKubeConfig } from '../../lib/kube/kubeconfig.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { execResult, type ExecResult } from '../harness/exec.ts';
import { startConnectProxy, startForwarder, startSocks5Proxy, type ForwardProxy } from '../harness/forward-proxies.ts';
import { useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const BIN = join(REPO_ROOT, 'dist', 'bin');
/** A SAN of the API server's self-signed serving certificate, used as tls-server-name. */
const SAN = 'kubernetes';
const HIDDEN = 'nodedisks-apiserver.invalid';

let work = '';
let apiPort = 0;
let connectProxy: ForwardProxy;
let tlsProxy: ForwardProxy;
let socksProxy: ForwardProxy;
let proxyCa = '';
let forwarder: Awaited<ReturnType<typeof startForwarder>>;
let files = 0;

/** A copy of the admin kubeconfig whose cluster is changed by `cluster`. */
async function kubeconfig(cluster: Record<string, string | boolean | undefined>): Promise<string> {
  const cfg = load(readFileSync(controlPlane().admin().kubeconfig, 'utf8')) as { clusters: { cluster: Record<string, unknown> }[] };
  for (const [k, v] of Object.entries(cluster)) {
    if (v === undefined) delete cfg.clusters[0]!.cluster[k];
    else cfg.clusters[0]!.cluster[k] = v;
  }
  const path = join(work, `kubeconfig-${++files}.yaml`);
  await writeFile(path, dump(cfg), { mode: 0o600 });
  return path;
}

/** Only the proxy variables a case sets: the machine's own (if any) must not leak into a case. */
function envWith(kubeconfigPath: string, vars: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${BIN}:${process.env.PATH}`, KUBECONFIG: kubeconfigPath };
  for (const k of ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'NO_PROXY', 'no_proxy', 'ALL_PROXY', 'all_proxy']) delete env[k];
  // Both clients trust the https proxy's own CA: Node through NODE_EXTRA_CA_CERTS, Go through SSL_CERT_FILE.
  return { ...env, NODE_EXTRA_CA_CERTS: proxyCa, SSL_CERT_FILE: proxyCa, ...vars };
}

const plugin = (env: NodeJS.ProcessEnv): Promise<ExecResult> => execResult('kubectl', ['nodedisks', 'list', '--request-timeout=20s'], { env });
const kubectlGet = (env: NodeJS.ProcessEnv): Promise<ExecResult> => execResult('kubectl', ['get', 'nodedisks', '--request-timeout=20s'], { env });

/** How many tunnels `run` opened through `proxy`, and its result. */
async function through(proxy: ForwardProxy, run: () => Promise<ExecResult>): Promise<{ tunnels: string[]; result: ExecResult }> {
  const before = proxy.targets.length;
  const result = await run();
  return { tunnels: proxy.targets.slice(before), result };
}

test.serial.before(async () => {
  if (!existsSync(join(BIN, 'kubectl-nodedisks'))) throw new Error('run npm run build first (npm test does)');
  work = await mkdtemp(join(tmpdir(), 'nodedisks-proxy-'));
  apiPort = Number(new URL(controlPlane().server).port);
  const hosts = { [HIDDEN]: '127.0.0.1' };
  await promisify(execFile)('openssl', [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    '/CN=nodedisks test proxy',
    '-addext',
    'subjectAltName=IP:127.0.0.1',
    '-keyout',
    join(work, 'proxy.key'),
    '-out',
    join(work, 'proxy.crt'),
  ]);
  proxyCa = join(work, 'proxy.crt');
  connectProxy = await startConnectProxy({ hosts });
  tlsProxy = await startConnectProxy({ hosts, tls: { key: readFileSync(join(work, 'proxy.key')), cert: readFileSync(proxyCa) } });
  socksProxy = await startSocks5Proxy({ hosts });
  // NO_PROXY by address needs an address that is not loopback (kubectl never proxies loopback): this
  // machine's own, forwarded to the API server.
  const own = Object.values(networkInterfaces())
    .flat()
    .find((i) => i && i.family === 'IPv4' && !i.internal);
  if (!own) throw new Error('this test needs a non-loopback IPv4 address on the machine');
  forwarder = await startForwarder(own.address, { host: '127.0.0.1', port: apiPort });
});
test.after.always(async () => {
  await Promise.all([connectProxy, tlsProxy, socksProxy, forwarder].map((p) => p?.stop()));
  if (work) await rm(work, { recursive: true, force: true });
});

for (const scheme of ['http', 'https', 'socks5'] as const) {
  test.serial(`proxy-url ${scheme}: the plugin and kubectl both reach the API server only through the proxy`, async (t) => {
    const proxy = scheme === 'http' ? connectProxy : scheme === 'https' ? tlsProxy : socksProxy;
    // kubectl checks an https proxy's certificate with the cluster's TLS settings (its CA and
    // tls-server-name), so that case skips verifying the server, for kubectl to get through at all.
    const tls = scheme === 'https' ? { 'insecure-skip-tls-verify': true, 'certificate-authority': undefined } : { 'tls-server-name': SAN };
    const env = envWith(await kubeconfig({ server: `https://${HIDDEN}:${apiPort}`, ...tls, 'proxy-url': proxy.url }));
    const ours = await through(proxy, () => plugin(env));
    t.is(ours.result.code, 0, ours.result.stderr);
    t.is(ours.result.stderr, 'No resources found\n');
    t.true(ours.tunnels.length >= 1, 'the plugin opened a tunnel through the proxy');
    t.true(
      ours.tunnels.every((target) => target === `${HIDDEN}:${apiPort}`),
      ours.tunnels.join(', '),
    );
    const theirs = await through(proxy, () => kubectlGet(env));
    t.is(theirs.result.code, 0, theirs.result.stderr);
    t.is(theirs.result.stderr, ours.result.stderr, 'kubectl answers the same through the same proxy');
    t.true(theirs.tunnels.length >= 1);
  });
}

test.serial('the agent and controller REST client goes through proxy-url, and through HTTPS_PROXY when there is none', async (t) => {
  const viaUrl = await kubeconfig({ server: `https://${HIDDEN}:${apiPort}`, 'tls-server-name': SAN, 'proxy-url': socksProxy.url });
  const rest = new RestClient(loadKubeConfig({ kubeconfig: viaUrl, env: {} }), { timeoutMs: 20_000 });
  const before = socksProxy.targets.length;
  t.deepEqual((await new NodeDiskClient(rest).list()).items, []);
  t.is(socksProxy.targets.length, before + 1, 'one tunnel, kept alive for the next requests');
  await new NodeDiskClient(rest.with({})).list();
  t.is(socksProxy.targets.length, before + 1, 'a client made with with() shares the connection');
  rest.close();

  const viaEnv = await kubeconfig({ server: `https://${HIDDEN}:${apiPort}`, 'tls-server-name': SAN });
  const envRest = new RestClient(loadKubeConfig({ kubeconfig: viaEnv, env: { https_proxy: connectProxy.url } }), { timeoutMs: 20_000 });
  const tunnels = connectProxy.targets.length;
  await new NodeDiskClient(envRest).list();
  t.is(connectProxy.targets.length, tunnels + 1);
  envRest.close();
});

test.serial('HTTPS_PROXY and https_proxy are used, NO_PROXY bypasses by domain, host:port, CIDR, IP and *, as in kubectl', async (t) => {
  const hidden = await kubeconfig({ server: `https://${HIDDEN}:${apiPort}`, 'tls-server-name': SAN });
  const cases: Record<string, string>[] = [
    { HTTPS_PROXY: connectProxy.url },
    { https_proxy: connectProxy.url },
    { HTTPS_PROXY: connectProxy.url, NO_PROXY: `${HIDDEN}:1` },
    { HTTPS_PROXY: socksProxy.url },
  ];
  for (const vars of cases) {
    const proxy = vars.HTTPS_PROXY === socksProxy.url ? socksProxy : connectProxy;
    const env = envWith(hidden, vars);
    const ours = await through(proxy, () => plugin(env));
    t.is(ours.result.code, 0, `${JSON.stringify(vars)}: ${ours.result.stderr}`);
    t.true(ours.tunnels.length >= 1, JSON.stringify(vars));
    const theirs = await through(proxy, () => kubectlGet(env));
    t.is(theirs.result.code, 0, theirs.result.stderr);
    t.true(theirs.tunnels.length >= 1, `kubectl too: ${JSON.stringify(vars)}`);
  }
  // Excluded by NO_PROXY, the request goes direct: the hidden name does not resolve, for kubectl neither.
  for (const noProxy of ['.invalid', HIDDEN, `${HIDDEN}:${apiPort}`, '*', 'example.com, invalid']) {
    const env = envWith(hidden, { HTTPS_PROXY: connectProxy.url, NO_PROXY: noProxy });
    const ours = await through(connectProxy, () => plugin(env));
    t.is(ours.result.code, 7, `NO_PROXY=${noProxy}: ${ours.result.stderr}`);
    t.regex(ours.result.stderr, /ENOTFOUND nodedisks-apiserver\.invalid/);
    t.deepEqual(ours.tunnels, [], `NO_PROXY=${noProxy}: no tunnel`);
    const theirs = await through(connectProxy, () => kubectlGet(env));
    t.not(theirs.result.code, 0);
    t.regex(theirs.result.stderr, /no such host/, `kubectl goes direct too with NO_PROXY=${noProxy}`);
    t.deepEqual(theirs.tunnels, []);
  }
  // By address: this machine's own address, forwarded to the API server.
  const own = new URL(forwarder.url('https'));
  const byAddress = await kubeconfig({ server: forwarder.url('https'), 'tls-server-name': SAN });
  for (const [noProxy, proxied] of [
    ['', true],
    [`${own.hostname}/24`, false],
    [own.hostname, false],
    [`${own.hostname}:${own.port}`, false],
    [`${own.hostname}:1`, true],
    ['10.0.0.0/8', true],
  ] as const) {
    for (const [who, run] of [
      ['plugin', plugin],
      ['kubectl', kubectlGet],
    ] as const) {
      const env = envWith(byAddress, { HTTPS_PROXY: connectProxy.url, ...(noProxy ? { NO_PROXY: noProxy } : {}) });
      const direct = forwarder.connections();
      const r = await through(connectProxy, () => run(env));
      t.is(r.result.code, 0, `${who} NO_PROXY=${noProxy}: ${r.result.stderr}`);
      t.is(r.tunnels.length >= 1, proxied, `${who} NO_PROXY=${JSON.stringify(noProxy)}: ${proxied ? 'through the proxy' : 'direct'}`);
      if (!proxied) t.true(forwarder.connections() > direct, `${who} connected direct`);
    }
  }
  // Loopback is never proxied from the environment (Go's rule), whatever NO_PROXY says.
  const loopback = envWith(controlPlane().admin().kubeconfig, { HTTPS_PROXY: connectProxy.url });
  const direct = await through(connectProxy, () => plugin(loopback));
  t.is(direct.result.code, 0, direct.result.stderr);
  t.deepEqual(direct.tunnels, []);
});

test.serial('proxy-url wins over HTTPS_PROXY, and NO_PROXY does not apply to it, as in kubectl', async (t) => {
  const cfg = await kubeconfig({ server: `https://${HIDDEN}:${apiPort}`, 'tls-server-name': SAN, 'proxy-url': socksProxy.url });
  const env = envWith(cfg, { HTTPS_PROXY: connectProxy.url, NO_PROXY: '*' });
  for (const run of [plugin, kubectlGet]) {
    const viaConnect = connectProxy.targets.length;
    const r = await through(socksProxy, () => run(env));
    t.is(r.result.code, 0, r.result.stderr);
    t.true(r.tunnels.length >= 1, 'through proxy-url');
    t.is(connectProxy.targets.length, viaConnect, 'not through HTTPS_PROXY');
  }
});

test.serial('a proxy that refuses or is not there: a clear error naming the proxy, exit 7', async (t) => {
  for (const proxy of [connectProxy, socksProxy]) {
    proxy.refuse = 403;
    try {
      const env = envWith(await kubeconfig({ server: `https://${HIDDEN}:${apiPort}`, 'tls-server-name': SAN, 'proxy-url': proxy.url }));
      const r = await plugin(env);
      t.is(r.code, 7, r.stderr);
      t.true(r.stderr.includes(`through the proxy ${proxy.url} (proxy-url of cluster "nodedisks-test")`), r.stderr);
      t.regex(r.stderr, proxy === connectProxy ? /the proxy refused the tunnel: 403 Refused by test proxy/ : /not allowed by ruleset|rejected connection/i);
      t.regex(r.stderr, /check the proxy/);
      t.not((await kubectlGet(env)).code, 0, 'kubectl fails too');
    } finally {
      proxy.refuse = undefined;
    }
  }
  const closed = await startConnectProxy();
  const url = closed.url;
  await closed.stop();
  const env = envWith(await kubeconfig({ server: `https://${HIDDEN}:${apiPort}`, 'tls-server-name': SAN }), { HTTPS_PROXY: url });
  const r = await plugin(env);
  t.is(r.code, 7, r.stderr);
  t.true(r.stderr.includes(`through the proxy ${url} (HTTPS_PROXY): connect ECONNREFUSED`), r.stderr);
});

test.serial('an unsupported proxy scheme is a clear usage error', async (t) => {
  const env = envWith(await kubeconfig({ server: `https://${HIDDEN}:${apiPort}`, 'proxy-url': 'ftp://127.0.0.1:21' }));
  const r = await plugin(env);
  t.is(r.code, 2, r.stderr);
  t.is(r.stderr, 'error: proxy-url of cluster "nodedisks-test" "ftp://127.0.0.1:21" uses the unsupported scheme "ftp"; use http, https, socks5\n');
  const fromEnv = await plugin(envWith(await kubeconfig({ server: `https://${HIDDEN}:${apiPort}` }), { HTTPS_PROXY: 'socks4://127.0.0.1:1080' }));
  t.is(fromEnv.code, 2);
  t.regex(fromEnv.stderr, /HTTPS_PROXY "socks4:\/\/127\.0\.0\.1:1080" uses the unsupported scheme "socks4"; use http, https, socks5, socks5h/);
});
