// Serves CSI services over a unix socket with @grpc/grpc-js: each method an async function of its request,
// whose CsiError becomes the gRPC status the spec asks for and anything else INTERNAL with its message. A
// call the client cancels (a provisioner's deadline) aborts the signal the handler was given.
import { lstat, mkdir, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../lib/runtime/log.ts';
import { CsiError } from './errors.ts';
import type { CallHistogram } from './metrics.ts';

// biome-ignore lint/suspicious/noExplicitAny: a handler's request and response types are its own; the table only routes them
export type Handlers = Record<string, (request: any, signal: AbortSignal) => Promise<object>>;

export interface ServedService {
  definition: grpc.ServiceDefinition;
  handlers: Handlers;
}

/** A status code as Go's gRPC names it (Aborted, InvalidArgument), which the sidecars' metrics carry. */
function goCodeName(code: string): string {
  if (code === 'OK') return code;
  if (code === 'CANCELLED') return 'Canceled';
  return code
    .split('_')
    .map((w) => w.charAt(0) + w.slice(1).toLowerCase())
    .join('');
}

/** The gRPC implementation of one service: every method of `handlers`, logged, timed and mapped to a status. */
function implementation(s: ServedService, log: Logger, calls: CallHistogram | undefined): grpc.UntypedServiceImplementation {
  const impl: grpc.UntypedServiceImplementation = {};
  for (const [method, handler] of Object.entries(s.handlers)) {
    const definition = s.definition[method];
    if (!definition) throw new Error(`no method ${method} in the service`);
    const observe = (code: string, started: number) => calls?.observe({ method_name: definition.path, grpc_status_code: goCodeName(code) }, (performance.now() - started) / 1000);
    impl[method] = (call: grpc.ServerUnaryCall<object, object>, callback: grpc.sendUnaryData<object>) => {
      const abort = new AbortController();
      call.on('cancelled', () => abort.abort());
      const started = performance.now();
      handler(call.request, abort.signal).then(
        (response) => {
          log.debug('csi call', { method, ms: Math.round(performance.now() - started) });
          observe('OK', started);
          callback(null, response);
        },
        (err: unknown) => {
          const e = err instanceof CsiError ? err : undefined;
          const message = (err as Error)?.message ?? String(err);
          log[e && e.code !== 'INTERNAL' ? 'info' : 'warn']('csi call failed', { method, code: e?.code ?? 'INTERNAL', error: message, ms: Math.round(performance.now() - started) });
          observe(e?.code ?? 'INTERNAL', started);
          callback({ code: e ? e.grpcCode : grpc.status.INTERNAL, details: message });
        },
      );
    };
  }
  return impl;
}

/**
 * Listens on the unix socket `path` (a stale socket from an earlier run is replaced; anything else there
 * is an error) and serves `services`, timing each call in `calls` when given. Returns a function that stops the server and removes the socket.
 */
export async function serve(path: string, services: ServedService[], log: Logger, calls?: CallHistogram): Promise<() => Promise<void>> {
  await mkdir(dirname(path), { recursive: true });
  const existing = await lstat(path).catch(() => undefined);
  if (existing?.isSocket()) await unlink(path);
  else if (existing) throw new Error(`${path} exists and is not a socket: remove it or choose another --csi-address`);
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 4 * 1024 * 1024 });
  for (const s of services) server.addService(s.definition, implementation(s, log, calls));
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix:${path}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
  return async () => {
    await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
    await unlink(path).catch(() => undefined);
  };
}
