// The node operations' errors, classified so that the gRPC layer can give each its status code without
// reading messages: the message is for the person (kubelet shows it in the pod's events), the code is for
// the program.

/**
 * - invalid: the request itself is wrong (a diskID with `..`, a relative path, an fsType not offered);
 * - not-found: what the request names is not on the node (no image, nothing at the volume path);
 * - failed-precondition: the node is not in a state the operation can proceed from (the image is a link,
 *   the disk holds another filesystem, the volume is not staged, a loop device is still mounted);
 * - already-exists: the path is already used in a way that does not match the request (another device
 *   mounted there, read-only asked of a read-write mount);
 * - internal: a command failed or timed out.
 */
export type NodeVolumeErrorCode = 'invalid' | 'not-found' | 'failed-precondition' | 'already-exists' | 'internal';

export class NodeVolumeError extends Error {
  readonly code: NodeVolumeErrorCode;

  constructor(code: NodeVolumeErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NodeVolumeError';
    this.code = code;
  }
}

export function isNodeVolumeError(err: unknown): err is NodeVolumeError {
  return err instanceof NodeVolumeError;
}
