// The agent's projected ServiceAccount token: the lifetime the DaemonSet asks for is the one it gets. The
// API server silently extends a pod-bound token of exactly 3607 s to a year (--service-account-extend-
// token-expiration, on by default, for clients that never re-read their token); any other lifetime is kept.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { load } from 'js-yaml';
import { REPO_ROOT, SYSTEM_NAMESPACE } from '../../hack/controlplane/controlplane.ts';
import { restFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);

interface Projected {
  spec: { template: { spec: { volumes: { name: string; projected?: { sources: { serviceAccountToken?: { expirationSeconds?: number; audience?: string } }[] } }[] } } };
}

async function shippedLifetime(): Promise<number> {
  const ds = load(await readFile(join(REPO_ROOT, 'kustomize/agent/daemonset.yaml'), 'utf8')) as Projected;
  const source = ds.spec.template.spec.volumes.flatMap((v) => v.projected?.sources ?? []).find((s) => s.serviceAccountToken)?.serviceAccountToken;
  if (!source?.expirationSeconds) throw new Error('the DaemonSet projects no serviceAccountToken with an expirationSeconds');
  return source.expirationSeconds;
}

/** The expiry of a token bound to a Pod of the agent's ServiceAccount, as the kubelet would request it. */
async function podBoundTokenExpiry(expirationSeconds: number): Promise<number> {
  const rest = restFor(controlPlane().admin());
  const name = `agent-token-${expirationSeconds}-${Date.now().toString(36)}`;
  const pod = await rest.request<{ metadata: { uid: string } }>('POST', `/api/v1/namespaces/${SYSTEM_NAMESPACE}/pods`, {
    body: {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name },
      spec: { serviceAccountName: 'node-disks-agent', automountServiceAccountToken: false, containers: [{ name: 'agent', image: 'example.invalid/agent' }] },
    },
  });
  const tr = await rest.request<{ status: { token: string; expirationTimestamp: string } }>('POST', `/api/v1/namespaces/${SYSTEM_NAMESPACE}/serviceaccounts/node-disks-agent/token`, {
    body: {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      // No audiences: the API server's own, as a projected token without `audience` gets.
      spec: { expirationSeconds, boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name, uid: pod.metadata.uid } },
    },
  });
  const claims = JSON.parse(Buffer.from(tr.status.token.split('.')[1]!, 'base64url').toString()) as { exp: number; iat: number };
  return claims.exp - claims.iat;
}

test.serial('the shipped DaemonSet asks for a token lifetime the API server does not extend: about an hour, not a year', async (t) => {
  const asked = await shippedLifetime();
  t.true(asked >= 600, 'the kubelet refuses less than 10 minutes');
  const lifetime = await podBoundTokenExpiry(asked);
  t.true(Math.abs(lifetime - asked) <= 5, `asked ${asked} s, the token lasts ${lifetime} s`);
  t.true(lifetime <= 2 * 3600, `the token lasts ${lifetime} s`);
});

test.serial('the API server extends a pod-bound token of exactly 3607 s to a year (why the DaemonSet does not ask for it)', async (t) => {
  const lifetime = await podBoundTokenExpiry(3607);
  t.true(lifetime > 300 * 24 * 3600, `a 3607 s token lasts ${lifetime} s`);
});
