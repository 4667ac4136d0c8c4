#!/bin/sh
# The remote backend beside ucx_perftest (Debian's ucx-utils) on the same
# transports, in the style of NIXL's nixlbench: `make -C bench bench-remote`.
#
#   remote-bench.sh BUILDDIR [--smoke]
#
# One `tstor serve` of cpu:0 and a staged hpu-stub device, and bench/remote_bw
# as its client, for block sizes 8 B to 64 MiB and batches of 1 to 1,024
# blocks (at most 256 MiB a batch), put and get, the average and the 99th
# percentile of a batch's time:
#   tcp     TCP on loopback
#   unix    a Unix socket, shared_memory = no
#   shm     a Unix socket with the client's shared region
#   veth    TCP between two network namespaces joined by a veth pair, made
#           here (root with CAP_SYS_ADMIN; skipped with a message where they cannot be
#           made)
# then the staged device at 64 MiB over each, 10,000 blocks of 4 KiB as one
# batch and as a loop of single copies, and ucx_perftest (ucp_put_bw, ucp_get,
# ucp_put_lat) with UCX_TLS=tcp on loopback, UCX_TLS=sm, and UCX_TLS=tcp
# across the namespaces, each size of the sweep; last, one table of
# bandwidths side by side, tstor's batch of one beside ucx_perftest's, from
# 64 KiB up. Everything is printed as markdown.
#
# --smoke: two sizes, two batch sizes, a few iterations, no ucx_perftest and
# no namespaces: for CI, which checks that it runs, never how fast.
set -u
builddir=${1:?usage: remote-bench.sh BUILDDIR [--smoke]}
smoke=${2:-}
bench=$builddir/bench/remote_bw
export TSTOR_BACKEND_DIR="$builddir/modules"
dir=$(mktemp -d "${TMPDIR:-/tmp}/remote-bench.XXXXXX") || exit 1
pids=
ns_made=
cleanup() {
  for p in $pids; do kill -TERM "$p" 2> /dev/null; done
  wait 2> /dev/null
  if [ -n "$ns_made" ]; then
    ip netns del tstor-bench-a 2> /dev/null
    ip netns del tstor-bench-b 2> /dev/null
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/secret"
printf '[backend cpu]\nlibrary = tstor-cpu.so\n[backend hpu]\nlibrary = tstor-hpu-stub.so\ndevices = 1\nmemory_mb = 640\n' \
  > "$dir/server.ini"
port=$((20000 + $$ % 20000))

if [ "$smoke" = --smoke ]; then
  sizes=8,64K batches=1,16 seconds=0.001 maxmb=16
else
  sizes=8,64,512,4K,32K,64K,256K,1M,4M,16M,64M batches=1,4,16,64,256,1024 seconds=0.2 maxmb=256
fi

# serve NAME ADDR... [-- PREFIX]: starts a server listening on the addresses
# (run under PREFIX, e.g. `ip netns exec NS`), waits until it listens.
serve() {
  name=$1
  shift
  args=
  prefix=
  while [ $# -gt 0 ]; do
    if [ "$1" = -- ]; then
      shift
      prefix=$*
      break
    fi
    args="$args --listen $1"
    shift
  done
  # shellcheck disable=SC2086
  $prefix "$builddir/tools/tstor" serve $args --secret-file "$dir/secret" \
    --config "$dir/server.ini" --max-client-mb 4096 > "$dir/$name.log" 2>&1 &
  pids="$pids $!"
  i=0
  until grep -q 'listening on' "$dir/$name.log" 2> /dev/null; do
    i=$((i + 1))
    [ $i -gt 400 ] && { cat "$dir/$name.log"; exit 1; }
    sleep 0.05
  done
}

# client NAME PEER [yes|no]: a client config for one peer.
client() {
  printf '[backend cpu]\nlibrary = tstor-cpu.so\n[backend remote]\nlibrary = tstor-remote.so\npeers = %s\nsecret_file = %s\ntimeout_ms = 60000\nshared_memory = %s\n' \
    "$2" "$dir/secret" "${3:-yes}" > "$dir/$1.ini"
}

# sweep LABEL CONFIG [PREFIX]: the sizes and batches, put and get.
sweep() {
  echo
  echo "### $1"
  echo
  echo "| transport | op | block | batch | avg us | p99 us | GB/s |"
  echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
  # shellcheck disable=SC2086
  ${3:-} "$bench" "$2" --sizes "$sizes" --batches "$batches" --seconds "$seconds" \
    --max-mb "$maxmb" --label "$1" | tee -a "$dir/rows" || exit 1
}

# extras LABEL CONFIG [PREFIX]: the staged device at 64 MiB (1 MiB when
# smoking), and 10,000 x 4 KiB as one batch and as a loop.
extras() {
  big=64M n=10000
  [ "$smoke" = --smoke ] && big=1M n=100
  # shellcheck disable=SC2086
  ${3:-} "$bench" "$2" --device remote:1 --sizes $big --batches 1 --seconds "$seconds" \
    --label "$1 staged" || exit 1
  # shellcheck disable=SC2086
  ${3:-} "$bench" "$2" --sizes 4K --batches $n --seconds "$seconds" --max-mb 64 \
    --label "$1" || exit 1
  # shellcheck disable=SC2086
  ${3:-} "$bench" "$2" --sizes 4K --batches $n --seconds "$seconds" --max-mb 64 --loop \
    --label "$1" || exit 1
}

echo "## tstor remote_bw ($(date -u +%Y-%m-%d), $(nproc) CPUs)"
serve loopback "127.0.0.1:$port" "unix:$dir/serve.sock"
client tcp "127.0.0.1:$port"
client unix "unix:$dir/serve.sock" no
client shm "unix:$dir/serve.sock" yes
for t in tcp unix shm; do sweep "$t" "$dir/$t.ini"; done
echo
echo "### staged device, and 10,000 x 4 KiB batched and looped"
echo
echo "| transport | op | block | batch | avg us | p99 us | GB/s |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
for t in tcp unix shm; do extras "$t" "$dir/$t.ini"; done

# Two namespaces joined by a veth pair: the server in a, the client in b.
veth=
if [ "$smoke" != --smoke ]; then
  if ip netns add tstor-bench-a 2> /dev/null; then
    ns_made=yes
    if ip netns add tstor-bench-b && ip link add tstor-bva type veth peer name tstor-bvb &&
      ip link set tstor-bva netns tstor-bench-a && ip link set tstor-bvb netns tstor-bench-b &&
      ip -n tstor-bench-a addr add 10.231.7.1/24 dev tstor-bva &&
      ip -n tstor-bench-b addr add 10.231.7.2/24 dev tstor-bvb &&
      ip -n tstor-bench-a link set tstor-bva up && ip -n tstor-bench-b link set tstor-bvb up &&
      ip -n tstor-bench-a link set lo up && ip -n tstor-bench-b link set lo up; then
      veth=yes
    else
      echo
      echo "veth: the pair could not be made; skipped"
    fi
  else
    echo
    echo "veth: network namespaces cannot be made here (they need root with CAP_SYS_ADMIN); skipped"
  fi
fi
if [ -n "$veth" ]; then
  serve veth "10.231.7.1:$port" -- ip netns exec tstor-bench-a
  client veth "10.231.7.1:$port"
  sweep veth "$dir/veth.ini" "ip netns exec tstor-bench-b"
  extras veth "$dir/veth.ini" "ip netns exec tstor-bench-b"
fi

[ "$smoke" = --smoke ] && exit 0
command -v ucx_perftest > /dev/null || {
  echo "ucx_perftest not found (Debian: ucx-utils): no side-by-side table"
  exit 0
}

# perftest LABEL TLS TEST SIZE SERVER-PREFIX CLIENT-PREFIX HOST: one
# ucx_perftest pair; appends "LABEL TEST SIZE MB/s usec" to $dir/ucx.
perftest() {
  p=$((port + 1))
  iters=$((1 << 28))
  iters=$((iters / ($4 + 4096)))
  [ $iters -gt 200000 ] && iters=200000
  # over tcp a small get is a millisecond's round trip through UCX's progress
  [ "$2" = tcp ] && [ $iters -gt 2000 ] && iters=2000
  [ $iters -lt 20 ] && iters=20
  # shellcheck disable=SC2086
  UCX_TLS=$2 $5 ucx_perftest -p "$p" > "$dir/pf-server.log" 2>&1 &
  spid=$!
  sleep 0.3
  # shellcheck disable=SC2086
  line=$(UCX_TLS=$2 $6 ucx_perftest "$7" -p "$p" -t "$3" -s "$4" -n $iters -w $((iters / 10 + 1)) 2>&1 |
    awk '/^Final:/ { print $6, $4 }')
  wait "$spid"
  [ -n "$line" ] && echo "$1 $3 $4 $line" >> "$dir/ucx"
}

sizes_bytes="8 64 512 4096 32768 65536 262144 1048576 4194304 16777216 67108864"
: > "$dir/ucx"
for s in $sizes_bytes; do
  for test in ucp_put_bw ucp_get; do
    perftest tcp tcp $test "$s" "" "" 127.0.0.1
    perftest shm sm $test "$s" "" "" 127.0.0.1
    [ -n "$veth" ] &&
      perftest veth tcp $test "$s" "ip netns exec tstor-bench-a" "ip netns exec tstor-bench-b" 10.231.7.1
  done
done
for tls in tcp:tcp shm:sm; do
  perftest "${tls%%:*}" "${tls#*:}" ucp_put_lat 8 "" "" 127.0.0.1
  perftest "${tls%%:*}" "${tls#*:}" ucp_am_lat 8 "" "" 127.0.0.1
done
[ -n "$veth" ] && perftest veth tcp ucp_put_lat 8 "ip netns exec tstor-bench-a" \
  "ip netns exec tstor-bench-b" 10.231.7.1

echo
echo "### ucx_perftest (MB/s in GB/s, 10^9 bytes; latency one way)"
echo
echo "| transport | test | bytes | GB/s | avg us |"
echo "| --- | --- | ---: | ---: | ---: |"
awk '{ printf "| %s | %s | %s | %.2f | %.3f |\n", $1, $2, $3, $4 * 1048576 / 1e9, $5 }' "$dir/ucx"

# Side by side from 64 KiB up: ucx_perftest's bandwidth tests keep many
# operations in flight, as a batch does, so each block size's best batch is
# set beside them (and the batch of one, a synchronous copy, for reference).
echo
echo "### side by side, 64 KiB and up: tstor's best batch / ucx_perftest"
echo
echo "| transport | block | op | ucx GB/s | tstor batch 1 GB/s | tstor best GB/s (batch) | best / ucx |"
echo "| --- | ---: | --- | ---: | ---: | ---: | ---: |"
awk -F'|' 'NR == FNR {
    split($0, a, " ")
    ucx[a[1] " " (a[2] == "ucp_get" ? "get" : "put") " " a[3]] = a[4] * 1048576 / 1e9
    next
  }
  {
    t = $2; op = $3; block = $4; batch = $5; gbs = $8 + 0
    gsub(/ /, "", t); gsub(/ /, "", op); gsub(/ /, "", batch)
    gsub(/^ +| +$/, "", block)
    if (op != "put" && op != "get") next
    split(block, b, " ")
    bytes = b[1] * (b[2] == "KiB" ? 1024 : b[2] == "MiB" ? 1048576 : 1)
    if (bytes < 65536) next
    key = t " " op " " bytes
    if (!(key in best)) { order[n++] = key; label[key] = block }
    if (batch == 1) one[key] = gbs
    if (gbs > best[key]) { best[key] = gbs; at[key] = batch }
  }
  END {
    for (i = 0; i < n; i++) {
      k = order[i]
      if (!(k in ucx)) continue
      split(k, p, " ")
      printf "| %s | %s | %s | %.2f | %.2f | %.2f (%s) | %.2f |\n", p[1], label[k], p[2], ucx[k],
        one[k], best[k], at[k], ucx[k] ? best[k] / ucx[k] : 0
    }
  }' "$dir/ucx" "$dir/rows"
