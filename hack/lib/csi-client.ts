// A CSI client for tests and dev tools (the dashboard picture): the driver's services over its unix
// socket, each call a promise that rejects with the gRPC status (code and details) the driver answered.
import * as grpc from '@grpc/grpc-js';
import { clientConstructors } from '../../csi/proto/load.ts';

export interface CsiCallError extends Error {
  code: grpc.status;
  details: string;
}

type Method =
  | 'GetPluginInfo'
  | 'GetPluginCapabilities'
  | 'Probe'
  | 'ControllerGetCapabilities'
  | 'CreateVolume'
  | 'DeleteVolume'
  | 'ValidateVolumeCapabilities'
  | 'GetCapacity'
  | 'NodeGetInfo'
  | 'NodeGetCapabilities'
  | 'NodeStageVolume'
  | 'NodeUnstageVolume'
  | 'NodePublishVolume'
  | 'NodeUnpublishVolume'
  | 'NodeGetVolumeStats';

export type CsiClient = Record<Method, (request: object) => Promise<Record<string, unknown>>>;

/** A client of `service` (Identity, Controller, Node) on the unix socket `path`; close() when done. */
export function csiClient(path: string, service: 'Identity' | 'Controller' | 'Node'): { call: CsiClient; close: () => void } {
  const Ctor = clientConstructors()[service];
  const client = new Ctor(`unix:${path}`, grpc.credentials.createInsecure());
  const call: CsiClient = new Proxy({} as CsiClient, {
    get: (_t, method: string) => (request: object) =>
      new Promise<Record<string, unknown>>((resolve, reject) => {
        const fn = (client as unknown as Record<string, (r: object, cb: (err: grpc.ServiceError | null, res: Record<string, unknown>) => void) => void>)[method];
        if (!fn) return reject(new Error(`no method ${method} in ${service}`));
        fn.call(client, request, (err, res) => (err ? reject(err) : resolve(res)));
      }),
  });
  return { call, close: () => client.close() };
}

/** The gRPC status name of a failed call (NOT_FOUND, …), or 'OK'. */
export async function statusOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'OK';
  } catch (err) {
    return grpc.status[(err as CsiCallError).code] ?? String(err);
  }
}
