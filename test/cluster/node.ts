// `npm run cluster:node -- <node> stop|start`: "reboots" one node of the running local cluster in two
// steps. stop: its kubelet, containerd and containers end (its disk dir stays); start: containerd and the
// kubelet start again, and the command returns once the Node is Ready (kernel settings restored).
import { NODE_NAMES } from './cluster.ts';
import { NODE_ACTIONS, sendControl, type NodeAction } from './control.ts';
import { isAlive, readState } from './state.ts';

const [node, action] = process.argv.slice(2);
if (!node || !action || !NODE_ACTIONS.includes(action as NodeAction)) {
  console.error(`usage: npm run cluster:node -- <node> stop|start   (nodes: ${NODE_NAMES.join(', ')})`);
  process.exit(2);
}
if (!NODE_NAMES.includes(node)) {
  console.error(`error: no node ${node} in the local cluster; the nodes are ${NODE_NAMES.join(', ')}`);
  process.exit(2);
}
const state = readState();
if (!state || !isAlive(state)) {
  console.error('error: no local cluster is running; start one with npm run cluster');
  process.exit(1);
}
try {
  await sendControl(state.dataDir, action as NodeAction, node);
  console.log(`${node}: ${action === 'stop' ? 'stopped' : 'Ready'}`);
} catch (err) {
  console.error(`error: ${(err as Error).message}`);
  process.exit(1);
}
