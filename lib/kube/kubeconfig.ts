// Loading kubeconfig files the way kubectl does, small enough to start in milliseconds.
//
// Why not @kubernetes/client-node's KubeConfig: importing it costs more time and memory than a plugin run
// may, because it pulls in every generated API class (ADR 8). What is here is what kubectl's
// loading rules do for the fields people use: KUBECONFIG with several files merged (the first file to set
// a name or current-context wins), --kubeconfig alone when given, ~/.kube/config, in-cluster config; the
// --context/--cluster/--user/--server/--token/--as/--as-group/--certificate-authority/
// --insecure-skip-tls-verify overrides; paths relative to the file that names them; token, tokenFile,
// client certificates, basic auth, and exec credential plugins (client.authentication.k8s.io v1/v1beta1,
// run by ./exec-credential.ts);
// a cluster's proxy-url, else HTTPS_PROXY/HTTP_PROXY/NO_PROXY (./proxy.ts).
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, resolve, sep } from 'node:path';
import { load } from 'js-yaml';
import { KubeConfigError } from './errors.ts';
import { type ExecConfig, execCredentials } from './exec-credential.ts';
import { kubeconfigProxy, proxyFor, ProxyConfigError, type Proxy } from './proxy.ts';

export { KubeConfigError };

interface NamedCluster {
  name: string;
  cluster: {
    server?: string;
    'certificate-authority'?: string;
    'certificate-authority-data'?: string;
    'insecure-skip-tls-verify'?: boolean;
    'tls-server-name'?: string;
    'proxy-url'?: string;
  };
}
interface NamedUser {
  name: string;
  user: {
    token?: string;
    tokenFile?: string;
    'client-certificate'?: string;
    'client-certificate-data'?: string;
    'client-key'?: string;
    'client-key-data'?: string;
    username?: string;
    password?: string;
    exec?: ExecConfig;
    'auth-provider'?: { name?: string };
    as?: string;
    'as-groups'?: string[];
  };
}
interface NamedContext {
  name: string;
  context: { cluster?: string; user?: string; namespace?: string };
}
interface ConfigFile {
  clusters?: NamedCluster[] | null;
  users?: NamedUser[] | null;
  contexts?: NamedContext[] | null;
  'current-context'?: string;
}

/** kubectl's connection flags. */
export interface KubeConfigOptions {
  kubeconfig?: string | undefined;
  context?: string | undefined;
  cluster?: string | undefined;
  user?: string | undefined;
  server?: string | undefined;
  token?: string | undefined;
  as?: string | undefined;
  asGroups?: string[] | undefined;
  certificateAuthority?: string | undefined;
  insecureSkipTlsVerify?: boolean | undefined;
  /** Environment (KUBECONFIG, HOME, KUBERNETES_SERVICE_HOST); process.env by default. */
  env?: NodeJS.ProcessEnv;
}

/** Everything a client needs to reach and authenticate to one API server. */
export interface ClusterAccess {
  server: string;
  contextName: string;
  clusterName: string;
  userName: string;
  /** The namespace of the context (kubectl's default for namespaced requests), or of the in-cluster ServiceAccount; "default" when none is set. */
  namespace?: string;
  /** Where the configuration came from, for messages. */
  source: string;
  tls: { ca?: Buffer; cert?: Buffer; key?: Buffer; rejectUnauthorized: boolean; servername?: string };
  /** The proxy requests go through (proxy-url, else HTTPS_PROXY/HTTP_PROXY unless NO_PROXY), if any. */
  proxy?: Proxy;
  /** Authorization and impersonation headers, fresh for each request (token files rotate, exec tokens expire). */
  headers(): Promise<Record<string, string>>;
}

const IN_CLUSTER_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * A kubeconfig's text as a value. JSON (which kubectl reads as well) is JSON.parse'd, cheaper than the YAML
 * parser that every command would otherwise run; anything else, and JSON that JSON.parse refuses, goes to
 * the YAML parser, whose message names the problem.
 */
function parseConfigText(text: string): unknown {
  if (text.trimStart().startsWith('{')) {
    try {
      return JSON.parse(text);
    } catch {
      // Not JSON after all (a YAML flow mapping, or a mistake): the YAML parser decides and explains.
    }
  }
  return load(text);
}

function readConfigFile(path: string): ConfigFile {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new KubeConfigError(`cannot read kubeconfig ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}; check --kubeconfig or KUBECONFIG`);
  }
  let parsed: unknown;
  try {
    parsed = parseConfigText(text);
  } catch (err) {
    throw new KubeConfigError(`kubeconfig ${path} is not valid YAML: ${(err as Error).message.split('\n')[0]}; fix the file or point --kubeconfig at a valid one`);
  }
  if (parsed === undefined || parsed === null) return {};
  if (typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new KubeConfigError(`kubeconfig ${path} is not a kubeconfig (expected a mapping with clusters, users and contexts)`);
  }
  const cfg = parsed as ConfigFile;
  for (const key of ['clusters', 'users', 'contexts'] as const) {
    const v = cfg[key];
    if (v !== undefined && v !== null && !Array.isArray(v)) throw new KubeConfigError(`kubeconfig ${path}: "${key}" must be a list`);
  }
  // Paths inside a kubeconfig are relative to that file, as in kubectl.
  const base = dirname(resolve(path));
  const abs = (p: string | undefined) => (p && !isAbsolute(p) ? resolve(base, p) : p);
  for (const c of cfg.clusters ?? []) {
    if (c?.cluster?.['certificate-authority']) c.cluster['certificate-authority'] = abs(c.cluster['certificate-authority']);
  }
  for (const u of cfg.users ?? []) {
    if (!u?.user) continue;
    for (const k of ['client-certificate', 'client-key', 'tokenFile'] as const) if (u.user[k]) u.user[k] = abs(u.user[k]);
    // An exec command with a path separator (bin/get-token, ./get-token) is a path relative to the
    // kubeconfig too; a bare name is looked up in PATH when it runs (client-go's GetAuthInfoFileReferences).
    const exec = u.user.exec;
    if (exec && typeof exec.command === 'string' && exec.command.includes(sep)) exec.command = abs(exec.command)!;
  }
  return cfg;
}

function merge(files: { path: string; cfg: ConfigFile }[]): ConfigFile {
  const out: Required<Pick<ConfigFile, 'clusters' | 'users' | 'contexts'>> & ConfigFile = { clusters: [], users: [], contexts: [] };
  for (const { cfg } of files) {
    if (!out['current-context'] && cfg['current-context']) out['current-context'] = cfg['current-context'];
    for (const key of ['clusters', 'users', 'contexts'] as const) {
      const list = out[key] as { name: string }[];
      for (const item of (cfg[key] ?? []) as { name: string }[]) {
        if (item && typeof item.name === 'string' && !list.some((x) => x.name === item.name)) list.push(item);
      }
    }
  }
  return out;
}

function inClusterAccess(env: NodeJS.ProcessEnv): ClusterAccess {
  const host = env.KUBERNETES_SERVICE_HOST ?? '';
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  const tokenPath = `${IN_CLUSTER_DIR}/token`;
  if (!existsSync(tokenPath)) {
    throw new KubeConfigError(`no kubeconfig found and no in-cluster ServiceAccount token at ${tokenPath}; pass --kubeconfig`);
  }
  const server = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const proxy = checkedProxy(() => proxyFor(server, undefined, env));
  return {
    server,
    ...(proxy ? { proxy } : {}),
    contextName: 'in-cluster',
    clusterName: 'in-cluster',
    userName: 'serviceaccount',
    namespace: existsSync(`${IN_CLUSTER_DIR}/namespace`) ? readFileSync(`${IN_CLUSTER_DIR}/namespace`, 'utf8').trim() || 'default' : 'default',
    source: 'in-cluster ServiceAccount',
    tls: { ca: readFileSync(`${IN_CLUSTER_DIR}/ca.crt`), rejectUnauthorized: true },
    // The kubelet rotates the projected token: read it for every request (it is a small local file).
    headers: async () => ({ Authorization: `Bearer ${readFileSync(tokenPath, 'utf8').trim()}` }),
  };
}

/** A proxy setting that cannot be used is a configuration error, like any other in the kubeconfig. */
function checkedProxy(decide: () => Proxy | undefined): Proxy | undefined {
  try {
    return decide();
  } catch (err) {
    if (err instanceof ProxyConfigError) throw new KubeConfigError(err.message);
    throw err;
  }
}

function fileOrData(path: string | undefined, data: string | undefined, what: string): Buffer | undefined {
  if (data) return Buffer.from(data, 'base64');
  if (!path) return undefined;
  try {
    return readFileSync(path);
  } catch (err) {
    throw new KubeConfigError(`cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** Which files kubectl would read, in order. */
function configPaths(o: KubeConfigOptions, env: NodeJS.ProcessEnv): { paths: string[]; explicit: boolean } {
  if (o.kubeconfig) return { paths: [o.kubeconfig], explicit: true };
  if (env.KUBECONFIG) {
    const sep = process.platform === 'win32' ? ';' : ':';
    return { paths: env.KUBECONFIG.split(sep).filter(Boolean), explicit: false };
  }
  return { paths: [resolve(env.HOME ?? homedir(), '.kube', 'config')], explicit: false };
}

export function loadKubeConfig(o: KubeConfigOptions = {}): ClusterAccess {
  const env = o.env ?? process.env;
  const { paths, explicit } = configPaths(o, env);
  if (explicit && !existsSync(paths[0]!)) {
    throw new KubeConfigError(`kubeconfig ${paths[0]} does not exist; check --kubeconfig`);
  }
  const present = paths.filter((p) => existsSync(p));
  if (present.length === 0 && env.KUBERNETES_SERVICE_HOST && !o.server) return inClusterAccess(env);
  const cfg = merge(present.map((path) => ({ path, cfg: readConfigFile(path) })));
  const source = present.join(':') || '(no kubeconfig file)';

  const contextName = o.context ?? cfg['current-context'] ?? '';
  const context = cfg.contexts?.find((c) => c.name === contextName)?.context;
  if (o.context && !context) {
    const names = (cfg.contexts ?? []).map((c) => c.name).join(', ') || 'none';
    throw new KubeConfigError(`context "${o.context}" not found in ${source}; contexts: ${names}`);
  }
  const clusterName = o.cluster ?? context?.cluster ?? '';
  const userName = o.user ?? context?.user ?? '';
  const cluster = cfg.clusters?.find((c) => c.name === clusterName)?.cluster;
  if (!cluster && !o.server) {
    if (present.length === 0) {
      throw new KubeConfigError(`no kubeconfig found (looked at ${paths.join(', ')}); pass --kubeconfig, set KUBECONFIG, or --server`);
    }
    if (!contextName && !o.cluster) throw new KubeConfigError(`${source} has no current-context; pass --context or set one with kubectl config use-context`);
    throw new KubeConfigError(`cluster "${clusterName}" (of context "${contextName}") not found in ${source}`);
  }
  if (o.user && !cfg.users?.some((u) => u.name === o.user)) throw new KubeConfigError(`user "${o.user}" not found in ${source}`);
  const user = cfg.users?.find((u) => u.name === userName)?.user ?? {};

  const server = (o.server ?? cluster?.server ?? '').replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]+/.test(server)) {
    throw new KubeConfigError(`cluster "${clusterName}" has no valid server URL (${JSON.stringify(server)}); it must look like https://host:port`);
  }
  if (user['auth-provider']) {
    throw new KubeConfigError(
      `user "${userName}" uses auth-provider "${user['auth-provider'].name ?? '?'}", which is not supported; use an exec credential plugin (kubectl's replacement for auth providers)`,
    );
  }
  const insecure = o.insecureSkipTlsVerify ?? cluster?.['insecure-skip-tls-verify'] ?? false;
  const ca = o.certificateAuthority
    ? fileOrData(o.certificateAuthority, undefined, 'certificate authority')
    : fileOrData(cluster?.['certificate-authority'], cluster?.['certificate-authority-data'], 'certificate authority');
  const cert = fileOrData(user['client-certificate'], user['client-certificate-data'], 'client certificate');
  const key = fileOrData(user['client-key'], user['client-key-data'], 'client key');
  if (!!cert !== !!key) throw new KubeConfigError(`user "${userName}" has a client certificate without a key, or a key without a certificate`);

  const tls: ClusterAccess['tls'] = { rejectUnauthorized: !insecure };
  if (ca && !insecure) tls.ca = ca;
  if (cert && key) {
    tls.cert = cert;
    tls.key = key;
  }
  if (cluster?.['tls-server-name']) tls.servername = cluster['tls-server-name'];

  const impersonate: Record<string, string> = {};
  const as = o.as ?? user.as;
  const asGroups = o.asGroups ?? user['as-groups'];
  if (asGroups?.length && !as) throw new KubeConfigError('--as-group needs --as (a user to impersonate)');
  if (as) impersonate['Impersonate-User'] = as;
  const groupHeaders = asGroups ?? [];

  const exec = user.exec ? execCredentials(user.exec, server, env) : undefined;
  const token = o.token ?? user.token;
  const headers = async (): Promise<Record<string, string>> => {
    const h: Record<string, string> = { ...impersonate };
    if (token) h.Authorization = `Bearer ${token}`;
    else if (user.tokenFile) h.Authorization = `Bearer ${readFileSync(user.tokenFile, 'utf8').trim()}`;
    else if (exec) {
      const cred = await exec();
      // A client certificate from the plugin is the connection's from now on.
      if (cred.cert && cred.key) {
        tls.cert = cred.cert;
        tls.key = cred.key;
      }
      if (cred.token) h.Authorization = `Bearer ${cred.token}`;
    } else if (user.username !== undefined && user.password !== undefined) {
      h.Authorization = `Basic ${Buffer.from(`${user.username}:${user.password}`).toString('base64')}`;
    }
    // Several groups are several headers; node:http sends an array value as repeated headers.
    if (groupHeaders.length) (h as Record<string, string | string[]>)['Impersonate-Group'] = groupHeaders;
    return h;
  };
  const proxyUrl = cluster?.['proxy-url'];
  const proxy = checkedProxy(() => proxyFor(server, proxyUrl ? kubeconfigProxy(proxyUrl, clusterName) : undefined, env));
  return { server, contextName, clusterName, userName, namespace: context?.namespace || 'default', source, tls, headers, ...(proxy ? { proxy } : {}) };
}

/**
 * The context, cluster and user names of the kubeconfig kubectl would read (--kubeconfig, else
 * KUBECONFIG's files, else ~/.kube/config), for shell completion. Unreadable files give no names.
 */
export function kubeconfigNames(o: Pick<KubeConfigOptions, 'kubeconfig' | 'env'> = {}): { contexts: string[]; clusters: string[]; users: string[] } {
  const env = o.env ?? process.env;
  const files: { path: string; cfg: ConfigFile }[] = [];
  for (const path of configPaths(o, env).paths) {
    try {
      files.push({ path, cfg: readConfigFile(path) });
    } catch {
      // Completion offers what it can read.
    }
  }
  const cfg = merge(files);
  const names = (list: { name: string }[] | null | undefined) => (list ?? []).map((x) => x.name);
  return { contexts: names(cfg.contexts), clusters: names(cfg.clusters), users: names(cfg.users) };
}
