#!/usr/bin/env bash
# `npm run setup`: what the tests need besides npm packages, once per machine:
# - lua5.1 (Debian package) to run the Argo CD health check as Argo CD's gopher-lua would;
# - the test control plane (etcd, kube-apiserver, kubectl) and krew, built from the Go module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v lua5.1 >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing lua5.1 (Debian package) …" >&2
    apt-get install -y -qq lua5.1 >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq lua5.1 >/dev/null; }
  else
    echo "error: lua5.1 is needed for the Argo CD health check tests; install it (apt-get install lua5.1) and run npm run setup again" >&2
    exit 1
  fi
fi
echo "lua: $(lua5.1 -v 2>&1)" >&2
node test/controlplane/ensure.ts
