// The exec credential runner (lib/kube/exec-credential.ts) on its own: a credential is kept until shortly
// before it expires, then the plugin runs again; one without an expiry is kept; a failing plugin and an
// unusable ExecCredential are errors that say which plugin.
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { KubeConfigError } from '../../lib/kube/errors.ts';
import { execCredentials } from '../../lib/kube/exec-credential.ts';

const dir = mkdtempSync(join(tmpdir(), 'nodedisks-exec-credential-'));
test.after.always(() => rmSync(dir, { recursive: true, force: true }));

/** A plugin that appends a line to `<name>.runs` each time it runs and prints `status` as its ExecCredential's. */
function plugin(name: string, status: object | string): { command: string; runs: () => number } {
  const command = join(dir, `${name}.sh`);
  const runs = join(dir, `${name}.runs`);
  writeFileSync(runs, '');
  const out = typeof status === 'string' ? status : JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status });
  writeFileSync(command, `#!/bin/sh\necho run >> '${runs}'\necho '${out}'\n`);
  chmodSync(command, 0o755);
  return { command, runs: () => readFileSync(runs, 'utf8').split('\n').filter(Boolean).length };
}

test('a credential that expires later than the refresh margin is fetched once', async (t) => {
  const p = plugin('later', { token: 't1', expirationTimestamp: new Date(Date.now() + 3_600_000).toISOString() });
  const cred = execCredentials({ command: p.command }, 'https://x.example', process.env);
  t.is((await cred()).token, 't1');
  t.is((await cred()).token, 't1');
  t.is(p.runs(), 1);
});

test('a credential about to expire (within 10 s) is fetched again at each use', async (t) => {
  const p = plugin('soon', { token: 't2', expirationTimestamp: new Date(Date.now() + 5_000).toISOString() });
  const cred = execCredentials({ command: p.command }, 'https://x.example', process.env);
  await cred();
  await cred();
  t.is(p.runs(), 2);
});

test('a credential without an expiry is kept', async (t) => {
  const p = plugin('forever', { token: 't3' });
  const cred = execCredentials({ command: p.command }, 'https://x.example', process.env);
  await cred();
  await cred();
  await cred();
  t.is(p.runs(), 1);
});

test('a client certificate and key are returned as buffers', async (t) => {
  const p = plugin('cert', { clientCertificateData: 'CERT', clientKeyData: 'KEY' });
  const got = await execCredentials({ command: p.command }, 'https://x.example', process.env)();
  t.deepEqual([got.cert?.toString(), got.key?.toString(), got.token], ['CERT', 'KEY', undefined]);
});

test('an ExecCredential with neither token nor certificate, or not JSON, is an error naming the plugin', async (t) => {
  const empty = plugin('empty', {});
  const e1 = await t.throwsAsync(execCredentials({ command: empty.command }, 'https://x.example', process.env)(), { instanceOf: KubeConfigError });
  t.regex(e1.message, /empty\.sh returned an unusable ExecCredential: its status has neither a token nor a client certificate and key/);
  const garbage = plugin('garbage', 'not json');
  await t.throwsAsync(execCredentials({ command: garbage.command }, 'https://x.example', process.env)(), {
    instanceOf: KubeConfigError,
    message: /garbage\.sh returned an unusable ExecCredential/,
  });
});

test('a bare command not in PATH fails with the install hint', async (t) => {
  const err = await t.throwsAsync(execCredentials({ command: 'nodedisks-no-such-plugin', installHint: 'install it from x' }, 'https://x.example', { PATH: dir })(), {
    instanceOf: KubeConfigError,
  });
  t.is(err.message, 'exec credential plugin nodedisks-no-such-plugin failed: executable file not found in $PATH install it from x');
});
