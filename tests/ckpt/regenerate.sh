#!/bin/sh
# Regenerates the golden and hostile checkpoints with PyTorch and checks that
# they are the ones committed. Skipped (77) where /usr/bin/python3 has no
# torch, or a torch other than the one the committed files came from.
PY=${TSTOR_PYTHON:-/usr/bin/python3}
dir=${srcdir:-.}/ckpt
want=$(sed -n '1s/.*PyTorch \([^;]*\);.*/\1/p' "$dir/golden.txt")
have=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null) || {
  echo "no torch for $PY: checkpoints not regenerated"
  exit 77
}
if [ "$have" != "$want" ]; then
  echo "torch $have, checkpoints from $want: not compared"
  exit 77
fi
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
"$PY" "$dir/gen_golden.py" "$out" > "$out/log" 2>&1 || { cat "$out/log"; exit 1; }
status=0
for f in golden.txt hostile.txt; do
  cmp "$out/$f" "$dir/$f" || { echo "$f: PyTorch $have now gives other results"; status=1; }
done
for sub in golden hostile; do
  a=$(cd "$out/$sub" && ls | sort | tr '\n' ' ')
  b=$(cd "$dir/$sub" && ls | sort | tr '\n' ' ')
  [ "$a" = "$b" ] || { echo "$sub/: the generator now writes other files"; status=1; continue; }
  for f in "$out/$sub"/*; do
    # a legacy file names its storages by their addresses, which differ from
    # run to run: its listing, compared above, is what must not change
    case ${f##*/} in legacy_*) continue ;; esac
    cmp -s "$f" "$dir/$sub/${f##*/}" || { echo "$sub/${f##*/} differs"; status=1; }
  done
done
exit $status
