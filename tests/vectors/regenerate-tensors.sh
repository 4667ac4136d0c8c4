#!/bin/sh
# Regenerates the tensor vectors with PyTorch and checks that they are
# the ones committed. Skipped (77) where /usr/bin/python3 has no torch, or a
# torch other than the one the committed vectors came from (their results may
# rightly differ: a newer PyTorch is checked by regenerating and reviewing).
PY=${TSTOR_PYTHON:-/usr/bin/python3}
dir=${srcdir:-.}/vectors
want=$(sed -n '1s/.*PyTorch \([^;]*\);.*/\1/p' "$dir/tensor_views.txt")
have=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null) || {
  echo "no torch for $PY: vectors not regenerated"
  exit 77
}
if [ "$have" != "$want" ]; then
  echo "torch $have, vectors from $want: not compared"
  exit 77
fi
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
"$PY" "$dir/gen_tensors.py" "$out" || exit 1
status=0
for f in tensor_views.txt tensor_copies.txt tensor_print.txt; do
  if ! cmp "$out/$f" "$dir/$f"; then
    echo "$f: PyTorch $have now gives other results than the committed $f"
    status=1
  fi
done
exit $status
