// Runs GitOps health checks in the engines Argo CD and Flux use (see main.go beside this file): the Go
// program is built once from the pinned go.mod/go.sum into the cache, like the test control plane.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ensureGoTool } from '../lib/gobuild.ts';

const moduleDir = fileURLToPath(new URL('.', import.meta.url));

export interface Verdict {
  status: string;
  message?: string;
  /** Why the engine could not judge the object (Argo CD: a script error; Flux: an expression error). */
  error?: string;
}

export interface HealthRequest {
  argocd: { healthLua: string; useOpenLibs?: boolean };
  flux: { healthCheckExprs: { apiVersion: string; kind?: string; current: string; inProgress?: string; failed?: string }[] };
  /** Kubernetes objects as YAML, judged as the controllers would see them from the API server. */
  objects: { name: string; yaml: string }[];
}

export interface HealthResult {
  name: string;
  argocd: Verdict;
  flux: Verdict;
  /** kstatus's generic verdict (no custom check): what kstatus-based tools read from status.conditions. */
  kstatus: Verdict;
}

/** The path of the health-check runner, built first if the cache does not have it. */
export function ensureHealthcheck(log?: (line: string) => void): Promise<string> {
  return ensureGoTool({ name: 'healthcheck', what: 'the GitOps health-check runner (gopher-lua as Argo CD runs it, Flux CEL evaluator)', moduleDir, ...(log ? { log } : {}) });
}

export async function evaluateHealth(bin: string, req: HealthRequest): Promise<HealthResult[]> {
  const stdout = await new Promise<string>((resolve, reject) => {
    const child = execFile(bin, [], { maxBuffer: 16 * 1024 * 1024, timeout: 60_000 }, (err, out, stderr) => {
      if (err) reject(new Error(`${bin} failed: ${stderr.trim() || err.message}`));
      else resolve(out);
    });
    child.stdin?.end(JSON.stringify(req));
  });
  return (JSON.parse(stdout) as { results: HealthResult[] }).results;
}
