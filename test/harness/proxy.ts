// A TCP proxy on loopback between one program and the API server, which a test can switch to a black
// hole: every connection, old and new, stays open and accepts bytes, and nothing comes back. That is what
// a stalled network path looks like from the client (no RST, no FIN, just silence), the case a request
// timeout and a leader's renew deadline exist for. TLS passes through untouched (the client still talks to
// the API server's certificate).
import { connect, createServer, type Server, type Socket } from 'node:net';

export class BlackHoleProxy {
  private readonly server: Server;
  private readonly upstream: { host: string; port: number };
  private readonly sockets = new Set<Socket>();
  private holes = false;
  /** Connections that were forwarding when the hole opened: their bytes are dropped from then on. */
  private readonly pairs = new Set<{ client: Socket; server: Socket; dead: boolean }>();
  port = 0;

  private constructor(upstream: { host: string; port: number }) {
    this.upstream = upstream;
    this.server = createServer((client) => this.accept(client));
  }

  /** Listens on a free loopback port and forwards to `target` (an https:// URL or host:port). */
  static async start(target: string): Promise<BlackHoleProxy> {
    const u = new URL(target.includes('://') ? target : `tcp://${target}`);
    const proxy = new BlackHoleProxy({ host: u.hostname, port: Number(u.port) });
    await new Promise<void>((resolve, reject) => {
      proxy.server.once('error', reject);
      proxy.server.listen(0, '127.0.0.1', () => resolve());
    });
    const addr = proxy.server.address();
    proxy.port = typeof addr === 'object' && addr ? addr.port : 0;
    return proxy;
  }

  get url(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  private track(s: Socket): void {
    this.sockets.add(s);
    s.on('close', () => this.sockets.delete(s));
    s.on('error', () => s.destroy());
  }

  private accept(client: Socket): void {
    this.track(client);
    if (this.holes) {
      client.on('data', () => undefined); // read and drop, so the client's writes never block
      return;
    }
    const server = connect(this.upstream.port, this.upstream.host);
    this.track(server);
    const pair = { client, server, dead: false };
    this.pairs.add(pair);
    client.on('data', (b) => {
      if (!this.holes && !pair.dead) server.write(b);
    });
    server.on('data', (b) => {
      if (!this.holes && !pair.dead) client.write(b);
    });
    const end = () => {
      this.pairs.delete(pair);
      // In a black hole nothing tells the client its connection is gone, then or later.
      if (this.holes) pair.dead = true;
      if (!pair.dead) {
        client.destroy();
        server.destroy();
      }
    };
    client.on('close', end);
    server.on('close', end);
  }

  /** From now on no byte passes in either direction, on open connections and on new ones; none is closed. */
  blackHole(): void {
    this.holes = true;
  }

  /**
   * New connections are forwarded again. Connections that fell into the hole stay silent (their TLS
   * streams lost bytes): only the client's own timeouts can get it out of them.
   */
  restore(): void {
    this.holes = false;
    for (const pair of this.pairs) pair.dead = true;
    this.pairs.clear();
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
