#!/usr/bin/env bash
# Runs "$@" and stops it when this script's stdin reaches EOF, that is when the process that
# started us exits, however it died (a crash or a SIGKILL from a test runner included).
# SIGTERM to this script is passed on, so a normal stop is a normal stop.
exec 3<&0
"$@" </dev/null &
child=$!
{
  read -r _ <&3 || true
  kill -TERM "$child" 2>/dev/null || exit 0
  sleep 10
  kill -KILL "$child" 2>/dev/null
} &
watcher=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
rc=0
while kill -0 "$child" 2>/dev/null; do
  wait "$child"
  rc=$?
done
kill "$watcher" 2>/dev/null
exit "$rc"
