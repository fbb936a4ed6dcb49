// The connection agent for a proxy (./proxy.ts decides which one): HTTP CONNECT through an http:// or
// https:// proxy, or SOCKS5. The libraries are imported here, on first use, so that the commands and
// programs that use no proxy never load them (docs/adr/0021-proxies.md).
import type { Agent } from 'node:http';
import type { Proxy } from './proxy.ts';

export async function proxyAgent(proxy: Proxy): Promise<Agent> {
  if (proxy.url.protocol === 'socks5:' || proxy.url.protocol === 'socks5h:') {
    const { SocksProxyAgent } = await import('socks-proxy-agent');
    // kubectl (Go's SOCKS5 dialer) sends the server's host name to the proxy, which resolves it: that
    // is socks5h in this library's terms, so a name only the proxy can resolve works as with kubectl.
    const url = new URL(proxy.url.href);
    url.protocol = 'socks5h:';
    return new SocksProxyAgent(url, { keepAlive: true });
  }
  const { HttpsProxyAgent } = await import('https-proxy-agent');
  return new HttpsProxyAgent(proxy.url, { keepAlive: true });
}
