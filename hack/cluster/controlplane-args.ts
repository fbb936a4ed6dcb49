// The command lines of the local cluster's control plane: etcd and kube-apiserver in the switch
// namespace (the API server on the bridge address, token and Node,RBAC authorization as in production),
// kube-controller-manager and kube-scheduler talking to it over loopback.
import { join } from 'node:path';
import { API_ADDRESS, API_PORT } from './topology.ts';

export function etcdArgs(etcd: string, dataDir: string): string[] {
  return [
    etcd,
    '--name=default',
    `--data-dir=${join(dataDir, 'etcd')}`,
    '--listen-client-urls=http://127.0.0.1:2379',
    '--advertise-client-urls=http://127.0.0.1:2379',
    '--listen-peer-urls=http://127.0.0.1:2380',
    '--initial-advertise-peer-urls=http://127.0.0.1:2380',
    '--initial-cluster=default=http://127.0.0.1:2380',
    '--unsafe-no-fsync=true',
    '--log-level=warn',
  ];
}

/** `pki` is the dir of makePki (certificates, tokens.csv, the service-account keys). */
export function apiserverArgs(kubeApiserver: string, pki: string, ca: string): string[] {
  return [
    kubeApiserver,
    '--etcd-servers=http://127.0.0.1:2379',
    '--bind-address=0.0.0.0',
    `--advertise-address=${API_ADDRESS}`,
    `--secure-port=${API_PORT}`,
    `--tls-cert-file=${join(pki, 'apiserver.crt')}`,
    `--tls-private-key-file=${join(pki, 'apiserver.key')}`,
    `--client-ca-file=${ca}`,
    `--token-auth-file=${join(pki, 'tokens.csv')}`,
    '--authorization-mode=Node,RBAC',
    '--enable-admission-plugins=NodeRestriction',
    '--service-account-issuer=https://kubernetes.default.svc',
    `--service-account-key-file=${join(pki, 'sa.pub')}`,
    `--service-account-signing-key-file=${join(pki, 'sa.key')}`,
    '--service-cluster-ip-range=10.0.0.0/24',
    '--allow-privileged=true',
    // The kubelets' hostnames resolve nowhere: reach them by their InternalIP (kubectl logs/exec).
    '--kubelet-preferred-address-types=InternalIP',
  ];
}

export function controllerManagerArgs(kubeControllerManager: string, kubeconfig: string, pki: string, ca: string): string[] {
  return [
    kubeControllerManager,
    `--kubeconfig=${kubeconfig}`,
    `--root-ca-file=${ca}`,
    `--service-account-private-key-file=${join(pki, 'sa.key')}`,
    '--leader-elect=false',
    '--bind-address=127.0.0.1',
  ];
}

export function schedulerArgs(kubeScheduler: string, kubeconfig: string): string[] {
  return [kubeScheduler, `--kubeconfig=${kubeconfig}`, '--leader-elect=false', '--bind-address=127.0.0.1'];
}
