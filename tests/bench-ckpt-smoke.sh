#!/bin/sh
# bench/ckpt_vs_torch.py --fresh --warm-only, on a 16 MiB checkpoint of four
# tensors, once: dd, every side of the fresh-memory bound and the default
# load run end to end in both formats and print their rows. Only that: the
# figures are the machine's (docs/benchmarks.md) and never checked, and the
# cold rounds (which drop the page cache) are left to `make bench-ckpt`.
# Skipped (77) until `make bench` has built bench/ckpt_bench, and without
# PyTorch in /usr/bin/python3 (the script writes the file with torch.save).
set -eu
top=${top_builddir:-..}
if [ ! -x "$top/bench/ckpt_bench" ]; then
  echo "SKIP: bench/ckpt_bench is built by 'make bench', not yet run here"
  exit 77
fi
if ! /usr/bin/python3 -c 'import torch' > /dev/null 2>&1; then
  echo "SKIP: no PyTorch in /usr/bin/python3 to write the checkpoint with"
  exit 77
fi
out=$(mktemp "${TMPDIR:-/tmp}/tstor-bench-ckpt.XXXXXX") || exit 99
trap 'rm -f "$out"' EXIT
fail() {
  echo "FAIL: $*"
  cat "$out"
  exit 1
}
/usr/bin/python3 "${srcdir:-.}/../bench/ckpt_vs_torch.py" "$(cd "$top" && pwd)" --fresh --warm-only \
  --mib 16 --tensors 4 --reps 1 > "$out" 2>&1 || fail "exit status $?"
for fmt in .pt .safetensors; do
  for row in 'dd of the file' 'bound: malloc + pread' 'bound: mmap MAP_POPULATE + pread' \
    'bound: mmap MADV_HUGEPAGE + pread' 'bound: MADV_HUGEPAGE+POPULATE_WRITE + pread' \
    'tstor load + touch'; do
    grep -q "^warm  $fmt *$row.* median " "$out" || fail "no row '$row' for $fmt"
  done
done
grep -q "x the best bound" "$out" || fail "no ratio to the bound"
cat "$out"
