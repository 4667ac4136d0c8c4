#!/bin/sh
# No file-level cycles, and the trees that write their layers down (core/ in
# core/internal.h, core/io/ in io_internal.h, hpu-stub, cuda and remote in
# their main headers) keep them. LAYERING_DIRS lists the trees checked.
# First the checker is shown a cycle and a call up the layers, so that a
# checker that finds nothing cannot pass.
set -eu
top=${srcdir:-.}/..
checker=$top/tests/layering.py
LAYERING_DIRS=${LAYERING_DIRS:-"core core/io backends/cpu backends/meta backends/hpu-stub backends/cuda backends/remote tools"}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }

scratch=$(mktemp -d "${TMPDIR:-/tmp}/layering.XXXXXX") || exit 99
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/cycle" "$scratch/up"
printf 'int b(void);\nint a(void) { return b(); }\n' > "$scratch/cycle/a.c"
printf 'int a(void);\nstatic int c(void) { return 1; }\nint b(void) { return c() ? a() : 0; }\n' > "$scratch/cycle/b.c"
printf '/*\n * layer 1: low.c\n * layer 2: high.c\n */\n' > "$scratch/up/order.h"
printf 'int high(void);\nint low(void) { return high(); }\n' > "$scratch/up/low.c"
printf 'int high(void) { return 2; }\n' > "$scratch/up/high.c"

if out=$(python3 "$checker" "$scratch/cycle" 2>&1); then
  echo "FAIL: the checker accepts a.c <-> b.c:"; echo "$out"; exit 1
fi
echo "$out" | grep -q "cycle between a.c, b.c" || { echo "FAIL: $out"; exit 1; }
if out=$(python3 "$checker" "$scratch/up" 2>&1); then
  echo "FAIL: the checker accepts low.c calling high.c:"; echo "$out"; exit 1
fi
echo "$out" | grep -q "low.c (layer 1) calls up into high.c (layer 2): high" ||
  { echo "FAIL: $out"; exit 1; }

dirs=
for d in $LAYERING_DIRS; do dirs="$dirs $top/$d"; done
# shellcheck disable=SC2086
python3 "$checker" $dirs
