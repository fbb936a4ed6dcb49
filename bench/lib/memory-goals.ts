// Issue 24's memory goals, as RSS of the container's process: bench/memory-floor.ts (a control plane)
// and bench/cluster.ts (the kubelet cluster's pods) print their figures next to these.
export const GOALS = { agentMiB: 48, controllerMiB: 56 } as const;
