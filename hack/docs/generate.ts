// The generated docs (`npm run generate`; `--check` in `npm test`): docs/reference/plugin.md,
// docs/reference/api.md, docs/pictures/architecture.svg and docs/pictures/bench-*.svg (ADR 37).
import { writeOrCheck } from '../lib/generated-files.ts';
import { apiReferenceFiles } from './api-reference.ts';
import { architectureFiles } from './architecture.ts';
import { plotFiles } from './plots.ts';
import { pluginReferenceFiles } from './plugin-reference.ts';

export async function generatedDocs() {
  return [...pluginReferenceFiles(), ...apiReferenceFiles(), ...(await architectureFiles()), ...(await plotFiles())];
}

if (import.meta.main) {
  writeOrCheck(await generatedDocs(), 'plugin/, api/, docs/pictures/architecture.dot and bench/results/');
}
