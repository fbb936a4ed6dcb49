// Renders the CRD from ./v1alpha1/schema.ts into kustomize/crd/bases/ (`npm run generate`).
// `--check` exits non-zero when the committed file differs, naming the fix.

import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { crdYaml, CRD_FILE } from './crd-yaml.ts';

const target = fileURLToPath(new URL(`../${CRD_FILE}`, import.meta.url));
const rendered = crdYaml();
if (process.argv.includes('--check')) {
  let current = '';
  try {
    current = readFileSync(target, 'utf8');
  } catch {
    // missing file: reported below like any other difference
  }
  if (current !== rendered) {
    console.error(`${CRD_FILE} is out of date with api/v1alpha1/schema.ts; run: npm run generate`);
    process.exit(1);
  }
} else {
  writeFileSync(target, rendered);
}
