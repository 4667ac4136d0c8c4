#!/bin/sh
# The remote backend against ucx_perftest (Debian ucx-utils) on one transport,
# in one run: `make -C bench bench-remote` from a build tree where configure
# found UCX. UCX_TLS and UCX_NET_DEVICES choose the transport (default: tcp on
# lo). Prints tstor's figures, then ucx_perftest's for the same sizes.
set -u
here=$(cd "$(dirname "$0")" && pwd)
builddir=${1:?usage: remote-bench.sh BUILDDIR}
: "${UCX_TLS:=self,tcp}" "${UCX_NET_DEVICES:=lo}"
export UCX_TLS UCX_NET_DEVICES
export TSTOR_BACKEND_DIR="$builddir/modules"
dir=$(mktemp -d "${TMPDIR:-/tmp}/remote-bench.XXXXXX") || exit 1
pid=
trap '[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/secret"
port=$(( 20000 + $$ % 20000 ))
"$builddir/tools/tstor" serve --listen "127.0.0.1:$port" --secret-file "$dir/secret" > "$dir/serve.log" 2>&1 &
pid=$!
i=0
until grep -q 'listening on' "$dir/serve.log" 2>/dev/null; do
  i=$((i + 1)); [ $i -gt 200 ] && { cat "$dir/serve.log"; exit 1; }; sleep 0.05
done
printf '[backend cpu]\nlibrary = tstor-cpu.so\n[backend remote]\nlibrary = tstor-remote.so\npeers = 127.0.0.1:%s\nsecret_file = %s\n' \
  "$port" "$dir/secret" > "$dir/client.ini"
echo "== tstor remote (UCX_TLS=$UCX_TLS)"
"$builddir/bench/remote_bw" "$dir/client.ini" || exit 1
kill -TERM "$pid"; wait "$pid"; pid=

command -v ucx_perftest > /dev/null || { echo "ucx_perftest not found (Debian: ucx-utils)"; exit 0; }
# perftest TEST SIZE ITERS: one server and one client; prints the final line
perftest() {
  p=$(( port + 1 ))
  ucx_perftest -p "$p" > "$dir/pf.log" 2>&1 &
  spid=$!
  sleep 0.5
  echo "== ucx_perftest -t $1 -s $2 -n $3"
  ucx_perftest 127.0.0.1 -p "$p" -t "$1" -s "$2" -n "$3" 2>&1 | grep -E 'Stage|Final'
  wait "$spid"
}
perftest ucp_put_bw 67108864 20
perftest ucp_get 67108864 20
perftest ucp_put_lat 8 20000
perftest ucp_am_lat 8 20000
