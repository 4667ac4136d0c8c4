#!/bin/sh
# Makes the safetensors golden files again with the safetensors package and
# torch of the reference environment (ckpt/gen_st_golden.py) and checks that
# they, and their listing, are the ones committed (test_safetensors holds
# tstor to them without Python). Skipped (77) without the environment, or
# with other versions than the listing names.
dir=${srcdir:-.}/ckpt
PY=${TSTOR_PYREF_PYTHON:-$(sh "${srcdir:-.}/pyref/install.sh" --find)} || {
  echo "no pyref environment (tests/pyref/install.sh): the safetensors golden files not regenerated"
  exit 77
}
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
"$PY" "$dir/gen_st_golden.py" "$out" > "$out/log" 2>&1 || { cat "$out/log"; exit 1; }
want=$(head -1 "$dir/st_golden.txt")
have=$(head -1 "$out/st_golden.txt")
if [ "$have" != "$want" ]; then
  echo "references here: $have"
  echo "golden files made by: $want; not compared"
  exit 77
fi
status=0
cmp -s "$out/st_golden.txt" "$dir/st_golden.txt" || { echo "st_golden.txt: the package now reads otherwise"; status=1; }
a=$(cd "$out/st_golden" && ls | sort | tr '\n' ' ')
b=$(cd "$dir/st_golden" && ls | sort | tr '\n' ' ')
[ "$a" = "$b" ] || { echo "st_golden/: the generator now writes other files"; exit 1; }
for f in "$out/st_golden"/*; do
  cmp -s "$f" "$dir/st_golden/${f##*/}" || { echo "st_golden/${f##*/} differs"; status=1; }
done
[ $status = 0 ] && echo "safetensors golden: $(ls "$dir/st_golden" | wc -l) files as the package writes them"
exit $status
