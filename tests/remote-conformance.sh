#!/bin/sh
# `tstor conformance --strict` on tstor-remote.so, against two `tstor serve`
# processes started here on free loopback ports (two peers: remote:0 and
# remote:1, so the cross-device checks run), and stopped on every exit.
set -u
tstor=${TSTOR_BIN:-../tools/tstor}
modules=${TSTOR_BACKEND_DIR:?TSTOR_BACKEND_DIR is set by make check}
dir=$(mktemp -d "${TMPDIR:-/tmp}/remote-conformance.XXXXXX") || exit 99
pids=
cleanup() {
  for pid in $pids; do kill -TERM "$pid" 2>/dev/null; done
  for pid in $pids; do wait "$pid" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/secret"

# free_port: one the kernel hands out for an ephemeral bind, then closes
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $(( 20000 + $$ % 20000 + $1 ))
}

# start N: a server; its port in port_N
start() {
  for attempt in 1 2 3; do
    port=$(free_port "$1$attempt")
    "$tstor" serve --listen "127.0.0.1:$port" --secret-file "$dir/secret" >"$dir/serve$1.log" 2>&1 &
    pid=$!
    i=0
    while [ $i -lt 200 ]; do
      if grep -q 'listening on' "$dir/serve$1.log" 2>/dev/null; then
        pids="$pids $pid"
        eval "port_$1=$port"
        return 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
      i=$((i + 1))
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  echo "FAIL: tstor serve did not start:"
  cat "$dir/serve$1.log"
  exit 1
}

start 1
start 2
"$tstor" conformance "$modules/tstor-remote.so" --strict \
  --set "peers=127.0.0.1:$port_1, 127.0.0.1:$port_2" --set "secret_file=$dir/secret" \
  --set timeout_ms=10000 --no-hardware peers=
status=$?
if [ $status -ne 0 ]; then
  echo "FAIL: conformance --strict on tstor-remote.so: exit status $status"
  for n in 1 2; do echo "--- serve$n.log"; tail -50 "$dir/serve$n.log"; done
fi
# a wrong secret is said as such, not as the code's "permission denied"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/wrong"
printf '[backend cpu]\nlibrary = tstor-cpu.so\n[backend remote]\nlibrary = tstor-remote.so\npeers = 127.0.0.1:%s\nsecret_file = %s\n' \
  "$port_1" "$dir/wrong" >"$dir/wrong.ini"
TSTOR_CONFIG="$dir/wrong.ini" "$tstor" info >"$dir/wrong.out" 2>&1 && { echo "FAIL: a wrong secret was let in"; status=1; }
if grep -qi 'permission denied' "$dir/wrong.out" || ! grep -q 'authentication failed: wrong secret' "$dir/wrong.out"; then
  echo "FAIL: the wrong secret's message:"; cat "$dir/wrong.out"; status=1
fi
# a clean stop: SIGTERM, exit status 0, every block freed
for pid in $pids; do kill -TERM "$pid"; done
for pid in $pids; do
  wait "$pid"
  rc=$?
  if [ $rc -ne 0 ]; then echo "FAIL: tstor serve exited with status $rc"; status=1; fi
done
pids=
for n in 1 2; do
  grep -q 'stopped' "$dir/serve$n.log" || { echo "FAIL: serve$n did not log its stop"; status=1; }
done
exit $status
