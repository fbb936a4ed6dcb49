// `npm run cluster:node -- <node> stop|start|restart-kubelet`: "reboots" one node of the running local
// cluster in two steps. stop: its kubelet, containerd and containers end, its volumes' mounts and loop
// devices go (its disk dir stays); start: containerd and the kubelet start again, and the command returns
// once the Node is Ready (kernel settings restored). restart-kubelet, stop-kubelet, start-kubelet: the
// kubelet alone, as systemctl does; containers and mounts stay.
import { runningClusterNode } from './cli.ts';
import { NODE_ACTIONS, sendControl, type NodeAction } from './control.ts';

const [arg, action] = process.argv.slice(2);
const { state, node } = runningClusterNode(arg, NODE_ACTIONS.includes(action as NodeAction), `npm run cluster:node -- <node> ${NODE_ACTIONS.join('|')}`);
try {
  await sendControl(state.dataDir, `${action} ${node}`);
  console.log(`${node}: ${action} done`);
} catch (err) {
  console.error(`error: ${(err as Error).message}`);
  process.exit(1);
}
