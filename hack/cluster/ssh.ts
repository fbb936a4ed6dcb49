// `npm run cluster:ssh -- <node> <command…>`: runs a command on a node of the local cluster, inside its
// mount and network namespaces (what `minikube ssh -n <node> -- <command>` does for minikube).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runningClusterNode } from './cli.ts';
import { holderPid, nodeSpec } from './topology.ts';

const ENTER = fileURLToPath(new URL('./enter.sh', import.meta.url));
const [arg, ...command] = process.argv.slice(2);
const { state, index, node } = runningClusterNode(arg, command.length > 0, 'npm run cluster:ssh -- <node> <command…>');
const spec = nodeSpec(state.dataDir, node, index);
const pid = existsSync(`${spec.dir}/holder.pid`) ? holderPid(spec) : 0;
if (!pid || !existsSync(`/proc/${pid}`)) {
  console.error(`error: node ${node} is not running (no holder process); restart the cluster`);
  process.exit(1);
}
const r = spawnSync(ENTER, ['-', `pid:${pid}`, ...command], { stdio: 'inherit' });
process.exit(r.status ?? 1);
