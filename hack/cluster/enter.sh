#!/bin/sh
# Runs a command inside the local cluster (hack/cluster): first moves itself into the cgroup CGROUP in
# every cgroup hierarchy where the cluster made it (so teardown finds and ends every process a node
# started, containers included), then enters the namespaces and execs the command:
#   enter.sh CGROUP netns:NAME cmd...   the network namespace /run/netns/NAME (the switch)
#   enter.sh CGROUP pid:PID cmd...      the mount and network namespaces of a node's holder process
#   enter.sh - pid:PID cmd...           the same, without joining a cgroup (cluster:ssh)
set -eu
cg=$1 target=$2
shift 2
if [ "$cg" != - ]; then
  for h in /sys/fs/cgroup/*/; do
    if [ -d "$h$cg" ]; then echo $$ > "$h$cg/cgroup.procs"; fi
  done
fi
case "$target" in
  netns:*) exec nsenter "--net=/run/netns/${target#netns:}" -- "$@" ;;
  pid:*) exec nsenter -t "${target#pid:}" --mount --net -- "$@" ;;
  *) echo "enter.sh: bad target $target" >&2; exit 2 ;;
esac
