// Renders the CRDs from ./v1alpha1/schema.ts and ./v1alpha1/claim-schema.ts into kustomize/crd/bases/
// (`npm run generate`). `--check` exits non-zero when a committed file differs, naming the fix.

import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { generatedCrds } from './crd-yaml.ts';

const stale: string[] = [];
for (const { file, yaml } of generatedCrds()) {
  const target = fileURLToPath(new URL(`../${file}`, import.meta.url));
  if (process.argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(target, 'utf8');
    } catch {
      // missing file: reported below like any other difference
    }
    if (current !== yaml) stale.push(file);
  } else {
    writeFileSync(target, yaml);
  }
}
if (stale.length > 0) {
  console.error(`${stale.join(', ')} out of date with api/v1alpha1/; run: npm run generate`);
  process.exit(1);
}
