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
