#!/bin/sh
# Writes the GGUF test files again with the gguf package (generate.sh) and
# checks that they are the committed ones, descriptions included: a gguf
# package that writes, reads or dequantizes otherwise than the one they came
# from shows here. Skipped (77) where the Python references are not
# installed (tests/pyref/install.sh).
set -eu
dir=${srcdir:-.}/gguf
py=${TSTOR_PYREF_PYTHON:-}
if [ -z "$py" ] || ! "$py" -c 'import gguf' 2> /dev/null; then
  echo "gguf: no gguf package (tests/pyref/install.sh): the GGUF files are not regenerated"
  exit 77
fi
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
sh "$dir/generate.sh" "$py" "$out"
status=0
for sub in golden crafted hostile; do
  a=$(cd "$out/$sub" && ls | sort | tr '\n' ' ')
  b=$(cd "$dir/$sub" && ls | sort | tr '\n' ' ')
  [ "$a" = "$b" ] || { echo "gguf/$sub/: the generators now write other files"; status=1; continue; }
  for f in "$out/$sub"/*; do
    cmp -s "$f" "$dir/$sub/${f##*/}" || { echo "gguf/$sub/${f##*/} differs"; status=1; }
  done
done
cmp -s "$out/hostile.txt" "$dir/hostile.txt" || { echo "gguf/hostile.txt differs"; status=1; }
[ $status = 0 ] && echo "gguf: the committed files are what the gguf package writes and reads"
exit $status
