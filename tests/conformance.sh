#!/bin/sh
# `tstor conformance` on every in-tree backend (cuda when it was built), the
# guide's minimal backend and the older-ABI plugin: all must pass. Then on plugins/conf_broken.so,
# whose bugs the suite must find, with a crash and a hang reported as rows.
set -u
tstor=${TSTOR_BIN:-../tools/tstor}
modules=${TSTOR_BACKEND_DIR:?TSTOR_BACKEND_DIR is set by make check}
plugins=${TSTOR_TEST_PLUGINS:?TSTOR_TEST_PLUGINS is set by make check}
out=$(mktemp "${TMPDIR:-/tmp}/conformance.XXXXXX") || exit 99
trap 'rm -f "$out"' EXIT
status=0

# must_pass LABEL ARGS...
must_pass() {
  label=$1
  shift
  "$tstor" conformance "$@" >"$out" 2>&1
  rc=$?
  cat "$out"
  if [ $rc -eq 0 ]; then
    echo "ok: $label"
  else
    echo "FAIL: $label: exit status $rc"
    status=1
  fi
  echo
}

# must_find LABEL PATTERN ARGS...: exit status 1 and a table row matching PATTERN
must_find() {
  label=$1
  pattern=$2
  shift 2
  "$tstor" conformance "$@" >"$out" 2>&1
  rc=$?
  cat "$out"
  if [ $rc -eq 1 ] && grep -Eq "$pattern" "$out"; then
    echo "ok: $label"
  else
    echo "FAIL: $label: exit status $rc (expected 1), or no row matching: $pattern"
    status=1
  fi
  echo
}

# must_be_quick SECONDS must_pass|must_find LABEL ...: that, and over in SECONDS
must_be_quick() {
  limit=$1
  shift
  start=$(date +%s)
  "$@"
  took=$(( $(date +%s) - start ))
  if [ "$took" -gt "$limit" ]; then
    echo "FAIL: $2: took $took s, more than $limit"
    status=1
  fi
}

must_pass "cpu" "$modules/tstor-cpu.so"
must_pass "meta" "$modules/tstor-meta.so"
must_pass "hpu-stub" "$modules/tstor-hpu-stub.so" --no-hardware devices=0
must_pass "hpu-stub, one device, slow copies" "$modules/tstor-hpu-stub.so" \
  --section load,copy,async,threads --set devices=1 --set copy_delay_us=200
# Where a GPU is present every section runs; elsewhere the module declines.
if [ -f "$modules/tstor-cuda.so" ]; then
  must_pass "cuda" "$modules/tstor-cuda.so"
fi
must_pass "guide example" "$plugins/guide_minimal.so" --name toy --no-hardware devices=0 --align 64
must_pass "older ABI tables" "$plugins/abi_evolution.so" --name older
# --strict: what a release should pass. The template and the faultless lax
# module do; each of lax's switches is then a fault it must find.
must_pass "hpu-stub, strict" "$modules/tstor-hpu-stub.so" --no-hardware devices=0 --strict
lax=$plugins/conf_lax.so
must_pass "lax, strict" "$lax" --name lax --no-hardware devices=0 --strict
must_pass "free_count not kept: fine without --strict" "$lax" --name lax --section stats \
  --set count_frees=no
must_find "strict: free_count not kept" 'stats +counts +lax:0 +FAIL +free_count did not move' \
  "$lax" --name lax --section stats --set count_frees=no --strict
must_find "strict: a skip fails" 'stats +peak and reset +lax:0 +FAIL +skipped, and --strict' \
  "$lax" --name lax --section stats --set keep_peak=no --strict
must_find "freed memory never reusable" 'alloc +freed memory reused +lax:0 +FAIL +round [0-9]+: allocating 64 MiB again' \
  "$lax" --name lax --section alloc --set leak_blocks=yes --set memory_mb=256
must_find "strict: no message of its own" \
  "alloc +impossible sizes +lax:0 +FAIL .*the core's stand-in" \
  "$lax" --name lax --section alloc --set silent=yes --strict
must_find "a decline without a reason" 'decline +declines without hardware .*FAIL +declined without saying why' \
  "$lax" --name lax --section decline --no-hardware devices=0 --set silent=yes
must_find "a batched kernel that drops a span" \
  'copy +batched copies +lax:0 +FAIL +after a batch of 48 copies, byte [0-9]+ \(slot 4[0-9]\)' \
  "$lax" --name lax --section copy --set batch_drops_last=yes
must_find "state left after fini" 'fini +nothing left after fini .*FAIL +[0-9]+ file descriptors left open' \
  "$lax" --name lax --section fini --set leak_at_fini=yes
# The parent keeps the time: a module that ignores signals, or forks a
# process that holds the result pipe, costs --timeout and no more.
must_be_quick 10 must_find "a hang ignoring signals" \
  'fill +fill bytes +lax:0 +FAIL +timed out after 2 s' \
  "$lax" --name lax --section fill --set hang=yes --set ignore_signals=yes --timeout 2
must_be_quick 10 must_find "a hang with a helper holding the pipe" \
  'fill +fill bytes +lax:0 +FAIL +timed out after 2 s' \
  "$lax" --name lax --section fill --set hang=yes --set fork_helper=yes --timeout 2
must_be_quick 10 must_pass "a helper holding the pipe" \
  "$lax" --name lax --section fill --set fork_helper=yes

must_find "finds misaligned addresses" 'alloc +alignment +broken:0 +FAIL' "$plugins/conf_broken.so"
must_find "finds short copies" 'copy +host round trips +broken:0 +FAIL .*byte [0-9]+ after them' \
  "$plugins/conf_broken.so" --section copy
must_find "finds leaked statistics" 'stats +allocated back to start +broken:0 +FAIL' \
  "$plugins/conf_broken.so" --section stats
must_find "reports a crash" 'fill +fill bytes +broken:0 +FAIL +crashed: signal 6' \
  "$plugins/conf_broken.so" --section fill,args --set crash=yes
must_find "reports a hang" 'fill +fill bytes +broken:0 +FAIL +timed out after 2 s' \
  "$plugins/conf_broken.so" --section fill --set hang=yes --timeout 2
must_find "a crash costs one section" 'args +bad device index +broken:0 +pass' \
  "$plugins/conf_broken.so" --section fill,args --set crash=yes

exit $status
