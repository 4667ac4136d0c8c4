#!/usr/bin/env bash
# Every config the documentation shows (each ```ini block of README.md and
# docs/*.md) loads with the installed tstor as a reader would use it: the
# installed backends' folder, the guide's toy backend, a remote config
# against two servers on this machine. Each must give `tstor info` exit 0 and
# the backends it names, loaded or, where optional and absent here (cuda),
# reported as failed. Run by out-of-tree.sh once the prefix is installed.
#
#   tests/doc-configs.sh PREFIX TOY_SO
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
prefix=$1
toy=$2
tstor="$prefix/bin/tstor"
work=$(mktemp -d "${TMPDIR:-/tmp}/tstor-docini.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "doc-configs: $*"; exit 1; }

# Two servers for the remote client config, on free ports.
head -c 32 /dev/urandom > "$work/remote.secret"
chmod 600 "$work/remote.secret"
ports=()
for i in 1 2; do
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$tstor" serve --listen "127.0.0.1:$port" --secret-file "$work/remote.secret" > "$work/serve$i.out" 2>&1 &
  pids+=($!)
  ports+=("$port")
done
for i in 1 2; do
  for _ in $(seq 100); do
    grep -q "listening on" "$work/serve$i.out" && break
    sleep 0.1
  done
  grep -q "listening on" "$work/serve$i.out" || fail "tstor serve $i did not start: $(cat "$work/serve$i.out")"
done

n=0
for doc in "$src/README.md" "$src"/docs/*.md; do
  awk -v out="$work/block" '
    /^```ini$/ { inside = 1; n++; file = out "." n ".ini"; next }
    inside && /^```$/ { inside = 0; close(file); next }
    inside { print > file }' "$doc"
  for block in "$work"/block.*.ini; do
    [ -e "$block" ] || continue
    n=$((n + 1))
    name="$(basename "$doc") block ${block#"$work/block."}"
    # What only the reader's machine has, replaced by this one's.
    sed -e "s|/usr/local/lib/tstor|$prefix/lib/tstor|g" \
        -e "s|/home/me/toy/tstor-toy.so|$toy|g" \
        -e "s|/home/me/remote.secret|$work/remote.secret|g" \
        -e "s|127\.0\.0\.1:13337|127.0.0.1:${ports[0]}|g" \
        -e "s|node7:13337|127.0.0.1:${ports[1]}|g" "$block" > "$work/config.ini"
    rm "$block"
    out=$(TSTOR_CONFIG="$work/config.ini" "$tstor" info 2>&1) ||
      fail "$name: tstor info failed:"$'\n'"$out"$'\n'"with:"$'\n'"$(cat "$work/config.ini")"
    for section in $(sed -n 's/^\[backend \([^]]*\)\].*/\1/p' "$work/config.ini"); do
      echo "$out" | grep -Eq "^ *$section +(loaded|failed|declined)" ||
        fail "$name: [backend $section] is not reported:"$'\n'"$out"
      if ! grep -A3 "^\[backend $section\]" "$work/config.ini" | grep -q '^optional *= *yes'; then
        echo "$out" | grep -Eq "^ *$section +loaded" ||
          fail "$name: [backend $section] is not loaded:"$'\n'"$out"
      fi
    done
    if grep -q '^\[backend remote\]' "$work/config.ini"; then
      # Each peer lists the devices of the config it was started with: the
      # installed one may hold more than cpu, so the indices are not fixed.
      for port in "${ports[@]}"; do
        echo "$out" | grep -Eq "remote:[0-9]+ -> 127\.0\.0\.1:$port cpu:0" ||
          fail "$name: the devices of the peer on port $port are not listed:"$'\n'"$out"
      done
    fi
    echo "doc-configs: $name loads"
  done
done
[ "$n" -ge 4 ] || fail "found $n ini blocks in the docs, expected at least 4"
echo "doc-configs: all $n configs in the docs load"
