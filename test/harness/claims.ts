// Waits the claims tests share.
import type { NodeDiskClaimClient } from '../../api/claim-client.ts';
import { eventually } from '../../hack/lib/wait.ts';

/** Waits until claim ns/name is gone from the API server (its finalizer done). */
export async function claimGone(claims: NodeDiskClaimClient, ns: string, name: string): Promise<void> {
  await eventually(`claim ${ns}/${name} gone`, async () =>
    claims.get(ns, name).then(
      () => false,
      (err: { statusCode?: number }) => err.statusCode === 404,
    ),
  );
}
