// A CSI call's failure as the spec wants it: a gRPC status code the caller acts on (the provisioner retries
// UNAVAILABLE and ABORTED, gives up on INVALID_ARGUMENT, …) and a message that names the problem and the fix.
import { status } from '@grpc/grpc-js';

export type CsiCode =
  | 'INVALID_ARGUMENT'
  | 'NOT_FOUND'
  | 'ALREADY_EXISTS'
  | 'FAILED_PRECONDITION'
  | 'RESOURCE_EXHAUSTED'
  | 'OUT_OF_RANGE'
  | 'ABORTED'
  | 'UNAVAILABLE'
  | 'UNIMPLEMENTED'
  | 'INTERNAL';

export class CsiError extends Error {
  readonly code: CsiCode;
  constructor(code: CsiCode, message: string) {
    super(message);
    this.code = code;
  }

  get grpcCode(): status {
    return status[this.code];
  }
}

export function invalid(message: string): CsiError {
  return new CsiError('INVALID_ARGUMENT', message);
}
