// Loading a kubeconfig the way kubectl does, with errors that name the file and the fix.
import { existsSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';

export interface KubeConfigOptions {
  /** --kubeconfig; otherwise KUBECONFIG (several files, merged), then in-cluster, then ~/.kube/config. */
  kubeconfig?: string | undefined;
  context?: string | undefined;
}

export class KubeConfigError extends Error {
  override name = 'KubeConfigError';
}

export function loadKubeConfig(o: KubeConfigOptions = {}): KubeConfig {
  const kc = new KubeConfig();
  try {
    if (o.kubeconfig) {
      if (!existsSync(o.kubeconfig)) throw new KubeConfigError(`kubeconfig ${o.kubeconfig} does not exist; check --kubeconfig`);
      kc.loadFromFile(o.kubeconfig);
    } else if (!process.env.KUBECONFIG && process.env.KUBERNETES_SERVICE_HOST) {
      kc.loadFromCluster();
    } else {
      kc.loadFromDefault();
    }
  } catch (err) {
    if (err instanceof KubeConfigError) throw err;
    const where = o.kubeconfig ?? process.env.KUBECONFIG ?? '~/.kube/config';
    throw new KubeConfigError(`cannot load kubeconfig ${where}: ${(err as Error).message.split('\n')[0]}; fix the file or point --kubeconfig at a valid one`);
  }
  if (o.context) {
    if (!kc.getContextObject(o.context)) {
      throw new KubeConfigError(`context ${JSON.stringify(o.context)} not found in the kubeconfig; contexts: ${kc.getContexts().map((c) => c.name).join(', ') || 'none'}`);
    }
    kc.setCurrentContext(o.context);
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster) {
    throw new KubeConfigError('the kubeconfig has no current context with a cluster; set current-context or pass --context');
  }
  if (!/^https?:\/\//.test(cluster.server)) {
    throw new KubeConfigError(`cluster ${cluster.name} has an invalid server ${JSON.stringify(cluster.server)}; it must be an https:// URL`);
  }
  return kc;
}
