// Exit codes and error messages of `kubectl nodedisks`: every failure names the cause and the fix.
import { CRD_NAME, GITOPS_FIELD_MANAGERS } from '../api/constants.ts';
import { ApiError, TransportError } from '../lib/kube/errors.ts';
import { KubeConfigError } from '../lib/kube/kubeconfig.ts';

export const EXIT = {
  ok: 0,
  error: 1,
  usage: 2,
  notFound: 3,
  forbidden: 4,
  conflict: 5,
  timeout: 6,
  unreachable: 7,
} as const;

/** An error the plugin raises itself, with its exit code. */
export class PluginError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode: number = EXIT.error) {
    super(message);
    this.name = 'PluginError';
    this.exitCode = exitCode;
  }
}

/** A failure whose message the command has already written to stderr (as kubectl words it): exit only. */
export class ReportedError extends PluginError {}

export const usageError = (message: string) => new PluginError(message, EXIT.usage);

/** Managers named in a server-side apply conflict ("conflict with \"argocd-controller\" …"). */
export function conflictManagers(err: ApiError): string[] {
  const found = new Set<string>();
  const texts = [err.message, ...(err.status.details?.causes ?? []).map((c) => c.message ?? '')];
  for (const t of texts) for (const m of t.matchAll(/conflict with "([^"]+)"/g)) if (m[1]) found.add(m[1]);
  return [...found];
}

export function describeError(err: unknown): { message: string; exitCode: number } {
  if (err instanceof PluginError) return { message: err.message, exitCode: err.exitCode };
  if (err instanceof KubeConfigError) return { message: err.message, exitCode: EXIT.usage };
  if (err instanceof TransportError) {
    const timedOut = err.code === 'ETIMEDOUT';
    return {
      message: timedOut
        ? `${err.message}; raise --request-timeout or check the network`
        : err.proxy
          ? `${err.message}; check the proxy (proxy-url in the kubeconfig, or HTTPS_PROXY and NO_PROXY)`
          : `${err.message}; check that the cluster is running and that --kubeconfig/--context point at it`,
      exitCode: timedOut ? EXIT.timeout : EXIT.unreachable,
    };
  }
  if (err instanceof ApiError) {
    const code = err.statusCode;
    if (code === 401) return { message: `the API server did not accept your credentials (${err.message}); log in again or fix the user in your kubeconfig`, exitCode: EXIT.forbidden };
    if (code === 403) {
      return {
        message: `${err.message}\nask your cluster admin for the nodedisks-viewer (read), nodedisks-editor (reserve/release) or nodedisks-pruner (prune) ClusterRole`,
        exitCode: EXIT.forbidden,
      };
    }
    if (code === 404 && (err.status.details?.name ?? '') === '' && /could not find the requested resource|404 page not found/i.test(err.message)) {
      return { message: `the NodeDisk API (${CRD_NAME}) is not installed in this cluster; install it with: kubectl apply --server-side -k kustomize/crd`, exitCode: EXIT.notFound };
    }
    if (code === 404) return { message: `${err.message}; list disks with: kubectl nodedisks list`, exitCode: EXIT.notFound };
    if (code === 409) {
      const managers = conflictManagers(err);
      const git = managers.filter((m) => GITOPS_FIELD_MANAGERS.includes(m));
      if (git.length) {
        return {
          message: `${err.message}\nthese fields are managed from git by ${git.join(', ')}: change them in your GitOps repository (kubectl nodedisks gitops …) instead, or take them over with --force-conflicts`,
          exitCode: EXIT.conflict,
        };
      }
      if (managers.length) return { message: `${err.message}\n${managers.join(', ')} own these fields; re-run with --force-conflicts to take them over`, exitCode: EXIT.conflict };
      // No field owner named: the object changed since it was read, and forcing would not help.
      return { message: `${err.message}\nsomeone else changed it first; run the command again`, exitCode: EXIT.conflict };
    }
    if (code === 422) return { message: `the API server rejected the change: ${err.message}`, exitCode: EXIT.usage };
    if (code === 429 || code >= 500) return { message: `the API server is busy or failing (${code}): ${err.message}; try again`, exitCode: EXIT.error };
    return { message: err.message, exitCode: EXIT.error };
  }
  return { message: (err as Error)?.message ?? String(err), exitCode: EXIT.error };
}
