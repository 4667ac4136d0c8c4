#!/bin/sh
# Regenerates the shape-inference cases with PyTorch and checks that they are
# the ones committed (tests/vectors/shapes.txt). Skipped (77) where
# /usr/bin/python3 has no torch, or a torch other than the one the committed
# cases came from (a newer PyTorch is checked by regenerating and reviewing).
PY=${TSTOR_PYTHON:-/usr/bin/python3}
dir=${srcdir:-.}/vectors
want=$(sed -n '1s/.*from PyTorch \([^;]*\);.*/\1/p' "$dir/shapes.txt")
have=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null) || {
  echo "no torch for $PY: shape cases not regenerated"
  exit 77
}
if [ "$have" != "$want" ]; then
  echo "torch $have, shape cases from $want: not compared"
  exit 77
fi
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
"$PY" "$dir/gen_shapes.py" "$out" || exit 1
if ! diff -u "$dir/shapes.txt" "$out/shapes.txt" | head -40; then :; fi
cmp -s "$out/shapes.txt" "$dir/shapes.txt" || {
  echo "shapes.txt: PyTorch $have now gives other results than the committed cases"
  exit 1
}
exit 0
