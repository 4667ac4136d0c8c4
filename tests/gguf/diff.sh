#!/bin/sh
# The differential run against the gguf package's GGUFReader: generated
# files with one field broken (gen_diff.py), each read by GGUFReader and
# gguf.quants (describe.py --strict) and by tstor (gguf_describe); both
# refuse it, or both give the same metadata, tensor types, shapes, offsets,
# bytes and dequantized values, and tstor never crashes; and each file as
# GGUFWriter wrote it, before the break, converted GGUF to GGUF by tstor
# convert, is the same file, byte for byte. Where GGUFReader
# reads a file that breaks a rule it does not check (describe.py's "rule:"
# lines), or runs past the time limit, tstor must refuse it; where the two
# references part (a Q8_1 block, a type newer than the package), tstor
# follows ggml and either outcome is counted apart. Run from the build's
# tests folder, a bounded slice by make check, a larger one from the day's
# seed by tests/differential.sh:
#
#   gguf/diff.sh            TSTOR_GGUF_DIFF_SEED (default 1),
#                           TSTOR_GGUF_DIFF_COUNT (default 200),
#                           TSTOR_GGUF_DIFF_KEEP (a folder: each file that
#                           disagrees copied there)
#
# Skipped (77) where the Python references are not installed.
set -eu
dir=${srcdir:-.}/gguf
py=${TSTOR_PYREF_PYTHON:-$(sh "$dir/../pyref/install.sh" --find 2> /dev/null || true)}
if [ -z "$py" ] || ! "$py" -c 'import gguf' 2> /dev/null; then
  echo "gguf diff: no gguf package (tests/pyref/install.sh): skipped"
  exit 77
fi
seed=${TSTOR_GGUF_DIFF_SEED:-1}
count=${TSTOR_GGUF_DIFF_COUNT:-200}
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
echo "gguf diff: seed $seed, $count files"
"$py" "$dir/gen_diff.py" "$out" "$seed" "$count"
same=0 refused=0 rules=0 apart=0 bad=0 resaved=0
for f in "$out"/*.gguf; do
  base=${f%.gguf}
  if ! ../tools/tstor convert "$base.intact" "$base.again.gguf" 2> "$base.c.err" ||
     ! cmp -s "$base.intact" "$base.again.gguf"; then
    bad=$((bad + 1))
    echo "RESAVED: $(basename "$f"): GGUFWriter's file, converted to GGUF, is another file:"
    tail -3 "$base.c.err"
    if [ -n "${TSTOR_GGUF_DIFF_KEEP:-}" ]; then cp "$base.intact" "$TSTOR_GGUF_DIFF_KEEP/"; fi
  else
    resaved=$((resaved + 1))
  fi
  rm -f "$base.again.gguf"
  # a refusal is a line of its output; a nonzero status is a crash
  if ! ./gguf_describe --dequantize "$f" > "$base.c.txt" 2> "$base.c.err"; then
    bad=$((bad + 1))
    echo "CRASH: $(basename "$f") ($(cat "$base.what")): gguf_describe failed:"
    tail -3 "$base.c.err"
    if [ -n "${TSTOR_GGUF_DIFF_KEEP:-}" ]; then cp "$f" "$TSTOR_GGUF_DIFF_KEEP/"; fi
    continue
  fi
  ref=$(head -1 "$base.py.txt")
  got=$(head -1 "$base.c.txt")
  if cmp -s "$base.py.txt" "$base.c.txt"; then
    same=$((same + 1))
    continue
  fi
  case "$ref:$got" in
    "refused rule:q8_1-block:"* | "refused rule:newer-type:"*) apart=$((apart + 1)); continue ;;
    "refused rule:"*":refused "* | "refused timeout:refused "*) rules=$((rules + 1)); continue ;;
    "refused "*":refused "*) refused=$((refused + 1)); continue ;;
  esac
  bad=$((bad + 1))
  echo "DISAGREE: $(basename "$f") ($(cat "$base.what")): GGUFReader and tstor differ:"
  diff "$base.py.txt" "$base.c.txt" | head -10
  head -3 "$base.c.err"
  if [ -n "${TSTOR_GGUF_DIFF_KEEP:-}" ]; then cp "$f" "$TSTOR_GGUF_DIFF_KEEP/"; fi
done
echo "gguf diff: $same read alike, $refused refused by both," \
  "$rules refused by tstor by a rule GGUFReader does not check, $apart where the references part;" \
  "$bad disagreements; $resaved of GGUFWriter's files converted GGUF to GGUF byte for byte"
[ $bad = 0 ]
