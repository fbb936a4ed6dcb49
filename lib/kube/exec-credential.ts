// Exec credential plugins (client.authentication.k8s.io v1/v1beta1), as client-go's exec authenticator
// runs them: the command found as Go finds it (a path as given, a bare name in PATH only), its environment
// (ours, KUBERNETES_EXEC_INFO, the kubeconfig's env), a timeout, the ExecCredential it prints parsed, and
// the credential kept until shortly before it expires. The kubeconfig loader (./kubeconfig.ts) decides
// when a user has one; this runs it.
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import { KubeConfigError } from './errors.ts';

/** A kubeconfig user's `exec`: the credential plugin to run. */
export interface ExecConfig {
  apiVersion?: string;
  command: string;
  args?: string[];
  env?: { name: string; value: string }[] | null;
  installHint?: string;
  provideClusterInfo?: boolean;
}

/** What a plugin's ExecCredential gave: a token, or a client certificate and key; and until when. */
export interface ExecResult {
  token?: string;
  cert?: Buffer;
  key?: Buffer;
  expires?: number;
}

/**
 * The executable a bare exec command names, found in PATH as Go's exec.LookPath finds it (client-go runs
 * it with exec.Command): the first match wins, and a match in a relative PATH entry (`.`, or an empty
 * entry) is refused rather than run from the current directory, as Go refuses it (exec.ErrDot). The
 * system's own search (execvp) would run it. Undefined when there is none.
 */
export function lookPath(name: string, env: NodeJS.ProcessEnv, platform: NodeJS.Platform = process.platform): string | undefined {
  const exts = platform === 'win32' ? ['', ...(env.PATHEXT ?? '.COM;.EXE;.BAT;.CMD').split(';').filter(Boolean)] : [''];
  for (const entry of (env.PATH ?? '').split(delimiter)) {
    for (const ext of exts) {
      const candidate = join(entry === '' ? '.' : entry, name + ext);
      try {
        if (!statSync(candidate).isFile()) continue;
        if (platform !== 'win32') accessSync(candidate, constants.X_OK);
      } catch {
        continue;
      }
      if (!isAbsolute(entry)) {
        throw new KubeConfigError(
          `exec credential plugin ${name}: cannot run executable found relative to current directory (${candidate}, through PATH entry ${JSON.stringify(entry)}); give exec.command as an absolute path or a path relative to the kubeconfig, or remove relative entries from PATH`,
        );
      }
      return candidate;
    }
  }
  return undefined;
}

export function runExec(exec: ExecConfig, server: string, env: NodeJS.ProcessEnv): Promise<ExecResult> {
  // A path (made absolute against its kubeconfig when it was read) runs as it is; a bare name only from PATH.
  const command = isAbsolute(exec.command) ? exec.command : lookPath(exec.command, env);
  if (command === undefined) {
    const hint = exec.installHint ? ` ${exec.installHint.trim()}` : '';
    return Promise.reject(new KubeConfigError(`exec credential plugin ${exec.command} failed: executable file not found in $PATH${hint}`));
  }
  const apiVersion = exec.apiVersion ?? 'client.authentication.k8s.io/v1';
  const info = { apiVersion, kind: 'ExecCredential', spec: { interactive: false, ...(exec.provideClusterInfo ? { cluster: { server } } : {}) } };
  const childEnv: NodeJS.ProcessEnv = { ...env, KUBERNETES_EXEC_INFO: JSON.stringify(info) };
  for (const e of exec.env ?? []) childEnv[e.name] = e.value;
  return new Promise((resolvePromise, reject) => {
    // node:child_process is taken only here, when an exec credential plugin runs: loading it (with
    // node:net and node:dgram) costs CPU on every plugin start (ADR 27), and most users have no exec.
    process.getBuiltinModule('node:child_process').execFile(command, exec.args ?? [], { env: childEnv, timeout: 60_000, maxBuffer: 4 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) {
        const hint = (err as NodeJS.ErrnoException).code === 'ENOENT' && exec.installHint ? ` ${exec.installHint.trim()}` : '';
        reject(new KubeConfigError(`exec credential plugin ${exec.command} failed: ${stderr.trim() || err.message}${hint}`));
        return;
      }
      try {
        const cred = JSON.parse(stdout) as { status?: { token?: string; clientCertificateData?: string; clientKeyData?: string; expirationTimestamp?: string } };
        const s = cred.status ?? {};
        if (!s.token && !(s.clientCertificateData && s.clientKeyData)) throw new Error('its status has neither a token nor a client certificate and key');
        resolvePromise({
          ...(s.token ? { token: s.token } : {}),
          ...(s.clientCertificateData ? { cert: Buffer.from(s.clientCertificateData) } : {}),
          ...(s.clientKeyData ? { key: Buffer.from(s.clientKeyData) } : {}),
          ...(s.expirationTimestamp ? { expires: Date.parse(s.expirationTimestamp) } : {}),
        });
      } catch (e) {
        reject(new KubeConfigError(`exec credential plugin ${exec.command} returned an unusable ExecCredential: ${(e as Error).message}`));
      }
    });
  });
}

/** A credential this close to its expiry is fetched again before it is used. */
const REFRESH_BEFORE_MS = 10_000;

/**
 * The credential of `exec` for `server`, run on first use and again once it is about to expire (a
 * credential without an expiry is kept for the life of the process).
 */
export function execCredentials(exec: ExecConfig, server: string, env: NodeJS.ProcessEnv): () => Promise<ExecResult> {
  let cached: ExecResult | undefined;
  return async () => {
    if (!cached || (cached.expires !== undefined && cached.expires - Date.now() < REFRESH_BEFORE_MS)) cached = await runExec(exec, server, env);
    return cached;
  };
}
