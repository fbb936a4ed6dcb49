// The HTTP endpoints every NodeDisks process serves: /metrics (Prometheus), /healthz (the process is
// alive and its loops turn), /readyz (it can do its job: synced with the API server, and so on).
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';

export interface Probe {
  /** undefined when fine, otherwise why not. */
  (): string | undefined;
}

export interface OpsServerOptions {
  /** "host:port" or ":port"; port 0 picks a free one. */
  address: string;
  registry: Registry;
  healthz: Probe;
  readyz: Probe;
}

export function parseAddress(address: string): { host: string; port: number } {
  const m = /^(.*):(\d+)$/.exec(address);
  if (!m) throw new Error(`invalid address ${JSON.stringify(address)}: use host:port or :port`);
  return { host: m[1] || '0.0.0.0', port: Number(m[2]) };
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
        (err: Error) => {
          res.writeHead(500);
          res.end(err.message);
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
