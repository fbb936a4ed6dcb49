// The Prometheus Operator's CRDs (monitoring.coreos.com) for the tests that check our ServiceMonitor,
// PodMonitor and PrometheusRule against the real schemas: the files of example/prometheus-operator-crd in
// the module pinned by go.mod and go.sum beside this file, fetched once into the Go module cache (`go mod
// download`, verified against go.sum). Nothing is built.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { goModuleDir } from '../lib/gomod.ts';

const moduleDir = fileURLToPath(new URL('.', import.meta.url));
const MODULE = 'github.com/prometheus-operator/prometheus-operator';

/** The pinned version, from go.mod. */
export async function prometheusOperatorVersion(): Promise<string> {
  const v = new RegExp(`${MODULE.replace(/\./g, '\\.')} (v\\S+)`).exec(await readFile(join(moduleDir, 'go.mod'), 'utf8'))?.[1];
  if (!v) throw new Error(`${join(moduleDir, 'go.mod')} does not require ${MODULE}`);
  return v;
}

/** Paths of the CRD files of these kinds (plural names: servicemonitors, podmonitors, prometheusrules). */
export async function prometheusOperatorCRDs(plurals: string[]): Promise<string[]> {
  const dir = await goModuleDir(MODULE, { pinnedBy: moduleDir });
  return plurals.map((p) => join(dir, 'example', 'prometheus-operator-crd', `monitoring.coreos.com_${p}.yaml`));
}
