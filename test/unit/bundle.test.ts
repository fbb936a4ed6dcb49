// The shipped plugin takes only its version from package.json, so editing a script or a dev dependency
// does not change the krew archive (and its sha256 in krew-manifest.yaml). Reads what `npm run build` made.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import test from 'ava';
import { REPO_ROOT } from '../../hack/lib/paths.ts';

const pluginDir = join(REPO_ROOT, 'dist', 'plugin');

test('the plugin bundle carries the version of package.json and none of its scripts or dependencies', (t) => {
  if (!existsSync(pluginDir)) return t.fail('dist/plugin is missing: run npm run build first (npm test does)');
  const bundle = readdirSync(pluginDir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.mjs'))
    .map((f) => readFileSync(join(pluginDir, f), 'utf8'))
    .join('\n');
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string; scripts: Record<string, string>; devDependencies: Record<string, string> };
  t.true(bundle.includes(JSON.stringify(pkg.version)), 'the version is there');
  for (const command of Object.values(pkg.scripts)) t.false(bundle.includes(JSON.stringify(command).slice(1, -1)), command);
  t.false(bundle.includes('"devDependencies"'));
});
