// What every command gets: the parsed global (kubectl) flags turned into an API client, and output.
import { NodeDiskClaimClient } from '../api/claim-client.ts';
import { NodeDiskClient } from '../api/client.ts';
import { loadKubeConfig, type ClusterAccess } from '../lib/kube/kubeconfig.ts';
import { trustOnlyTheClusterCA } from '../lib/kube/trust-only-ca.ts';
import { RestClient } from '../lib/kube/rest.ts';
import { parseDuration } from '../lib/runtime/duration.ts';
import { usageError } from './errors.ts';

export interface GlobalFlags {
  kubeconfig?: string | undefined;
  context?: string | undefined;
  cluster?: string | undefined;
  user?: string | undefined;
  server?: string | undefined;
  token?: string | undefined;
  as?: string | undefined;
  'as-group'?: string[] | undefined;
  'certificate-authority'?: string | undefined;
  'insecure-skip-tls-verify'?: boolean | undefined;
  'request-timeout'?: string | undefined;
}

export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
  /** Progress lines go to stderr only when it is a terminal. */
  progress: (text: string) => void;
}

export const processIo: Io = {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
  progress: (t) => {
    if (process.stderr.isTTY) process.stderr.write(`\r\x1b[K${t}`);
  },
};

/** kubectl's --request-timeout: "0" means none, a bare number means seconds, or a duration (1m, 30s). */
export function requestTimeoutMs(v: string | undefined): number {
  if (v === undefined || v === '' || v === '0') return 0;
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  return durationFlag(v, '--request-timeout');
}

/** A duration flag (30s, 5m); a bad one is a usage error (exit 2) like any other bad flag. */
export function durationFlag(v: string, flag: string): number {
  try {
    return parseDuration(v, flag);
  } catch (err) {
    throw usageError((err as Error).message);
  }
}

export class Session {
  private access: ClusterAccess | undefined;
  private rest: RestClient | undefined;
  private nodeDisks: NodeDiskClient | undefined;
  readonly flags: GlobalFlags;
  readonly io: Io;
  constructor(flags: GlobalFlags, io: Io) {
    this.flags = flags;
    this.io = io;
  }

  /** Loaded on first use, so commands that need no cluster (version, completion, gitops --offline) never read a kubeconfig. */
  client(): NodeDiskClient {
    if (!this.nodeDisks) {
      const f = this.flags;
      this.access = loadKubeConfig({
        kubeconfig: f.kubeconfig,
        context: f.context,
        cluster: f.cluster,
        user: f.user,
        server: f.server,
        token: f.token,
        as: f.as,
        asGroups: f['as-group'],
        certificateAuthority: f['certificate-authority'],
        insecureSkipTlsVerify: f['insecure-skip-tls-verify'],
      });
      // One cluster per run: its CA is the process's whole trust store, so Node parses no other (ADR 27).
      trustOnlyTheClusterCA(this.access);
      this.rest = new RestClient(this.access, { timeoutMs: requestTimeoutMs(f['request-timeout']), userAgent: 'kubectl-nodedisks' });
      this.nodeDisks = new NodeDiskClient(this.rest);
    }
    return this.nodeDisks;
  }

  /** NodeDiskClaims, over the same connection as client(). */
  claims(): NodeDiskClaimClient {
    return new NodeDiskClaimClient(this.restClient());
  }

  /** -n/--namespace, or else the kubeconfig context's namespace ("default" when it names none), as kubectl picks it. */
  namespace(flag: string | undefined): string {
    if (flag !== undefined && flag !== '') return flag;
    this.client();
    return this.access?.namespace ?? 'default';
  }

  /** The REST client under client(), for the few reads that are not of NodeDisks (heartbeat Leases). */
  restClient(): RestClient {
    this.client();
    return this.rest!;
  }

  close(): void {
    this.rest?.close();
  }
}
