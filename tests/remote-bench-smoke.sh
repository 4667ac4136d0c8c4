#!/bin/sh
# bench/remote-bench.sh --smoke: the remote benchmark runs end to end, over
# TCP, a Unix socket and shared memory, its sweep, the staged device and the
# batch beside the loop, at two sizes and a few iterations. Only that it runs
# and prints its rows: its figures are the machine's (docs/benchmarks.md) and
# never checked. Skipped (77) until `make bench` has built bench/remote_bw.
set -eu
top=${top_builddir:-..}
if [ ! -x "$top/bench/remote_bw" ]; then
  echo "SKIP: bench/remote_bw is built by 'make bench', not yet run here"
  exit 77
fi
out=$(mktemp "${TMPDIR:-/tmp}/tstor-remote-bench.XXXXXX") || exit 99
trap 'rm -f "$out"' EXIT
fail() {
  echo "FAIL: $*"
  cat "$out"
  exit 1
}
sh "${srcdir:-.}/../bench/remote-bench.sh" "$(cd "$top" && pwd)" --smoke > "$out" 2>&1 ||
  fail "exit status $?"
for row in '| tcp | put | 64 KiB | 16 |' '| unix | get | 8 B | 1 |' '| shm | get | 64 KiB | 16 |' \
  '| shm staged | put | 1 MiB | 1 |' '| tcp | put (loop) | 4 KiB | 100 |'; do
  grep -qF "$row" "$out" || fail "no row $row"
done
cat "$out"
