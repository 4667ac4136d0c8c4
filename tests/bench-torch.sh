#!/bin/sh
# tstor bench --torch, once at an eighth of its sizes: every row is there,
# with a figure for each side, and each bandwidth-bound row names the side of
# its ceiling and tstor's fraction of it, with the figure that fraction is
# of (tstor's best beside the ceiling's sides). A conversion that changes the
# element size is compared with loops that read and write its own bytes
# (loop, streaming) or PyTorch's conversion, never with memcpy. The figures
# themselves are the machine's (docs/benchmarks.md); they are not checked.
# Skipped (77) without libtorch and in sanitizer builds, whose runtime does
# not load into a process that also loads libtorch's uninstrumented code.
set -eu
tstor=${top_builddir:-..}/tools/tstor
if [ "${TSTOR_BENCH_TORCH:-}" != yes ]; then
  echo "SKIP: tstor bench --torch is not built here (no libtorch, or a sanitizer build)"
  exit 77
fi
if [ ! -f "${top_builddir:-..}/tools/.libs/bench-torch.so" ]; then
  echo "SKIP: tstor bench --torch's module is built by 'make bench', not yet run here"
  exit 77
fi
out=$(mktemp "${TMPDIR:-/tmp}/tstor-bench-torch.XXXXXX") || exit 99
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }

"$tstor" bench --torch --quick --rounds 1 --dir "${TMPDIR:-/tmp}" > "$out" 2>&1 || fail "exit status $?"

rows='copy 256 MiB (bytes)
fill 256 MiB (bytes)
fill 256 MiB (float32)
alloc+fill+free 64 MiB
create+release 1 MiB
float32 -> float64
float64 -> float32
float32 -> float16
float16 -> float32
float32 -> bfloat16
bfloat16 -> float32
float32 -> int32
int32 -> float32
contiguous() of transposed 8192x8192 float32
copy_ of transposed 8192x8192 float32
contiguous() of NCHW 64x256x56x56 float32 to NHWC
copy_ of NCHW 64x256x56x56 float32 to NHWC
map 256 MiB file + release
map 256 MiB file + sum'
echo "$rows" | while IFS= read -r label; do
  n=$(grep -cF "| $label |" "$out" || true)
  [ "$n" = 1 ] || fail "row '$label' appears $n times"
done
[ "$(grep -c '^| [^-o]' "$out")" = 19 ] || fail "not 19 rows"

# The columns: | label | tstor | PyTorch | libc name | ratio | median | libc |
# ratio | median | ceiling (side) | fraction |
awk -F' [|] ' '
  /^\| / && $1 != "| operation" && $1 !~ /^\|-/ {
    label = substr($1, 3)
    if ($2 !~ /^[0-9.]+ (GB\/s|ms|us|ns)$/ || $3 !~ /^[0-9.]+ (GB\/s|ms|us|ns)$/) bad = bad "\n" label ": sides " $2 ", " $3
    if ($5 !~ /^[0-9.]+x$/ || $5 == "0.00x") bad = bad "\n" label ": ratio " $5
    bandwidth = $2 ~ /GB\/s/ && label !~ /^map /
    ceiling = $10
    fraction = $11
    sub(/ \|$/, "", fraction)
    if (bandwidth && (ceiling !~ /^[0-9.]+ GB\/s \((libc|loop|streaming|PyTorch)\)$/ || fraction !~ /^[0-9.]+ \([0-9.]+ GB\/s\)$/ || fraction + 0 <= 0))
      bad = bad "\n" label ": ceiling " ceiling ", fraction " fraction
    if (!bandwidth && ceiling != "-") bad = bad "\n" label ": a ceiling where none belongs"
    if (label ~ /^(float32 -> float64|float64 -> float32|float32 -> float16|float16 -> float32|float32 -> bfloat16|bfloat16 -> float32)$/ && ceiling ~ /\(libc\)/)
      bad = bad "\n" label ": a memcpy ceiling for a conversion that changes the element size"
  }
  END { if (bad != "") { print "bad rows:" bad; exit 1 } }' "$out" || fail "see above"

grep -q "^Stores for 128 MiB and up, each kind's last operation (policy auto): copy " "$out" || fail "no line of store choices"
echo "PASS: 19 rows, each with its sides, ratios and ceiling"
