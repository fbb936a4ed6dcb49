// A process that talks to one cluster only (the kubectl plugin) trusts only the CA its kubeconfig names.
//
// Why not just the request's `ca` option: Node builds a context's certificate store from its bundled root
// certificates and NODE_EXTRA_CA_CERTS before it adds the given CA, so every command parsed a hundred or
// more certificates it could never use (docs/adr/0027, docs/benchmarks.md). Made the process's default
// store instead (tls.setDefaultCACertificates), the one CA is the whole store and nothing else is parsed.
// The verification is OpenSSL's either way, so a server whose certificate that CA did not sign is refused
// with the same error as before.
//
// Process-wide on purpose, and so only for a process with one cluster: a library client (the controller's,
// the agent's, the tests' many) keeps the per-request option. Left as it is: no CA named (the system's
// roots, as kubectl), insecure-skip-tls-verify, a CA that is not PEM, and an https proxy, whose own
// certificate is verified against the default store.
import type { ClusterAccess } from './kubeconfig.ts';

const PEM = /-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+-----END CERTIFICATE-----/g;

/** Makes the kubeconfig's CA this process's only trusted CA where that is safe; returns whether it did. */
export function trustOnlyTheClusterCA(access: ClusterAccess): boolean {
  const { ca, rejectUnauthorized } = access.tls;
  if (!ca || !rejectUnauthorized || access.proxy?.url.protocol === 'https:') return false;
  const pems = ca.toString('latin1').match(PEM);
  if (!pems) return false;
  try {
    process.getBuiltinModule('node:tls').setDefaultCACertificates(pems);
  } catch {
    return false; // a certificate OpenSSL cannot read: the request's own option reports it, as before
  }
  delete access.tls.ca;
  return true;
}
