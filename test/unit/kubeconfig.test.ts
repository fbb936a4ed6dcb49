// Our kubeconfig loader against kubectl's rules, cross-checked with @kubernetes/client-node's loader on
// the same files (the reference implementation we replaced for start-up time, docs/adr/0008).
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative as relativePath } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import test from 'ava';
import { dump } from 'js-yaml';
import { lookPath } from '../../lib/kube/exec-credential.ts';
import { loadKubeConfig } from '../../lib/kube/kubeconfig.ts';

const dir = mkdtempSync(join(tmpdir(), 'nodedisks-kubeconfig-'));
test.after.always(() => rmSync(dir, { recursive: true, force: true }));
const caPem = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
writeFileSync(join(dir, 'ca.crt'), caPem);

function file(name: string, cfg: object): string {
  const path = join(dir, name);
  writeFileSync(path, dump(cfg));
  return path;
}

const first = file('first.yaml', {
  apiVersion: 'v1',
  kind: 'Config',
  'current-context': 'dev',
  clusters: [{ name: 'dev', cluster: { server: 'https://dev.example:6443', 'certificate-authority': 'ca.crt' } }],
  users: [{ name: 'alice', user: { token: 'alice-token' } }],
  contexts: [{ name: 'dev', context: { cluster: 'dev', user: 'alice' } }],
});
const second = file('second.yaml', {
  apiVersion: 'v1',
  kind: 'Config',
  'current-context': 'prod',
  clusters: [
    { name: 'dev', cluster: { server: 'https://shadowed.example:6443' } },
    { name: 'prod', cluster: { server: 'https://prod.example:443/', 'insecure-skip-tls-verify': true } },
  ],
  users: [
    { name: 'bob', user: { tokenFile: 'bob.token' } },
    { name: 'carol', user: { username: 'carol', password: 'pw' } },
    { name: 'old', user: { 'auth-provider': { name: 'gcp' } } },
  ],
  contexts: [
    { name: 'prod', context: { cluster: 'prod', user: 'bob' } },
    { name: 'basic', context: { cluster: 'prod', user: 'carol' } },
    { name: 'legacy', context: { cluster: 'prod', user: 'old' } },
  ],
});
writeFileSync(join(dir, 'bob.token'), 'bob-token\n');

test('KUBECONFIG files merge like kubectl: the first current-context and the first cluster of a name win', async (t) => {
  const env = { KUBECONFIG: `${first}:${second}` };
  const a = loadKubeConfig({ env });
  t.is(a.contextName, 'dev');
  t.is(a.server, 'https://dev.example:6443');
  t.is(a.tls.ca?.toString(), caPem, 'certificate-authority is relative to the file that names it');
  t.deepEqual(await a.headers(), { Authorization: 'Bearer alice-token' });

  // kubectl reads the same files to the same answer (client-node would refuse them: it rejects a name
  // defined in two files, where kubectl takes the first).
  const view = execFileSync('kubectl', ['config', 'view', '--minify', '-o', 'jsonpath={.contexts[0].name} {.clusters[0].cluster.server}'], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
  });
  t.is(view, `${a.contextName} ${a.server}`);
});

test('a single kubeconfig reads the same as with @kubernetes/client-node', (t) => {
  const kc = new KubeConfig();
  kc.loadFromFile(second);
  kc.setCurrentContext('prod');
  const ours = loadKubeConfig({ kubeconfig: second });
  t.is(ours.contextName, kc.getCurrentContext());
  t.is(ours.server, (kc.getCurrentCluster()?.server ?? '').replace(/\/$/, ''));
  t.is(ours.tls.rejectUnauthorized, !kc.getCurrentCluster()?.skipTLSVerify);
});

test('--context, --server, --token, --as and --as-group override the file', async (t) => {
  const env = { KUBECONFIG: `${first}:${second}` };
  const prod = loadKubeConfig({ env, context: 'prod' });
  t.is(prod.server, 'https://prod.example:443', 'trailing slash dropped');
  t.false(prod.tls.rejectUnauthorized);
  t.deepEqual(await prod.headers(), { Authorization: 'Bearer bob-token' }, 'tokenFile relative to its kubeconfig');
  const over = loadKubeConfig({ env, server: 'https://other:1', token: 'T', as: 'jane', asGroups: ['a', 'b'] });
  t.is(over.server, 'https://other:1');
  t.deepEqual(await over.headers(), { Authorization: 'Bearer T', 'Impersonate-User': 'jane', 'Impersonate-Group': ['a', 'b'] } as unknown as Record<string, string>);
  const basic = loadKubeConfig({ env, context: 'basic' });
  t.is((await basic.headers()).Authorization, `Basic ${Buffer.from('carol:pw').toString('base64')}`);
});

test('an exec credential plugin is run with KUBERNETES_EXEC_INFO and its token used', async (t) => {
  const script = join(dir, 'cred.sh');
  writeFileSync(script, '#!/bin/sh\necho "{\\"apiVersion\\":\\"client.authentication.k8s.io/v1\\",\\"kind\\":\\"ExecCredential\\",\\"status\\":{\\"token\\":\\"exec-$MY_VAR\\"}}"\n');
  chmodSync(script, 0o755);
  const path = file('exec.yaml', {
    'current-context': 'x',
    clusters: [{ name: 'c', cluster: { server: 'https://exec.example' } }],
    users: [{ name: 'u', user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: script, env: [{ name: 'MY_VAR', value: '42' }] } } }],
    contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
  });
  t.deepEqual(await loadKubeConfig({ kubeconfig: path }).headers(), { Authorization: 'Bearer exec-42' });
});

/** An executable printing an ExecCredential with `token`. */
function credScript(path: string, token: string): void {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, `#!/bin/sh\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"${token}"}}'\n`);
  chmodSync(path, 0o755);
}

test('an exec command with a path separator is relative to its kubeconfig; a bare one comes from PATH, never from a relative entry', async (t) => {
  const home = join(dir, 'exec-home');
  credScript(join(home, 'bin', 'get-token'), 'from-kubeconfig-dir');
  const exec = (command: string) =>
    file(`exec-home/${command.replace(/\W/g, '_')}.yaml`, {
      'current-context': 'x',
      clusters: [{ name: 'c', cluster: { server: 'https://exec.example' } }],
      users: [{ name: 'u', user: { exec: { command } } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
    });
  t.deepEqual(await loadKubeConfig({ kubeconfig: exec('bin/get-token') }).headers(), { Authorization: 'Bearer from-kubeconfig-dir' });
  t.deepEqual(await loadKubeConfig({ kubeconfig: exec('./bin/get-token') }).headers(), { Authorization: 'Bearer from-kubeconfig-dir' });

  const onPath = join(dir, 'exec-path');
  credScript(join(onPath, 'nd-unit-token'), 'from-path');
  const bare = exec('nd-unit-token');
  t.deepEqual(await loadKubeConfig({ kubeconfig: bare, env: { PATH: `/nonexistent:${onPath}` } }).headers(), { Authorization: 'Bearer from-path' });
  t.is(lookPath('nd-unit-token', { PATH: `/nonexistent:${onPath}` }), join(onPath, 'nd-unit-token'));
  t.is(lookPath('nd-unit-token', { PATH: '/nonexistent' }), undefined);
  await t.throwsAsync(loadKubeConfig({ kubeconfig: bare, env: { PATH: '/nonexistent' } }).headers(), {
    message: /exec credential plugin nd-unit-token failed: executable file not found in \$PATH/,
  });
  // A PATH entry relative to the current directory finds it, and is refused (`.` and "" are the same case:
  // test/integration/plugin-trust.test.ts runs them in a directory of their own).
  const relative = relativePath(process.cwd(), onPath);
  t.throws(() => lookPath('nd-unit-token', { PATH: `/nonexistent:${relative}:${onPath}` }), {
    message: /^exec credential plugin nd-unit-token: cannot run executable found relative to current directory/,
  });
  t.is(lookPath('nd-unit-token', { PATH: `${onPath}:${relative}` }), join(onPath, 'nd-unit-token'), 'the first match wins, as in Go');
});

test('a JSON kubeconfig (read with JSON.parse) gives what the same file in YAML gives', async (t) => {
  const cfg = {
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'dev',
    clusters: [{ name: 'dev', cluster: { server: 'https://dev.example:6443', 'certificate-authority': 'ca.crt', 'tls-server-name': 'api.dev' } }],
    users: [{ name: 'alice', user: { token: 'alice-token', as: 'bob', 'as-groups': ['ops'] } }],
    contexts: [{ name: 'dev', context: { cluster: 'dev', user: 'alice', namespace: 'team' } }],
  };
  const json = join(dir, 'config.json');
  writeFileSync(json, `  ${JSON.stringify(cfg, null, 2)}\n`);
  const yaml = file('config-as.yaml', cfg);
  // Everything but the file name and the header function (compared by what it returns).
  const plain = async (path: string) => {
    const { headers, source: _source, ...rest } = loadKubeConfig({ kubeconfig: path });
    return { ...rest, headers: await headers() };
  };
  const fromJson = await plain(json);
  t.deepEqual(fromJson, await plain(yaml));
  t.is(fromJson.tls.ca?.toString(), caPem, 'the CA path is relative to the JSON file too');
  // A flow mapping that is YAML but not JSON still loads; broken JSON gets the YAML parser's message.
  const flow = join(dir, 'flow.yaml');
  writeFileSync(flow, "{clusters: [{name: dev, cluster: {server: 'https://flow.example:6443'}}], contexts: [{name: dev, context: {cluster: dev}}], current-context: dev}\n");
  t.is(loadKubeConfig({ kubeconfig: flow }).server, 'https://flow.example:6443');
  const broken = join(dir, 'broken.json');
  writeFileSync(broken, '{"clusters": [');
  t.throws(() => loadKubeConfig({ kubeconfig: broken }), { message: /kubeconfig .*broken\.json is not valid YAML: .*; fix the file/ });
});

test('bad kubeconfigs are refused with the file, the problem and the fix', (t) => {
  const broken = join(dir, 'broken.yaml');
  writeFileSync(broken, 'clusters: [ {{ nope');
  t.throws(() => loadKubeConfig({ kubeconfig: broken }), { message: /kubeconfig .*broken\.yaml is not valid YAML: .*; fix the file or point --kubeconfig at a valid one/ });
  t.throws(() => loadKubeConfig({ kubeconfig: join(dir, 'missing.yaml') }), { message: /kubeconfig .*missing\.yaml does not exist; check --kubeconfig/ });
  t.throws(() => loadKubeConfig({ kubeconfig: first, context: 'nope' }), { message: /context "nope" not found in .*first\.yaml; contexts: dev/ });
  t.throws(() => loadKubeConfig({ env: { KUBECONFIG: `${first}:${second}` }, context: 'legacy' }), { message: /auth-provider "gcp", which is not supported; use an exec credential plugin/ });
  t.throws(() => loadKubeConfig({ env: { HOME: join(dir, 'nohome') } }), {
    message: /no kubeconfig found \(looked at .*nohome\/\.kube\/config\); pass --kubeconfig, set KUBECONFIG, or --server/,
  });
  t.throws(() => loadKubeConfig({ kubeconfig: first, asGroups: ['g'] }), { message: /--as-group needs --as/ });
  const noServer = file('noserver.yaml', { 'current-context': 'x', clusters: [{ name: 'c', cluster: {} }], contexts: [{ name: 'x', context: { cluster: 'c' } }] });
  t.throws(() => loadKubeConfig({ kubeconfig: noServer }), { message: /cluster "c" has no valid server URL/ });
});

test("the namespace is the context's, as kubectl defaults -n; default when the context names none", (t) => {
  const withNs = file('namespaced.yaml', {
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'team',
    clusters: [{ name: 'c', cluster: { server: 'https://c.example:6443' } }],
    users: [{ name: 'u', user: { token: 't' } }],
    contexts: [
      { name: 'team', context: { cluster: 'c', user: 'u', namespace: 'team-a' } },
      { name: 'plain', context: { cluster: 'c', user: 'u' } },
    ],
  });
  t.is(loadKubeConfig({ kubeconfig: withNs }).namespace, 'team-a');
  t.is(loadKubeConfig({ kubeconfig: withNs, context: 'plain' }).namespace, 'default');
  t.is(loadKubeConfig({ kubeconfig: first }).namespace, 'default');
});
