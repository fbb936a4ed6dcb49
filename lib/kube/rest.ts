// A small REST client over node:https, authenticated from a kubeconfig (./kubeconfig.ts).
// We talk HTTP directly (rather than through the generated API classes) because every program here
// needs what those hide: server-side apply content types, streaming watches, the Status body of an
// error, Retry-After, and request timeouts.

import type { IncomingMessage, OutgoingHttpHeaders, RequestOptions } from 'node:http';
import { ApiError, TransportError, type Status } from './errors.ts';
import type { ClusterAccess } from './kubeconfig.ts';
import { redactedProxy } from './proxy.ts';
import type { TokenBucket } from './ratelimit.ts';

// node:http and node:https are taken with process.getBuiltinModule on purpose: importing them as ES
// modules evaluates every lazy export, which loads Node's bundled undici on every plugin start (ADR 9).
// It also works unchanged in the single executable (CommonJS) build. And they are taken when the
// first client is made, not when this module loads: commands that need no cluster (version, help, gitops)
// skip loading TLS, and a plain-http server skips it too.
const http = () => process.getBuiltinModule('node:http');
const https = () => process.getBuiltinModule('node:https');

export type Query = Record<string, string | number | boolean | undefined>;

export interface RequestInit {
  query?: Query;
  body?: unknown;
  /** Defaults to application/json when there is a body. */
  contentType?: string;
  timeoutMs?: number;
  signal?: AbortSignal;
  /** A stream (watch): the timeout covers only the wait for the response headers. */
  stream?: boolean;
  /** Defaults to application/json (a Table, say, is asked for with its media type parameters). */
  accept?: string;
}

export const CONTENT_TYPE = {
  json: 'application/json',
  apply: 'application/apply-patch+yaml',
  merge: 'application/merge-patch+json',
  jsonPatch: 'application/json-patch+json',
} as const;

export interface RestClientOptions {
  /** Per-request timeout (kubectl's --request-timeout); 0 means none. */
  timeoutMs?: number;
  userAgent?: string;
  /** Every request also carries this signal: aborting it cancels all that is in flight (a leader's term). */
  signal?: AbortSignal;
  /**
   * Called right before each request leaves, after the last await: throwing stops the request. A leader
   * checks there that it still leads, so nothing decided earlier is sent once it no longer does.
   */
  gate?: () => void;
  /**
   * A client-side rate limit (client-go's QPS and burst) that every request waits on before it leaves,
   * watches and lists included. Kept by with(): a leader's term shares its process's bucket.
   */
  rateLimiter?: TokenBucket;
}

/** The connection agent of a client and of the clients made from it with `with()`. */
interface AgentHolder {
  agent?: import('node:http').Agent;
  /** A proxy's agent is made on first use: its library is loaded only then (./proxy-agent.ts). */
  pending?: Promise<import('node:http').Agent>;
}

export class RestClient {
  readonly server: string;
  readonly access: ClusterAccess;
  private readonly opts: RestClientOptions;
  /** Keep-alive: paged lists and controllers reuse one TLS connection instead of a handshake per call. */
  private readonly agents: AgentHolder;

  constructor(access: ClusterAccess, opts: RestClientOptions = {}, agent?: import('node:http').Agent | AgentHolder) {
    this.server = access.server;
    this.access = access;
    this.opts = opts;
    if (agent instanceof http().Agent) this.agents = { agent };
    else if (agent) this.agents = agent;
    else if (access.proxy) this.agents = {};
    else this.agents = { agent: access.server.startsWith('http:') ? new (http().Agent)({ keepAlive: true }) : new (https().Agent)({ keepAlive: true }) };
  }

  /** The same credentials and connections, with some options replaced (a term's signal and gate, say). */
  with(opts: Partial<RestClientOptions>): RestClient {
    return new RestClient(this.access, { ...this.opts, ...opts }, this.agents);
  }

  /** Closes idle connections, so a short-lived command exits at once. */
  close(): void {
    this.agents.agent?.destroy();
  }

  private async agent(): Promise<import('node:http').Agent> {
    if (this.agents.agent) return this.agents.agent;
    const proxy = this.access.proxy!;
    this.agents.pending ??= import('./proxy-agent.ts').then(({ proxyAgent }) => proxyAgent(proxy));
    this.agents.agent = await this.agents.pending;
    return this.agents.agent;
  }

  /** A connection failure, naming the proxy when the request went through one. */
  private transportError(err: Error & { code?: string }): TransportError {
    const proxy = this.access.proxy;
    return new TransportError(this.server, err, proxy ? `${redactedProxy(proxy.url)} (${proxy.source})` : undefined);
  }

  private url(path: string, query?: Query): URL {
    const url = new URL(this.server + path);
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v !== undefined) url.searchParams.set(k, String(v));
    }
    return url;
  }

  /** Opens a request and resolves with the response once headers arrive. Errors carry the Status body. */
  async open(method: string, path: string, init: RequestInit = {}): Promise<IncomingMessage> {
    const url = this.url(path, init.query);
    const auth = await this.access.headers();
    const agent = await this.agent();
    const headers: OutgoingHttpHeaders = { Accept: init.accept ?? 'application/json', 'User-Agent': this.opts.userAgent ?? 'nodedisks', ...auth };
    const tls = this.access.tls;
    const options: RequestOptions & { headers: OutgoingHttpHeaders } = {
      method,
      headers,
      agent,
      ...(url.protocol === 'https:' ? { ca: tls.ca, cert: tls.cert, key: tls.key, rejectUnauthorized: tls.rejectUnauthorized, servername: tls.servername } : {}),
    };
    let payload: string | undefined;
    if (init.body !== undefined) {
      payload = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
      options.headers['Content-Type'] = init.contentType ?? CONTENT_TYPE.json;
      options.headers['Content-Length'] = String(Buffer.byteLength(payload));
    }
    const timeoutMs = init.timeoutMs ?? this.opts.timeoutMs ?? 0;
    const send = url.protocol === 'http:' ? http().request : https().request;
    const signal = this.opts.signal && init.signal ? AbortSignal.any([this.opts.signal, init.signal]) : (this.opts.signal ?? init.signal);
    // The wait for a token comes before the gate: the gate must be the last thing asked before sending.
    await this.opts.rateLimiter?.wait(signal);
    // Nothing is awaited from here on. See docs/adr/0011 for the gate.
    signal?.throwIfAborted();
    this.opts.gate?.();
    return await new Promise<IncomingMessage>((resolve, reject) => {
      let response: IncomingMessage | undefined;
      let timer: NodeJS.Timeout | undefined;
      const req = send(url, { ...options, signal }, (res) => {
        response = res;
        const code = res.statusCode ?? 0;
        // The timeout covers the whole exchange, body included, and ends with it; a stream's ends here.
        if (init.stream) clearTimeout(timer);
        res.once('close', () => clearTimeout(timer));
        if (code >= 200 && code < 300) {
          resolve(res);
          return;
        }
        readBody(res).then(
          (text) => reject(toApiError(method, path, code, text, res.headers['retry-after'])),
          (err: Error) => reject(this.transportError(err)),
        );
      });
      if (timeoutMs > 0) {
        timer = setTimeout(() => {
          const err = Object.assign(new Error(`request timed out after ${timeoutMs} ms`), { code: 'ETIMEDOUT' });
          req.destroy(err);
          response?.destroy(err);
        }, timeoutMs);
      }
      let refused: unknown;
      req.on('error', (err: Error & { code?: string }) => {
        clearTimeout(timer);
        if (err === refused || err.name === 'AbortError') reject(err);
        else reject(this.transportError(err));
      });
      // A proxy that refuses the tunnel answers CONNECT itself (403, 407, 502…); that answer is the
      // proxy's, not the API server's, so it is reported as the proxy refusing, never as an API error.
      req.once('proxyConnect', (answer: { statusCode?: number; statusText?: string }) => {
        if (answer.statusCode === 200) return;
        const refusal = Object.assign(new Error(`the proxy refused the tunnel: ${answer.statusCode ?? '?'} ${answer.statusText ?? ''}`.trim()), { code: 'EPROXYREFUSED' });
        reject(this.transportError(refusal));
        req.destroy();
      });
      const gate = this.opts.gate;
      if (!gate) {
        req.end(payload);
        return;
      }
      // With a gate, nothing is written until the connection is ready, and the gate is asked again
      // then: a new connection (TCP and TLS handshakes) can take long, and the answer may have changed.
      req.once('socket', (socket) => {
        const go = () => {
          try {
            gate();
          } catch (err) {
            refused = err;
            req.destroy(err as Error);
            return;
          }
          req.end(payload);
        };
        if (socket.connecting) socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', go);
        else go();
      });
    });
  }

  /**
   * A request whose JSON answer is returned. Reads (GET) that get 429 Too Many Requests are retried, as
   * client-go does, after the Retry-After the server asked for (at most 10 s, at most 4 retries).
   */
  async request<T>(method: string, path: string, init: RequestInit = {}): Promise<T> {
    const text = await this.requestText(method, path, init);
    return (text === '' ? undefined : JSON.parse(text)) as T;
  }

  /** The same as request, the answer's text unparsed (for a caller that reads it before parsing it). */
  async requestText(method: string, path: string, init: RequestInit = {}): Promise<string> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.requestOnce(method, path, init);
      } catch (err) {
        if (method !== 'GET' || attempt >= 4 || !(err instanceof ApiError) || err.statusCode !== 429) throw err;
        const waitMs = Math.min(10, err.retryAfterSeconds ?? 1) * 1000;
        await new Promise((r) => setTimeout(r, waitMs));
      }
    }
  }

  private async requestOnce(method: string, path: string, init: RequestInit): Promise<string> {
    const res = await this.open(method, path, init);
    try {
      return await readBody(res);
    } catch (err) {
      throw this.transportError(err as Error);
    }
  }
}

export async function readBody(res: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function toApiError(method: string, path: string, code: number, text: string, retryAfter: string | undefined): ApiError {
  let status: Status;
  try {
    const parsed = JSON.parse(text) as Status;
    status = parsed && typeof parsed === 'object' ? parsed : { message: text };
  } catch {
    status = { message: text.trim() || `HTTP ${code}`, code };
  }
  const seconds = retryAfter !== undefined && /^\d+$/.test(retryAfter) ? Number(retryAfter) : undefined;
  return new ApiError(method, path, code, status, seconds);
}
