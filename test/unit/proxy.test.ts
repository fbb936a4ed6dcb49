// Which proxy a request takes (lib/kube/proxy.ts), case by case as Go's httpproxy (kubectl) decides.
// The same rules against real proxies and the real kubectl: test/integration/proxy.test.ts.
import test from 'ava';
import { environmentProxy, kubeconfigProxy, proxyFor, ProxyConfigError, redactedProxy } from '../../lib/kube/proxy.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import { tokenAccess } from './_access.ts';

const P = 'http://proxy.corp:3128';
const via = (server: string, env: NodeJS.ProcessEnv) => environmentProxy(server, env)?.url.href;

test('HTTPS_PROXY for https servers, HTTP_PROXY for http ones, upper case before lower case', (t) => {
  t.is(via('https://api.corp:6443', { HTTPS_PROXY: P }), `${P}/`);
  t.is(via('https://api.corp:6443', { HTTP_PROXY: P }), undefined);
  t.is(via('http://api.corp:8080', { HTTP_PROXY: P }), `${P}/`);
  t.is(via('https://api.corp', { HTTPS_PROXY: P, https_proxy: 'http://other:1' }), `${P}/`);
  t.is(via('https://api.corp', { https_proxy: 'http://other:1' }), 'http://other:1/');
  t.is(via('https://api.corp', { HTTPS_PROXY: '', https_proxy: 'http://other:1' }), 'http://other:1/', 'an empty variable counts as unset');
  t.is(environmentProxy('https://api.corp', { https_proxy: P })?.source, 'https_proxy');
  t.is(via('http://api.corp', { HTTP_PROXY: P, REQUEST_METHOD: 'GET' }), undefined, 'not in a CGI environment');
});

test('a proxy without a scheme is http, as in Go', (t) => {
  t.is(via('https://api.corp', { HTTPS_PROXY: 'proxy.corp:3128' }), `${P}/`);
  t.is(via('https://api.corp', { HTTPS_PROXY: '10.1.2.3:3128' }), 'http://10.1.2.3:3128/');
});

test('localhost and loopback addresses are never proxied from the environment', (t) => {
  for (const server of ['https://localhost:6443', 'https://127.0.0.1:6443', 'https://127.9.9.9', 'https://[::1]:6443', 'https://[::ffff:127.0.0.1]:6443']) {
    t.is(via(server, { HTTPS_PROXY: P }), undefined, server);
  }
  t.is(via('https://localhost.corp', { HTTPS_PROXY: P }), `${P}/`);
});

const cases: [string, string, boolean][] = [
  // [NO_PROXY, server, bypassed]
  ['*', 'https://api.corp', true],
  ['corp', 'https://api.corp', true],
  ['api.corp', 'https://api.corp', true],
  ['api.corp', 'https://x.api.corp', true],
  ['.api.corp', 'https://api.corp', false],
  ['.api.corp', 'https://x.api.corp', true],
  ['*.api.corp', 'https://api.corp', false],
  ['*.api.corp', 'https://x.api.corp', true],
  ['pi.corp', 'https://api.corp', false],
  ['API.CORP', 'https://api.corp', true],
  ['api.corp:6443', 'https://api.corp:6443', true],
  ['api.corp:6443', 'https://api.corp:443', false],
  ['api.corp:443', 'https://api.corp', true],
  ['other, api.corp', 'https://api.corp', true],
  [' , ,other', 'https://api.corp', false],
  ['10.0.0.0/8', 'https://10.96.0.1', true],
  ['10.0.0.0/8', 'https://11.0.0.1', false],
  ['10.0.0.0/8', 'https://ten.corp', false],
  ['10.96.0.1', 'https://10.96.0.1:443', true],
  ['10.96.0.1:443', 'https://10.96.0.1', true],
  ['10.96.0.1:6443', 'https://10.96.0.1', false],
  ['fd00::/8', 'https://[fd00::1]:6443', true],
  ['fd00::/8', 'https://[fe80::1]:6443', false],
  ['[fd00::1]:6443', 'https://[fd00::1]:6443', true],
  ['fd00::1', 'https://[fd00:0:0::1]', true],
  ['10.0.0.0/8', 'https://[::ffff:10.1.2.3]', true],
];
for (const [noProxy, server, bypassed] of cases) {
  test(`NO_PROXY=${JSON.stringify(noProxy)} ${bypassed ? 'bypasses' : 'does not bypass'} ${server}`, (t) => {
    t.is(via(server, { HTTPS_PROXY: P, NO_PROXY: noProxy }), bypassed ? undefined : `${P}/`);
    t.is(via(server, { HTTPS_PROXY: P, no_proxy: noProxy }), bypassed ? undefined : `${P}/`, 'no_proxy alike');
  });
}

test("proxy-url wins over the environment and ignores NO_PROXY (client-go's http.ProxyURL)", (t) => {
  const fromConfig = kubeconfigProxy('socks5://socks.corp:1080', 'prod');
  t.is(proxyFor('https://127.0.0.1:6443', fromConfig, { HTTPS_PROXY: P, NO_PROXY: '*' })?.url.href, 'socks5://socks.corp:1080');
  t.is(fromConfig.source, 'proxy-url of cluster "prod"');
});

test('unsupported schemes and malformed proxies are errors naming the setting and the fix', (t) => {
  t.throws(() => kubeconfigProxy('socks5h://socks.corp:1080', 'prod'), {
    instanceOf: ProxyConfigError,
    message: 'proxy-url of cluster "prod" "socks5h://socks.corp:1080" uses the unsupported scheme "socks5h"; use http, https, socks5',
  });
  t.is(via('https://api.corp', { HTTPS_PROXY: 'socks5h://socks.corp:1080' }), 'socks5h://socks.corp:1080');
  t.throws(() => via('https://api.corp', { HTTPS_PROXY: 'ftp://proxy.corp' }), {
    message: /^HTTPS_PROXY "ftp:\/\/proxy\.corp" uses the unsupported scheme "ftp"; use http, https, socks5, socks5h$/,
  });
  t.throws(() => kubeconfigProxy('http://', 'prod'), { message: /proxy-url of cluster "prod" "http:\/\/" is not a valid proxy URL/ });
});

test("a proxy's password is never printed: errors show it as Go's url.Redacted does (user:xxxxx@)", async (t) => {
  const refused = [
    () => via('https://api.corp', { HTTPS_PROXY: 'ftp://alice:s3cret@proxy.corp' }),
    () => kubeconfigProxy('gopher://alice:s3cret@proxy.corp:70', 'prod'),
    () => kubeconfigProxy('http://alice:s3cret@', 'prod'),
    () => via('https://api.corp', { HTTPS_PROXY: 'alice:s3cret@proxy corp:3128' }),
  ];
  for (const f of refused) {
    const err = t.throws(f, { instanceOf: ProxyConfigError });
    t.false(err?.message.includes('s3cret'), err?.message);
    t.regex(err?.message ?? '', /alice:xxxxx@/, 'the user is shown, the password is not');
  }
  t.is(redactedProxy(new URL('http://alice:s3cret@proxy.corp:3128')), 'http://alice:xxxxx@proxy.corp:3128');
  t.is(redactedProxy(new URL('http://alice@proxy.corp:3128')), 'http://alice@proxy.corp:3128');
  t.is(redactedProxy(new URL('http://proxy.corp:3128')), 'http://proxy.corp:3128');
  // A request that cannot reach the proxy names it, without its password.
  const proxy = environmentProxy('https://api.corp', { HTTPS_PROXY: 'http://alice:s3cret@127.0.0.1:1' })!;
  const rest = new RestClient({ ...tokenAccess('https://api.corp', 't'), proxy }, { timeoutMs: 2000 });
  const err = await t.throwsAsync(rest.request('GET', '/version'));
  t.regex(err?.message ?? '', /through the proxy http:\/\/alice:xxxxx@127\.0\.0\.1:1 \(HTTPS_PROXY\)/);
  t.false(err?.message.includes('s3cret'), err?.message);
});
