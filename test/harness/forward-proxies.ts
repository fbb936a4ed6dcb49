// Forward proxies for the proxy tests, small on purpose so that every byte of their behaviour is known:
// an HTTP CONNECT proxy (plain, or over TLS for https:// proxy URLs) and a SOCKS5 proxy (no
// authentication, CONNECT only). Each counts the tunnels it opened and records their targets, so a test
// can tell that a request went through it; each can be told to refuse. Host names are resolved by the
// proxy through `hosts` first (a name only the proxy knows proves the client did not connect direct).
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect, createServer as createTcpServer, type Server, type Socket } from 'node:net';

export interface ForwardProxy {
  readonly url: string;
  /** host:port of every tunnel opened (or refused), in order. */
  readonly targets: string[];
  /** When set, every tunnel is refused (CONNECT: this HTTP status; SOCKS5: "connection not allowed"). */
  refuse: number | undefined;
  stop(): Promise<void>;
}

function listen(server: Server | HttpServer): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const addr = server.address();
      resolve(typeof addr === 'object' && addr ? addr.port : 0);
    });
  });
}

function pipe(a: Socket, b: Socket, sockets: Set<Socket>): void {
  for (const s of [a, b]) {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {
      a.destroy();
      b.destroy();
    });
  }
  a.pipe(b);
  b.pipe(a);
}

function stopper(server: Server | HttpServer, sockets: Set<Socket>): () => Promise<void> {
  return () =>
    new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
}

/** An HTTP CONNECT proxy; with `tls`, the client talks TLS to the proxy itself (an https:// proxy URL). */
export async function startConnectProxy(o: { hosts?: Record<string, string>; tls?: { key: Buffer; cert: Buffer } } = {}): Promise<ForwardProxy> {
  const sockets = new Set<Socket>();
  const server = o.tls ? createHttpsServer({ key: o.tls.key, cert: o.tls.cert }) : createHttpServer();
  const proxy = { url: '', targets: [] as string[], refuse: undefined as number | undefined, stop: stopper(server, sockets) };
  server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
    const target = req.url ?? '';
    proxy.targets.push(target);
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => client.destroy());
    if (proxy.refuse !== undefined) {
      client.end(`HTTP/1.1 ${proxy.refuse} Refused by test proxy\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
      return;
    }
    const m = /^(.*):(\d+)$/.exec(target);
    const host = (m?.[1] ?? '').replace(/^\[|\]$/g, '');
    const upstream = connect({ host: o.hosts?.[host] ?? host, port: Number(m?.[2]) }, () => {
      client.write('HTTP/1.1 200 Connection established\r\n\r\n');
      if (head.length) upstream.write(head);
      pipe(client, upstream, sockets);
    });
    upstream.on('error', () => client.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n'));
  });
  const port = await listen(server);
  proxy.url = `${o.tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  return proxy;
}

/** A SOCKS5 proxy (RFC 1928): no authentication, the CONNECT command, IPv4, IPv6 and domain names. */
export async function startSocks5Proxy(o: { hosts?: Record<string, string> } = {}): Promise<ForwardProxy> {
  const sockets = new Set<Socket>();
  const server = createTcpServer();
  const proxy = { url: '', targets: [] as string[], refuse: undefined as number | undefined, stop: stopper(server, sockets) };
  server.on('connection', (client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => client.destroy());
    let buf = Buffer.alloc(0);
    let stage: 'greeting' | 'request' | 'done' = 'greeting';
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (stage === 'greeting') {
        if (buf.length < 2 || buf.length < 2 + buf[1]!) return;
        const methods = buf.subarray(2, 2 + buf[1]!);
        buf = buf.subarray(2 + buf[1]!);
        if (buf.length === 0 && !methods.includes(0)) {
          client.end(Buffer.from([5, 0xff]));
          return;
        }
        client.write(Buffer.from([5, 0]));
        stage = 'request';
      }
      if (stage !== 'request' || buf.length < 5) return;
      const atyp = buf[3]!;
      const addrLen = atyp === 1 ? 4 : atyp === 4 ? 16 : 1 + buf[4]!;
      if (buf.length < 4 + addrLen + 2) return;
      let host: string;
      if (atyp === 1) host = [...buf.subarray(4, 8)].join('.');
      else if (atyp === 4) host = (buf.subarray(4, 20).toString('hex').match(/.{4}/g) ?? []).join(':');
      else host = buf.subarray(5, 5 + buf[4]!).toString('latin1');
      const port = buf.readUInt16BE(4 + addrLen);
      const rest = buf.subarray(4 + addrLen + 2);
      stage = 'done';
      client.off('data', onData);
      proxy.targets.push(`${host}:${port}`);
      // Reply: version, status, reserved, then a bound address (0.0.0.0:0 is enough for clients).
      const reply = (status: number) => Buffer.from([5, status, 0, 1, 0, 0, 0, 0, 0, 0]);
      if (buf[1] !== 1) {
        client.end(reply(7)); // command not supported
        return;
      }
      if (proxy.refuse !== undefined) {
        client.end(reply(2)); // connection not allowed by ruleset
        return;
      }
      const upstream = connect({ host: o.hosts?.[host] ?? host, port }, () => {
        client.write(reply(0));
        if (rest.length) upstream.write(rest);
        pipe(client, upstream, sockets);
      });
      upstream.on('error', () => client.end(reply(5))); // connection refused
    };
    client.on('data', onData);
  });
  const port = await listen(server);
  proxy.url = `socks5://127.0.0.1:${port}`;
  return proxy;
}

/** A plain TCP forwarder listening on `host` (a non-loopback address), counting its connections. */
export async function startForwarder(host: string, to: { host: string; port: number }): Promise<{ url: (scheme: string) => string; connections: () => number; stop: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createTcpServer((client) => {
    connections++;
    const upstream = connect(to);
    pipe(client, upstream, sockets);
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => {
      const addr = server.address();
      resolve(typeof addr === 'object' && addr ? addr.port : 0);
    });
  });
  return { url: (scheme) => `${scheme}://${host}:${port}`, connections: () => connections, stop: stopper(server, sockets) };
}
