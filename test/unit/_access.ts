// A ClusterAccess for unit tests against nock: a fixed server and bearer token, no files.
import type { ClusterAccess } from '../../lib/kube/kubeconfig.ts';

export function tokenAccess(server: string, token: string): ClusterAccess {
  return {
    server,
    contextName: 'test',
    clusterName: 'test',
    userName: 'test',
    source: 'unit test',
    tls: { rejectUnauthorized: true },
    headers: async () => ({ Authorization: `Bearer ${token}` }),
  };
}
