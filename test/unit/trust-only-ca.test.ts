// The plugin trusts only its kubeconfig's CA (lib/kube/trust-only-ca.ts): against a real TLS server on
// loopback with a CA made here, a client trusting that CA gets its answer, and one trusting another CA is
// refused with the same error as the request's own `ca` option gives; nothing else is trusted, not even
// NODE_EXTRA_CA_CERTS. Each check runs in a process of its own: the default store is process-wide.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { REPO_ROOT } from '../../hack/lib/paths.ts';

const run = promisify(execFile);
let dir = '';
let server: Server;
let url = '';

async function openssl(...args: string[]): Promise<void> {
  await run('openssl', args, { cwd: dir });
}

test.before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'nodedisks-trust-'));
  const subj = (cn: string) => ['-subj', `/CN=${cn}`];
  for (const ca of ['ca', 'other-ca']) {
    await openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', ...subj(`${ca} test`), '-keyout', `${ca}.key`, '-out', `${ca}.crt`);
  }
  await openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', ...subj('127.0.0.1'), '-keyout', 'server.key', '-out', 'server.csr');
  await writeFile(join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  await openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1', '-extfile', 'san.ext', '-out', 'server.crt');
  server = createServer({ key: await readFile(join(dir, 'server.key')), cert: await readFile(join(dir, 'server.crt')) }, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"kind":"Status","status":"Success"}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  url = `https://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
});
test.after.always(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  await rm(dir, { recursive: true, force: true });
});

/**
 * In a fresh node: a kubeconfig naming `ca`, the REST client of the plugin (trustOnly) or of a library
 * (the request's `ca` option), one GET. Prints what happened as JSON.
 */
async function request(ca: string, trustOnly: boolean, env: NodeJS.ProcessEnv = {}): Promise<{ trusted: boolean; ok?: boolean; error?: string }> {
  const kubeconfig = join(dir, `kubeconfig-${ca}`);
  await writeFile(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server: url, 'certificate-authority': join(dir, `${ca}.crt`) } }],
      users: [{ name: 'u', user: { token: 't' } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    }),
  );
  const script = `
    import { loadKubeConfig } from ${JSON.stringify(join(REPO_ROOT, 'lib/kube/kubeconfig.ts'))};
    import { RestClient } from ${JSON.stringify(join(REPO_ROOT, 'lib/kube/rest.ts'))};
    import { trustOnlyTheClusterCA } from ${JSON.stringify(join(REPO_ROOT, 'lib/kube/trust-only-ca.ts'))};
    const access = loadKubeConfig({ kubeconfig: ${JSON.stringify(kubeconfig)} });
    const trusted = ${trustOnly} ? trustOnlyTheClusterCA(access) : false;
    const rest = new RestClient(access, { timeoutMs: 5000 });
    try {
      await rest.request('GET', '/version');
      console.log(JSON.stringify({ trusted, ok: true }));
    } catch (err) {
      console.log(JSON.stringify({ trusted, error: err.message }));
    } finally {
      rest.close();
    }`;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, NODE_EXTRA_CA_CERTS: '', ...env } });
  return JSON.parse(stdout) as { trusted: boolean; ok?: boolean; error?: string };
}

test('a server the kubeconfig CA signed is trusted with that CA alone', async (t) => {
  t.deepEqual(await request('ca', true), { trusted: true, ok: true });
});

test('a server another CA signed is refused with the same error as the request option gives', async (t) => {
  const only = await request('other-ca', true);
  const option = await request('other-ca', false);
  t.true(only.trusted);
  t.false(option.trusted);
  t.regex(only.error ?? '', /^cannot reach the API server at https:\/\/127\.0\.0\.1:\d+: /);
  t.is(only.error?.replace(/:\d+/, ''), option.error?.replace(/:\d+/, ''));
});

test('nothing else is trusted: not NODE_EXTRA_CA_CERTS, which names the right CA here', async (t) => {
  const res = await request('other-ca', true, { NODE_EXTRA_CA_CERTS: join(dir, 'ca.crt') });
  t.true(res.trusted);
  t.truthy(res.error, 'refused');
});
