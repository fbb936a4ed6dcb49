// `npm run cluster:ssh -- <node> <command…>`: runs a command on a node of the local cluster, inside its
// mount and network namespaces (what `minikube ssh -n <node> -- <command>` does for minikube).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { holderPid, NODE_NAMES, nodeSpec } from './cluster.ts';
import { isAlive, readState } from './state.ts';

const ENTER = fileURLToPath(new URL('./enter.sh', import.meta.url));
const [node, ...command] = process.argv.slice(2);
if (!node || command.length === 0) {
  console.error(`usage: npm run cluster:ssh -- <node> <command…>   (nodes: ${NODE_NAMES.join(', ')})`);
  process.exit(2);
}
const index = NODE_NAMES.indexOf(node);
if (index < 0) {
  console.error(`error: no node ${node} in the local cluster; the nodes are ${NODE_NAMES.join(', ')}`);
  process.exit(2);
}
const state = readState();
if (!state || !isAlive(state)) {
  console.error('error: no local cluster is running; start one with npm run cluster');
  process.exit(1);
}
const spec = nodeSpec(state.dataDir, node, index);
const pid = existsSync(`${spec.dir}/holder.pid`) ? holderPid(spec) : 0;
if (!pid || !existsSync(`/proc/${pid}`)) {
  console.error(`error: node ${node} is not running (no holder process); restart the cluster`);
  process.exit(1);
}
const r = spawnSync(ENTER, ['-', `pid:${pid}`, ...command], { stdio: 'inherit' });
process.exit(r.status ?? 1);
