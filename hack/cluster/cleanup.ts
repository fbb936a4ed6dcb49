// `npm run cluster:cleanup`: stops a local cluster left running (SIGINT to `npm run cluster`, which tears
// down as on Ctrl-C) or, when its process is gone, undoes what its record lists, then says whether
// anything is left. CI runs it after the e2e tests, whatever their outcome.
import { leftovers, isAlive, readState, undo } from './state.ts';
import { sleep } from './host.ts';

const state = readState();
if (!state) {
  console.log('no local cluster to clean up');
  process.exit(0);
}
if (isAlive(state)) {
  console.log(`stopping the local cluster (pid ${state.pid}) …`);
  process.kill(state.pid, 'SIGINT');
  for (const deadline = Date.now() + 120_000; isAlive(state) && Date.now() < deadline; ) await sleep(500);
  if (isAlive(state)) {
    console.error(`error: the local cluster (pid ${state.pid}) did not stop within 120 s`);
    process.exit(1);
  }
}
const after = readState();
const problems = after ? await undo(after, (line) => console.log(line)) : [];
const left = await leftovers(state.sysctls, state.dataDir);
for (const p of [...problems, ...left]) console.error(`error: ${p}`);
if (problems.length || left.length) process.exit(1);
console.log('no local cluster left: no namespace, cgroup, mount, loop device or changed kernel setting.');
