// What `cluster:ssh` and `cluster:node` both check first: a node name of this cluster, and a cluster running.
import { NODE_NAMES } from './topology.ts';
import { isAlive, readState, type ClusterState } from './state.ts';

/** The running cluster's state and the node's index, or a usage/error message and exit (2 usage, 1 not running). */
export function runningClusterNode(node: string | undefined, ok: boolean, usage: string): { state: ClusterState; index: number; node: string } {
  if (!node || !ok) {
    console.error(`usage: ${usage}   (nodes: ${NODE_NAMES.join(', ')})`);
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
  return { state, index, node };
}
