// Which proxy, if any, a request to the API server goes through, decided as kubectl (client-go, Go's
// net/http) decides it: the cluster's `proxy-url` in the kubeconfig wins and applies to every server;
// otherwise HTTPS_PROXY (https servers) or HTTP_PROXY (http servers), upper case before lower case,
// unless NO_PROXY excludes the server or the server is localhost or a loopback address.
// docs/adr/0021-proxies.md. The agents that tunnel through the proxy are in ./proxy-agent.ts, loaded
// only when a proxy is in use.

/** node:net's isIP, taken only when a proxy is configured: most runs never need it (see ./rest.ts on why not an ES import). */
const isIP = (text: string): number => process.getBuiltinModule('node:net').isIP(text);

export class ProxyConfigError extends Error {
  override name = 'ProxyConfigError';
}

export interface Proxy {
  url: URL;
  /** Where it was configured, for messages: `proxy-url of cluster "x"` or `HTTPS_PROXY`. */
  source: string;
}

/** Schemes a kubeconfig's proxy-url may use (client-go's validation); the environment also takes socks5h. */
const KUBECONFIG_SCHEMES = ['http:', 'https:', 'socks5:'];
const ENV_SCHEMES = [...KUBECONFIG_SCHEMES, 'socks5h:'];

/** The value of the first of `names` that is set and not empty (Go's getEnvAny). */
function envAny(env: NodeJS.ProcessEnv, names: string[]): { name: string; value: string } | undefined {
  for (const name of names) {
    const value = env[name];
    if (value) return { name, value };
  }
  return undefined;
}

/** A proxy URL as Go parses one: without a scheme, http:// is assumed. */
function parseProxyUrl(raw: string, source: string, schemes: string[]): URL {
  // Messages quote the setting, never its password (a proxy's credentials often live in HTTPS_PROXY).
  const value = redactedText(raw);
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (!url?.host && !raw.includes('://')) {
    try {
      url = new URL(`http://${raw}`);
    } catch {
      throw new ProxyConfigError(`${source} ${JSON.stringify(value)} is not a valid proxy URL; it must look like http://proxy.example.com:3128`);
    }
  }
  if (!url) throw new ProxyConfigError(`${source} ${JSON.stringify(value)} is not a valid proxy URL; it must look like http://proxy.example.com:3128`);
  if (!schemes.includes(url.protocol)) {
    throw new ProxyConfigError(`${source} ${JSON.stringify(value)} uses the unsupported scheme "${url.protocol.slice(0, -1)}"; use ${schemes.map((s) => s.slice(0, -1)).join(', ')}`);
  }
  if (!url.hostname) throw new ProxyConfigError(`${source} ${JSON.stringify(value)} is not a valid proxy URL: it names no host; it must look like http://proxy.example.com:3128`);
  return url;
}

/** The kubeconfig's proxy-url of a cluster, checked. */
export function kubeconfigProxy(value: string, clusterName: string): Proxy {
  const source = `proxy-url of cluster "${clusterName}"`;
  return { url: parseProxyUrl(value, source, KUBECONFIG_SCHEMES), source };
}

interface NoProxyRule {
  match(host: string, port: string, ip: string | undefined): boolean;
}

function ipv4ToBigInt(ip: string): bigint {
  return ip.split('.').reduce((n, part) => (n << 8n) | BigInt(Number(part)), 0n);
}

function ipv6ToBigInt(ip: string): bigint {
  // Expand "::" and an embedded IPv4 tail, then read eight 16-bit groups.
  let text = ip;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    const n = ipv4ToBigInt(v4[1]!);
    text = `${text.slice(0, -v4[1]!.length)}${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return groups.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n);
}

/** An address as a number and its width; IPv4-mapped IPv6 addresses count as IPv4, as in Go. */
function ipValue(ip: string): { value: bigint; bits: number } {
  if (isIP(ip) === 4) return { value: ipv4ToBigInt(ip), bits: 32 };
  const v = ipv6ToBigInt(ip);
  if (v >> 32n === 0xffffn) return { value: v & 0xffffffffn, bits: 32 };
  return { value: v, bits: 128 };
}

function isLoopback(ip: string): boolean {
  const { value, bits } = ipValue(ip);
  return bits === 32 ? value >> 24n === 127n : value === 1n;
}

/** NO_PROXY's entries as Go's httpproxy reads them: "*", CIDRs, IPs (with a port), domains (with a port). */
function noProxyRules(noProxy: string): NoProxyRule[] | 'all' {
  const rules: NoProxyRule[] = [];
  for (const raw of noProxy.split(',')) {
    const p = raw.trim().toLowerCase();
    if (!p) continue;
    if (p === '*') return 'all';
    const cidr = /^(.+)\/(\d+)$/.exec(p);
    if (cidr && isIP(cidr[1]!)) {
      const net = ipValue(cidr[1]!);
      const prefix = Number(cidr[2]);
      if (prefix > net.bits) continue;
      const shift = BigInt(net.bits - prefix);
      rules.push({ match: (_h, _p, ip) => ip !== undefined && ipValue(ip).bits === net.bits && ipValue(ip).value >> shift === net.value >> shift });
      continue;
    }
    let host = p;
    let port = '';
    const bracketed = /^\[(.*)\](?::(\d*))?$/.exec(p);
    if (bracketed) {
      host = bracketed[1]!;
      port = bracketed[2] ?? '';
    } else if (isIP(p) !== 6) {
      const hp = /^(.*):(\d*)$/.exec(p);
      if (hp) {
        host = hp[1]!;
        port = hp[2]!;
      }
    }
    if (!host) continue;
    if (isIP(host)) {
      const want = ipValue(host);
      rules.push({ match: (_h, pt, ip) => ip !== undefined && ipValue(ip).value === want.value && ipValue(ip).bits === want.bits && (!port || port === pt) });
      continue;
    }
    // "foo.com" matches foo.com and its subdomains; ".foo.com" and "*.foo.com" only the subdomains.
    if (host.startsWith('*.')) host = host.slice(1);
    const matchHost = !host.startsWith('.');
    const suffix = matchHost ? `.${host}` : host;
    rules.push({ match: (h, pt) => (h.endsWith(suffix) || (matchHost && h === suffix.slice(1))) && (!port || port === pt) });
  }
  return rules;
}

/** Whether NO_PROXY (or being local) sends a request to `server` direct. */
function bypasses(server: URL, noProxy: string): boolean {
  const host = server.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const port = server.port || (server.protocol === 'https:' ? '443' : '80');
  if (host === 'localhost') return true;
  const ip = isIP(host) ? host : undefined;
  if (ip && isLoopback(ip)) return true;
  const rules = noProxyRules(noProxy);
  if (rules === 'all') return true;
  return rules.some((r) => r.match(host, port, ip));
}

/** The proxy from the environment for `server`, or undefined when none applies. */
export function environmentProxy(server: string, env: NodeJS.ProcessEnv): Proxy | undefined {
  const url = new URL(server);
  const names = url.protocol === 'https:' ? ['HTTPS_PROXY', 'https_proxy'] : ['HTTP_PROXY', 'http_proxy'];
  const found = envAny(env, names);
  if (!found) return undefined;
  // Go refuses HTTP_PROXY in a CGI environment (a request header could set it); so do we.
  if (url.protocol === 'http:' && env.REQUEST_METHOD) return undefined;
  if (bypasses(url, envAny(env, ['NO_PROXY', 'no_proxy'])?.value ?? '')) return undefined;
  return { url: parseProxyUrl(found.value, found.name, ENV_SCHEMES), source: found.name };
}

/** The proxy that requests to `server` take: the kubeconfig's proxy-url, else the environment's. */
export function proxyFor(server: string, proxyUrl: Proxy | undefined, env: NodeJS.ProcessEnv): Proxy | undefined {
  return proxyUrl ?? environmentProxy(server, env);
}

/** A proxy URL for messages and logs, as Go's url.Redacted: the user kept, the password `xxxxx`. */
export function redactedProxy(url: URL): string {
  const u = new URL(url.href);
  if (u.password) u.password = 'xxxxx';
  return u.href.replace(/\/$/, '');
}

/**
 * A proxy setting's text for messages, even one that is no URL at all: the password of its user info
 * (between the first ':' and the last '@' of the authority) replaced by `xxxxx`, as url.Redacted would.
 */
export function redactedText(value: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(value)?.[0] ?? '';
  const rest = value.slice(scheme.length);
  const end = rest.search(/[/?#]/);
  const authority = end < 0 ? rest : rest.slice(0, end);
  const at = authority.lastIndexOf('@');
  const colon = authority.indexOf(':');
  if (at < 0 || colon < 0 || colon > at) return value;
  return `${scheme}${authority.slice(0, colon)}:xxxxx${rest.slice(at)}`;
}
