// The claim/NAME form of `kubectl nodedisks status` (./status.ts): a claim's words and pod snippet
// (../claim.ts), one claim after the other, as `status NAME…` prints disks.
import { ApiError } from '../../lib/kube/errors.ts';
import { claimName, describeClaim } from '../claim.ts';
import type { Session } from '../context.ts';
import { EXIT, PluginError, usageError } from '../errors.ts';
import { escapeControl } from '../escape.ts';

/** Handles `status claim/NAME…` and answers true; answers false when no argument names a claim. */
export async function claimStatus(session: Session, args: string[], namespaceFlag: string | undefined): Promise<boolean> {
  const names = args.map(claimName);
  if (names.every((n) => n === undefined)) return false;
  if (names.some((n) => n === undefined)) throw usageError('status takes NodeDisk names or claim/NAME, not both at once');
  const namespace = session.namespace(namespaceFlag);
  const texts: string[] = [];
  for (const name of names as string[]) {
    try {
      texts.push(describeClaim(await session.claims().get(namespace, name)));
    } catch (err) {
      if (err instanceof ApiError && err.statusCode === 404 && err.status.details?.name) {
        throw new PluginError(`nodediskclaim.localtest.example.com "${name}" not found in namespace ${namespace}; list them with: kubectl nodedisks claims -n ${namespace}`, EXIT.notFound);
      }
      throw err;
    }
  }
  // Every value is text others wrote (the controller's message, a person's selector).
  session.io.out(escapeControl(texts.join('\n'), true));
  return true;
}
