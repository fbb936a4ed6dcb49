// API errors as the API server reports them (a metav1.Status), with what a program needs to decide:
// retry (429, 5xx, timeouts), relist (410), give up and explain (403, 404, 409, 422); and the errors before
// any answer: a kubeconfig that cannot be used, a server that cannot be reached.

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

/** A kubeconfig (or what it points at: files, an exec credential plugin) that cannot be used as it is. */
export class KubeConfigError extends Error {
  override name = 'KubeConfigError';
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

/** The reasons of metav1.StatusReason that client-go knows: a 409 with one of these but Conflict is not a conflict. */
const KNOWN_REASONS = new Set([
  'Unauthorized',
  'Forbidden',
  'NotFound',
  'AlreadyExists',
  'Conflict',
  'Gone',
  'Invalid',
  'ServerTimeout',
  'StoreReadError',
  'Timeout',
  'TooManyRequests',
  'BadRequest',
  'MethodNotAllowed',
  'NotAcceptable',
  'RequestEntityTooLarge',
  'UnsupportedMediaType',
  'InternalError',
  'Expired',
  'ServiceUnavailable',
]);

/**
 * A write refused with 409 Conflict, as client-go's IsConflict decides: reason Conflict, or a 409 whose
 * reason client-go does not know (a 409 AlreadyExists is a create of a name in use, not a conflict).
 */
export function isConflict(err: unknown): err is ApiError {
  if (!(err instanceof ApiError)) return false;
  const reason = err.status.reason;
  return reason === 'Conflict' || (err.statusCode === 409 && (reason === undefined || reason === '' || !KNOWN_REASONS.has(reason)));
}

/**
 * A server-side apply conflict over field ownership: other managers own fields the apply sets. The API
 * server says so in `details.causes` (reason FieldManagerConflict, one per field) and names each manager in
 * the message ("Apply failed with 1 conflict: conflict with \"m\" …"); either is enough. A fresh read does
 * not cure it: only force (or leaving the fields alone) does.
 */
export function isFieldManagerConflict(err: unknown): err is ApiError {
  if (!isConflict(err)) return false;
  const causes = err.status.details?.causes ?? [];
  if (causes.some((c) => c.reason === 'FieldManagerConflict')) return true;
  return [err.message, ...causes.map((c) => c.message ?? '')].some((m) => /conflict with "[^"]+"/.test(m));
}

/**
 * A write whose resourceVersion precondition failed: the object changed since it was read ("the object
 * has been modified; please apply your changes to the latest version and try again"). A fresh read and a
 * new decision cure it; forcing would not (the precondition still holds the write back).
 */
export function isStaleVersionConflict(err: unknown): err is ApiError {
  return isConflict(err) && !isFieldManagerConflict(err);
}
