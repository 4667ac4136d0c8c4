#!/bin/sh
# compare-generated.sh GENERATOR FILE...: runs GENERATOR (a script beside this
# one) with PyTorch into a scratch folder and checks that each FILE comes out
# as committed here. The first FILE's first line names the PyTorch that made
# the committed files ("... PyTorch 1.13.0a0; ..."). Skipped (77) where
# /usr/bin/python3 has no torch, or another torch than that one: its results
# may rightly differ, and a newer PyTorch is checked by regenerating and
# reviewing. The regenerate*.sh tests of make check call this.
PY=${TSTOR_PYTHON:-/usr/bin/python3}
dir=${srcdir:-.}/vectors
gen=$1
shift
want=$(sed -n '1s/.*PyTorch \([^;]*\);.*/\1/p' "$dir/$1")
have=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null) || {
  echo "no torch for $PY: $* not regenerated"
  exit 77
}
if [ "$have" != "$want" ]; then
  echo "torch $have, $* from $want: not compared"
  exit 77
fi
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
"$PY" "$dir/$gen" "$out" || exit 1
status=0
for f in "$@"; do
  if ! cmp -s "$out/$f" "$dir/$f"; then
    case $f in *.txt) diff -u "$dir/$f" "$out/$f" | head -40 ;; esac
    echo "$f: PyTorch $have now gives other results than the committed $f"
    status=1
  fi
done
exit $status
