// `npm run cluster:images` (what `make images-load` runs when the local cluster is up): builds dist/,
// then has the running `npm run cluster` build the images from it again and import them into every
// node under the same names. Exit 3 when no local cluster runs, so make can fall back to minikube.
import { execFileSync } from 'node:child_process';
import { DEFAULT_SYSTEM_NAMESPACE } from '../../api/constants.ts';
import { REPO_ROOT } from '../lib/paths.ts';
import { sendControl } from './control.ts';
import { isAlive, readState } from './state.ts';

const NOT_RUNNING = 3;

const state = readState();
if (!state || !isAlive(state)) {
  console.error('no local cluster is running (npm run cluster starts one)');
  process.exit(NOT_RUNNING);
}
try {
  execFileSync(process.execPath, ['hack/build.ts'], { cwd: REPO_ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  const reply = await sendControl(state.dataDir, 'images');
  for (const image of reply.replace(/^ok\s*/, '').split(', ')) console.log(`loaded ${image}`);
  console.log(`running pods keep their old image until restarted: kubectl -n ${DEFAULT_SYSTEM_NAMESPACE} rollout restart deployment/node-disks-operator daemonset/node-disks-agent`);
} catch (err) {
  console.error(`error: ${(err as Error).message}`);
  process.exit(1);
}
