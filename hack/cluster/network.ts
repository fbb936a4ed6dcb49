// The cluster's network, in namespaces of its own: a switch namespace with a bridge (the API server's
// address), and per node a namespace whose eth0 is a veth to that bridge. Both ends of every link are
// created in our namespaces (-n): the host's own namespace never sees a link. Each node's pods are on a
// bridge inside the node's namespace (podNetworkConfig), and the switch routes their range to the node.
import { sh } from './host.ts';
import { API_ADDRESS, BRIDGE, type NodeSpec, SWITCH_NS } from './topology.ts';

/** Builds the network; `addNetns` makes (and records, for teardown) one namespace. */
export async function buildNetwork(nodes: NodeSpec[], addNetns: (name: string) => Promise<void>): Promise<void> {
  await addNetns(SWITCH_NS);
  await sh('ip', ['-n', SWITCH_NS, 'link', 'add', BRIDGE, 'type', 'bridge']);
  await sh('ip', ['-n', SWITCH_NS, 'addr', 'add', `${API_ADDRESS}/24`, 'dev', BRIDGE]);
  await sh('ip', ['-n', SWITCH_NS, 'link', 'set', BRIDGE, 'up']);
  for (const n of nodes) {
    await addNetns(n.netns);
    const veth = `ndcv-${n.short}`;
    await sh('ip', ['-n', SWITCH_NS, 'link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', n.netns]);
    await sh('ip', ['-n', SWITCH_NS, 'link', 'set', veth, 'master', BRIDGE, 'up']);
    await sh('ip', ['-n', n.netns, 'addr', 'add', `${n.ip}/24`, 'dev', 'eth0']);
    await sh('ip', ['-n', n.netns, 'link', 'set', 'eth0', 'up']);
    await sh('ip', ['-n', n.netns, 'route', 'add', 'default', 'via', API_ADDRESS]);
    // The node's pods answer through their node (the CNI bridge's gateway there forwards).
    await sh('ip', ['-n', SWITCH_NS, 'route', 'add', n.podCidr, 'via', n.ip]);
  }
}
