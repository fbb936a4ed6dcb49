// What the GitOps health tests share: a kind's fixtures laid out as Argo CD's resource_customizations
// tests are (health.lua, health_test.yaml, testdata/), the Flux Kustomization's healthCheckExprs, and the
// engines' answers for them (hack/healthcheck, built on first use).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { load } from 'js-yaml';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import type { HealthRequest, HealthResult } from '../../hack/healthcheck/healthcheck.ts';

export type Exprs = HealthRequest['flux']['healthCheckExprs'][number];
export interface HealthCase {
  healthStatus: { status: string; message: string };
  inputPath: string;
}

/** Argo CD's verdict and the Flux status reader's answer for the same object. */
export const FLUX_FOR: Record<string, string> = { Healthy: 'Current', Progressing: 'InProgress', Degraded: 'Failed' };

/** The Flux Kustomization example, whose healthCheckExprs hold every kind's check. */
export const fluxKustomization = () =>
  load(readFileSync(join(REPO_ROOT, 'kustomize/gitops/flux/nodedisks.yaml'), 'utf8')) as { spec: { healthCheckExprs: Exprs[]; wait: boolean; deletionPolicy: string } };

/** The fixtures of `kind` under kustomize/gitops/argocd/resource_customizations/localtest.example.com/. */
export function healthFixtures(kind: string) {
  const dir = join(REPO_ROOT, 'kustomize/gitops/argocd/resource_customizations/localtest.example.com', kind);
  const cases = (load(readFileSync(join(dir, 'health_test.yaml'), 'utf8')) as { tests: HealthCase[] }).tests;
  return {
    dir,
    healthLua: readFileSync(join(dir, 'health.lua'), 'utf8'),
    cases,
    objects: cases.map((c) => ({ name: c.inputPath, yaml: readFileSync(join(dir, c.inputPath), 'utf8') })),
  };
}

/** A lookup of the engines' answers by fixture name. */
export function byName(results: HealthResult[]): (name: string) => HealthResult {
  return (name) => {
    const r = results.find((x) => x.name === name);
    if (!r) throw new Error(`no result for ${name}`);
    return r;
  };
}
