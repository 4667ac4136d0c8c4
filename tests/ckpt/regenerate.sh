#!/bin/sh
# Regenerates the golden and hostile checkpoints with PyTorch and checks that
# they are the ones committed: golden/ and hostile/ with /usr/bin/python3's
# torch 1.13, golden_torch2/ and hostile_torch2/ with the pyref environment's
# torch 2.x ($TSTOR_PYREF_PYTHON), which also lists what it reads from
# golden/ (golden_as_torch2.txt). Skipped (77) where neither has the torch
# the committed files came from.
PY=${TSTOR_PYTHON:-/usr/bin/python3}
dir=${srcdir:-.}/ckpt
# compare 'LISTS' 'FOLDERS': what was regenerated in $out against the committed files
compare() {
  for f in $1; do
    cmp "$out/$f" "$dir/$f" || { echo "$f: PyTorch now gives other results"; status=1; }
  done
  for sub in $2; do
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
}
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
status=0
ran=0
want=$(sed -n '1s/.*PyTorch \([^;]*\);.*/\1/p' "$dir/golden.txt")
have=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null) || have=
if [ "$have" = "$want" ]; then
  "$PY" "$dir/gen_golden.py" "$out" > "$out/log" 2>&1 || { cat "$out/log"; exit 1; }
  compare "golden.txt hostile.txt" "golden hostile"
  ran=1
else
  echo "torch '${have:-none}' for $PY, checkpoints from $want: golden/ not compared"
fi
PY2=${TSTOR_PYREF_PYTHON:-}
want=$(sed -n '1s/.*PyTorch \([^;]*\);.*/\1/p' "$dir/golden_torch2.txt")
have=$([ -n "$PY2" ] && "$PY2" -c 'import torch; print(torch.__version__)' 2>/dev/null) || have=
if [ "$have" = "$want" ]; then
  "$PY2" "$dir/gen_golden_torch2.py" "$out" > "$out/log2" 2>&1 || { cat "$out/log2"; exit 1; }
  compare "golden_torch2.txt hostile_torch2.txt quantized_values.txt" "golden_torch2 hostile_torch2"
  # and 1.13's committed files as 2.x reads them
  "$PY2" -W ignore "$dir/list_as_torch2.py" "$dir/golden.txt" "$dir/golden" > "$out/golden_as_torch2.txt" || exit 1
  compare golden_as_torch2.txt ""
  ran=1
else
  echo "torch '${have:-none}' (TSTOR_PYREF_PYTHON), checkpoints from $want: golden_torch2/ not compared"
fi
[ $ran = 1 ] || exit 77
exit $status
