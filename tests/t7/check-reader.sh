#!/bin/sh
# The Torch7 reader and writer on the generated corpus: gen_t7.py writes every
# construct in every mode, and its hostile set; test_torch7 must read each
# file as its manifest says, refuse what it lists as refused, and refuse every
# hostile file; the files it writes back are then read by check_gen.py's
# reference reader, which must list them as the manifest does.
PY=${TSTOR_PYTHON:-/usr/bin/python3}
dir=${srcdir:-.}/t7
command -v "$PY" > /dev/null 2>&1 || { echo "SKIP: no $PY"; exit 77; }
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
"$PY" "$dir/gen_t7.py" "$out/corpus" > /dev/null || exit 1
"$PY" "$dir/gen_t7.py" --hostile "$out/hostile" > /dev/null || exit 1
TSTOR_T7_DIR=$out/corpus ./test_torch7 || exit 1
"$PY" "$dir/read_back.py" "$out/corpus/resaved"
