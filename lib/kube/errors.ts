// API errors as the API server reports them (a metav1.Status), with what a program needs to decide:
// retry (429, 5xx, timeouts), relist (410), give up and explain (403, 404, 409, 422).

import type { Status } from './types.ts';

export type { Status };

export class ApiError extends Error {
  readonly statusCode: number;
  readonly status: Status;
  readonly method: string;
  readonly path: string;
  /** From the Retry-After header or the Status details, in seconds. */
  readonly retryAfterSeconds: number | undefined;

  constructor(method: string, path: string, statusCode: number, status: Status, retryAfterSeconds?: number) {
    super(status.message || `${method} ${path}: HTTP ${statusCode}`);
    this.name = 'ApiError';
    this.method = method;
    this.path = path;
    this.statusCode = statusCode;
    this.status = status;
    this.retryAfterSeconds = retryAfterSeconds ?? status.details?.retryAfterSeconds;
  }

  get reason(): string | undefined {
    return this.status.reason;
  }
}

/** The connection failed or timed out before any HTTP answer: the API server is unreachable. */
export class TransportError extends Error {
  readonly code: string | undefined;
  readonly server: string;
  /** The proxy the request went through (its URL and where it was configured), if any. */
  readonly proxy: string | undefined;
  constructor(server: string, cause: Error & { code?: string }, proxy?: string) {
    super(`cannot reach the API server at ${server}${proxy ? ` through the proxy ${proxy}` : ''}: ${cause.message}`, { cause });
    this.name = 'TransportError';
    this.code = cause.code;
    this.server = server;
    this.proxy = proxy;
  }
}

export function isApiError(err: unknown, statusCode?: number): err is ApiError {
  return err instanceof ApiError && (statusCode === undefined || err.statusCode === statusCode);
}

/** Errors worth retrying with backoff: throttling, server trouble, lost connections. */
export function isRetryable(err: unknown): boolean {
  if (err instanceof TransportError) return true;
  if (err instanceof ApiError) return err.statusCode === 429 || err.statusCode >= 500;
  return false;
}
