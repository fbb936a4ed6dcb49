// The HTTP endpoints every NodeDisks process serves: /metrics (Prometheus), /healthz (the process is
// alive and its loops turn), /readyz (it can do its job: synced with the API server, and so on).
import { createServer, type Server } from 'node:http';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { Registry } from './prom-client.ts';

/** undefined when fine, otherwise why not. */
export type Probe = () => string | undefined;

export interface OpsServerOptions {
  /** "host:port" or ":port"; port 0 picks a free one. */
  address: string;
  registry: Registry;
  healthz: Probe;
  readyz: Probe;
}

/**
 * "host:port", ":port" or "[ipv6]:port". Checked when the flags are read, so a daemon with a bad
 * address stops at once with a usage error instead of failing later in listen(): the port is 0-65535
 * (0 picks a free one) and an IP address must belong to this machine (listen() could never bind it).
 * A host name is left to listen() to resolve; listenError() explains its failures.
 */
export function parseAddress(address: string, flag = '--http-address'): { host: string; port: number } {
  const m = /^(.*):(\d+)$/.exec(address);
  if (!m) throw new Error(`${flag} ${JSON.stringify(address)}: use host:port or :port, for example :8080 or 127.0.0.1:8080`);
  const port = Number(m[2]);
  if (port > 65535) throw new Error(`${flag} ${JSON.stringify(address)}: the port must be 0-65535 (0 picks a free one), got ${m[2]}`);
  const host = (m[1] ?? '').replace(/^\[(.*)\]$/, '$1');
  if (host === '') return { host: '0.0.0.0', port };
  if (isIP(host) && !isLocalAddress(host)) {
    throw new Error(`${flag} ${JSON.stringify(address)}: ${host} is not an address of this machine; use one of its addresses, 127.0.0.1, or :${port} for all of them`);
  }
  return { host, port };
}

function isLocalAddress(ip: string): boolean {
  if (ip === '0.0.0.0' || ip === '::') return true;
  const norm = (a: string) => a.toLowerCase().replace(/%.*$/, '');
  return Object.values(networkInterfaces()).some((list) => list?.some((i) => norm(i.address) === norm(ip)));
}

/** Why listen() failed, in words, for an error the operator can fix by choosing another address. */
export function listenError(address: string, err: unknown, flag = '--http-address'): string | undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'EADDRINUSE') return `${flag} ${address}: the port is already in use by another process; stop it or choose another port`;
  if (code === 'EADDRNOTAVAIL') return `${flag} ${address}: the address is not available on this machine; use one of its addresses, or :port for all of them`;
  if (code === 'EACCES') return `${flag} ${address}: not allowed to listen there (ports below 1024 need privileges); choose a port of 1024 or more`;
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return `${flag} ${address}: the host name does not resolve; use an IP address of this machine`;
  return undefined;
}

export async function startOpsServer(o: OpsServerOptions): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    const probe = (p: Probe) => {
      const problem = p();
      res.writeHead(problem ? 503 : 200, { 'Content-Type': 'text/plain' });
      res.end(problem ? `${problem}\n` : 'ok\n');
    };
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz' || path === '/livez') return probe(o.healthz);
    if (path === '/readyz') return probe(o.readyz);
    if (path === '/metrics') {
      o.registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'Content-Type': o.registry.contentType });
          res.end(text);
        },
        (err: unknown) => {
          res.writeHead(500, { 'Content-Type': 'text/plain' });
          res.end(`${(err as Error).message}\n`);
        },
      );
      return;
    }
    res.writeHead(404);
    res.end('not found\n');
  });
  const { host, port } = parseAddress(o.address);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address();
  return {
    server,
    port: typeof addr === 'object' && addr ? addr.port : port,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
