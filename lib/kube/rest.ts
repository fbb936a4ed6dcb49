// A small REST client over node:https, authenticated from a kubeconfig (./kubeconfig.ts).
// We talk HTTP directly (rather than through the generated API classes) because every program here
// needs what those hide: server-side apply content types, streaming watches, the Status body of an
// error, Retry-After, and request timeouts.

import type { ClientRequest, IncomingMessage, OutgoingHttpHeaders, RequestOptions } from 'node:http';
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
  /**
   * Called with each request the API server refused (an ApiError) or that got no answer (a
   * TransportError): a program counts them in its metrics. Not for a request cancelled by its signal or
   * stopped by the gate, which the caller chose. Kept by with().
   */
  onError?: (method: string, err: ApiError | TransportError) => void;
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

  /**
   * The proxy choice: the direct keep-alive agent made in the constructor, or, when the access names a
   * proxy (./proxy.ts decided which, from proxy-url or the environment), the proxy's agent, made on first use.
   */
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

  /**
   * Opens a request and resolves with the response once headers arrive. Errors carry the Status body.
   * A request cut before any answer on a kept-alive connection (the server closed it as idle while the
   * request left, so it never read it) is sent once more on a new connection, as Node's docs advise; a
   * POST is not, because a server that did act on it would create twice.
   */
  open(method: string, path: string, init: RequestInit = {}): Promise<IncomingMessage> {
    return this.openOnce(method, path, init, method !== 'POST');
  }

  private async openOnce(method: string, path: string, init: RequestInit, mayResend: boolean): Promise<IncomingMessage> {
    const url = this.url(path, init.query);
    const auth = await this.access.headers();
    const agent = await this.agent();
    const { options, payload } = this.requestOptions(method, url, init, auth, agent);
    const signal = this.signalOf(init);
    // The wait for a token comes before the gate: the gate must be the last thing asked before sending.
    await this.opts.rateLimiter?.wait(signal);
    // Nothing is awaited from here on. See docs/adr/0011 for the gate, and sendWhenAllowed for why it is
    // asked again once the connection is ready.
    signal?.throwIfAborted();
    this.opts.gate?.();
    const send = url.protocol === 'http:' ? http().request : https().request;
    return await new Promise<IncomingMessage>((resolve, reject) => {
      const fail = (err: ApiError | TransportError) => {
        this.opts.onError?.(method, err);
        reject(err);
      };
      let response: IncomingMessage | undefined;
      const req = send(url, { ...options, signal }, (res) => {
        response = res;
        const code = res.statusCode ?? 0;
        // The timeout covers the whole exchange, body included, and ends with it; a stream's ends here.
        if (init.stream) timeout.clear();
        res.once('close', () => timeout.clear());
        if (code >= 200 && code < 300) {
          resolve(res);
          return;
        }
        readBody(res).then(
          (text) => fail(toApiError(method, path, code, text, res.headers['retry-after'])),
          (err: Error) => fail(this.transportError(err)),
        );
      });
      const timeout = armTimeout(req, () => response, init.timeoutMs ?? this.opts.timeoutMs ?? 0);
      let refused: unknown;
      req.on('error', (err: Error & { code?: string }) => {
        timeout.clear();
        if (err === refused || err.name === 'AbortError') reject(err);
        else if (mayResend && !response && req.reusedSocket && err.code === 'ECONNRESET') resolve(this.openOnce(method, path, init, false));
        else fail(this.transportError(err));
      });
      req.once('proxyConnect', (answer: { statusCode?: number; statusText?: string }) => {
        const refusal = proxyRefusal(answer);
        if (!refusal) return;
        fail(this.transportError(refusal));
        req.destroy();
      });
      sendWhenAllowed(req, url, payload, this.opts.gate, (err) => {
        refused = err;
      });
    });
  }

  /** What node:http needs for one request: method, headers (auth, content), agent and TLS; and the body. */
  private requestOptions(
    method: string,
    url: URL,
    init: RequestInit,
    auth: Record<string, string>,
    agent: import('node:http').Agent,
  ): { options: RequestOptions & { headers: OutgoingHttpHeaders }; payload: string | undefined } {
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
    return { options, payload };
  }

  /** The request's abort signal: the client's (a leader's term) and the caller's, either one aborting it. */
  private signalOf(init: RequestInit): AbortSignal | undefined {
    return this.opts.signal && init.signal ? AbortSignal.any([this.opts.signal, init.signal]) : (this.opts.signal ?? init.signal);
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

/**
 * Ends the request (and its response, once there is one) with ETIMEDOUT after `timeoutMs`; 0 means no
 * timeout. The caller clears it when the exchange is over.
 */
function armTimeout(req: ClientRequest, response: () => IncomingMessage | undefined, timeoutMs: number): { clear(): void } {
  if (timeoutMs <= 0) return { clear: () => {} };
  const timer = setTimeout(() => {
    const err = Object.assign(new Error(`request timed out after ${timeoutMs} ms`), { code: 'ETIMEDOUT' });
    req.destroy(err);
    response()?.destroy(err);
  }, timeoutMs);
  return { clear: () => clearTimeout(timer) };
}

/**
 * A proxy that refuses the tunnel answers CONNECT itself (403, 407, 502…); that answer is the proxy's, not
 * the API server's, so it is reported as the proxy refusing, never as an API error. Undefined for a 200.
 */
function proxyRefusal(answer: { statusCode?: number; statusText?: string }): (Error & { code: string }) | undefined {
  if (answer.statusCode === 200) return undefined;
  return Object.assign(new Error(`the proxy refused the tunnel: ${answer.statusCode ?? '?'} ${answer.statusText ?? ''}`.trim()), { code: 'EPROXYREFUSED' });
}

/**
 * Writes the request once the gate allows it. The gate is asked twice on purpose: open() asks it right
 * before the request is made (so a refused request takes no connection from the pool and opens none: a
 * replica that does not lead sends nothing at all), and this asks it again once the connection is ready,
 * because a new connection (TCP and TLS handshakes, a proxy's CONNECT) can take long and the answer may
 * have changed meanwhile. A refusal destroys the request with the gate's error (`onRefused` marks it as
 * that, not a transport error). Without a gate the request is written at once.
 */
function sendWhenAllowed(req: ClientRequest, url: URL, payload: string | undefined, gate: (() => void) | undefined, onRefused: (err: unknown) => void): void {
  if (!gate) {
    req.end(payload);
    return;
  }
  req.once('socket', (socket) => {
    const go = () => {
      try {
        gate();
      } catch (err) {
        onRefused(err);
        req.destroy(err as Error);
        return;
      }
      req.end(payload);
    };
    if (socket.connecting) socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', go);
    else go();
  });
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
