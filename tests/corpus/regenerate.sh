#!/bin/sh
# Makes corpus/listing.txt again from the references (gen_listing.py, with
# the pyref environment's torch 2.x, safetensors and torchfile, and
# /usr/bin/python3's torch 1.13) and checks that it is the one committed,
# which test_corpus holds tstor to. Skipped (77) without the environment, or
# with other versions of the references than the listing names.
dir=${srcdir:-.}/corpus
PY=${TSTOR_PYREF_PYTHON:-$(sh "${srcdir:-.}/pyref/install.sh" --find)} || {
  echo "no pyref environment (tests/pyref/install.sh): the corpus listing not regenerated"
  exit 77
}
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
"$PY" "$dir/gen_listing.py" "$out/listing.txt" 2> "$out/log" || { cat "$out/log"; exit 1; }
want=$(head -1 "$dir/listing.txt")
have=$(head -1 "$out/listing.txt")
if [ "$have" != "$want" ]; then
  echo "references here: ${have#*: }"
  echo "listing made by: ${want#*: }; not compared"
  exit 77
fi
diff "$dir/listing.txt" "$out/listing.txt" > "$out/diff" || {
  head -40 "$out/diff"
  echo "the references now read the corpus otherwise: see the diff above"
  exit 1
}
echo "corpus: the references read $(grep -c '^file ' "$dir/listing.txt") files as listing.txt says"
