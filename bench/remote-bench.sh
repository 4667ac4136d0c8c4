#!/bin/sh
# The remote backend beside ucx_perftest (Debian ucx-utils), in one run:
# `make -C bench bench-remote`. tstor's client and server over TCP on
# loopback and over a Unix socket; ucx_perftest over tcp (UCX_TLS=tcp) and
# over shared memory (UCX_TLS=sm), for the same sizes.
set -u
builddir=${1:?usage: remote-bench.sh BUILDDIR}
export TSTOR_BACKEND_DIR="$builddir/modules"
dir=$(mktemp -d "${TMPDIR:-/tmp}/remote-bench.XXXXXX") || exit 1
pid=
trap '[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/secret"
port=$(( 20000 + $$ % 20000 ))
"$builddir/tools/tstor" serve --listen "127.0.0.1:$port" --listen "unix:$dir/serve.sock" \
  --secret-file "$dir/secret" > "$dir/serve.log" 2>&1 &
pid=$!
i=0
until grep -q 'listening on unix' "$dir/serve.log" 2>/dev/null; do
  i=$((i + 1)); [ $i -gt 200 ] && { cat "$dir/serve.log"; exit 1; }; sleep 0.05
done
for peer in "127.0.0.1:$port" "unix:$dir/serve.sock"; do
  printf '[backend cpu]\nlibrary = tstor-cpu.so\n[backend remote]\nlibrary = tstor-remote.so\npeers = %s\nsecret_file = %s\n' \
    "$peer" "$dir/secret" > "$dir/client.ini"
  echo "== tstor remote, peer $peer"
  "$builddir/bench/remote_bw" "$dir/client.ini" || exit 1
done
kill -TERM "$pid"; wait "$pid"; pid=

command -v ucx_perftest > /dev/null || { echo "ucx_perftest not found (Debian: ucx-utils)"; exit 0; }
# perftest TLS TEST SIZE ITERS: one server and one client; prints the final line
perftest() {
  p=$(( port + 1 ))
  UCX_TLS=$1 ucx_perftest -p "$p" > "$dir/pf.log" 2>&1 &
  spid=$!
  sleep 0.5
  echo "== UCX_TLS=$1 ucx_perftest -t $2 -s $3 -n $4"
  UCX_TLS=$1 ucx_perftest 127.0.0.1 -p "$p" -t "$2" -s "$3" -n "$4" 2>&1 | grep -E 'Final'
  wait "$spid"
}
for tls in tcp sm; do
  perftest $tls ucp_put_bw 67108864 20
  perftest $tls ucp_get 67108864 20
  perftest $tls ucp_put_lat 8 20000
  perftest $tls ucp_am_lat 8 20000
done
