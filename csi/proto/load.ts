// The CSI services and the kubelet's plugin-registration service, from the descriptors hack/csiproto
// generates out of the published modules at build time (bundled into dist/csi by esbuild).
import * as grpc from '@grpc/grpc-js';
import { fromJSON, type Options } from '@grpc/proto-loader';
import type { INamespace } from 'protobufjs';
import csiDescriptor from './generated/csi.json' with { type: 'json' };
import registrationDescriptor from './generated/pluginregistration.json' with { type: 'json' };

// Field names as in the .proto (snake_case), int64 as JS numbers (a disk's bytes stay far below 2^53),
// enums by name, every field present with its default: what the handlers read and write.
const OPTIONS: Options = { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true };

function service(descriptor: INamespace, path: string[]): grpc.ServiceDefinition {
  let node: unknown = grpc.loadPackageDefinition(fromJSON(descriptor, OPTIONS));
  for (const part of path) node = (node as Record<string, unknown>)[part];
  const definition = (node as { service?: grpc.ServiceDefinition } | undefined)?.service;
  if (!definition) throw new Error(`the generated descriptor has no service ${path.join('.')} (run node hack/csiproto/generate.ts)`);
  return definition;
}

// The JSON's inferred type is narrower than protobuf.js's descriptor type, not another shape.
const csiJson = csiDescriptor as unknown as INamespace;
const registrationJson = registrationDescriptor as unknown as INamespace;

export const identityService = service(csiJson, ['csi', 'v1', 'Identity']);
export const controllerService = service(csiJson, ['csi', 'v1', 'Controller']);
export const nodeService = service(csiJson, ['csi', 'v1', 'Node']);
export const registrationService = service(registrationJson, ['pluginregistration', 'Registration']);

/** The client constructors, for tests and the node side's self-check. */
export function clientConstructors(): {
  Identity: grpc.ServiceClientConstructor;
  Controller: grpc.ServiceClientConstructor;
  Node: grpc.ServiceClientConstructor;
  Registration: grpc.ServiceClientConstructor;
} {
  const csi = grpc.loadPackageDefinition(fromJSON(csiJson, OPTIONS)) as unknown as { csi: { v1: Record<string, grpc.ServiceClientConstructor> } };
  const reg = grpc.loadPackageDefinition(fromJSON(registrationJson, OPTIONS)) as unknown as { pluginregistration: Record<string, grpc.ServiceClientConstructor> };
  return { Identity: csi.csi.v1.Identity!, Controller: csi.csi.v1.Controller!, Node: csi.csi.v1.Node!, Registration: reg.pluginregistration.Registration! };
}
