#!/usr/bin/env bash
# Runs "$@" and stops it when this script's stdin reaches EOF, that is when the process that started
# us exits, however it died (a crash, or a SIGKILL from a test runner). A SIGTERM or SIGINT to this
# script (alone or to the whole process group) is passed on, and escalates to SIGKILL after 10 s, so a
# program that cannot handle signals (a blocked event loop) is still stopped.
exec 3<&0
"$@" </dev/null &
child=$!
# SIGTERM now, SIGKILL if the program is still there 10 s later.
stop_child() {
  kill -TERM "$child" 2>/dev/null || return 0
  for _ in $(seq 100); do
    kill -0 "$child" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$child" 2>/dev/null
}
escalator=
escalate() {
  [ -n "$escalator" ] && return
  ( trap '' TERM INT; stop_child ) &
  escalator=$!
}
# The watcher ignores TERM/INT so a signal to the process group cannot take it down first.
( trap '' TERM INT; read -r _ <&3 || true; stop_child ) &
watcher=$!
trap escalate TERM INT
rc=0
while kill -0 "$child" 2>/dev/null; do
  wait "$child"
  rc=$?
done
kill -KILL "$watcher" ${escalator:+"$escalator"} 2>/dev/null
exit "$rc"
