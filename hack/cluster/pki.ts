// The cluster's certificates and kubeconfigs: a CA (kept across runs), the API server's serving
// certificate for every address it is reached by, the service-account key pair, and token kubeconfigs.
import { generateKeyPairSync } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { dump } from 'js-yaml';
import { sh } from './host.ts';
import { API_ADDRESS } from './topology.ts';

/** Makes the PKI under `dataDir`/pki (the CA only once); returns the CA certificate's path and the dir. */
export async function makePki(dataDir: string): Promise<{ ca: string; dir: string }> {
  const dir = join(dataDir, 'pki');
  await mkdir(dir, { recursive: true });
  const ca = join(dir, 'ca.crt');
  if (!existsSync(ca)) {
    await sh('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'ca.key'), '-out', ca, '-days', '3650', '-subj', '/CN=nodedisks-local-cluster-ca']);
  }
  const ext = join(dir, 'apiserver.ext');
  await writeFile(
    ext,
    `subjectAltName=IP:127.0.0.1,IP:${API_ADDRESS},IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n` +
      'extendedKeyUsage=serverAuth\n',
  );
  await sh('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'apiserver.key'), '-out', join(dir, 'apiserver.csr'), '-subj', '/CN=kube-apiserver']);
  await sh('openssl', [
    'x509',
    '-req',
    '-in',
    join(dir, 'apiserver.csr'),
    '-CA',
    ca,
    '-CAkey',
    join(dir, 'ca.key'),
    '-CAcreateserial',
    '-out',
    join(dir, 'apiserver.crt'),
    '-days',
    '3650',
    '-extfile',
    ext,
  ]);
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  await writeFile(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  await writeFile(join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
  return { ca, dir };
}

export async function writeKubeconfig(file: string, server: string, ca: string, user: string, token: string): Promise<string> {
  const cfg = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'nodedisks-local', cluster: { server, 'certificate-authority': ca } }],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: 'nodedisks-local', context: { cluster: 'nodedisks-local', user } }],
    'current-context': 'nodedisks-local',
  };
  await writeFile(file, dump(cfg), { mode: 0o600 });
  return file;
}
