#!/bin/sh
# Writes every GGUF test file into OUTDIR: the golden files GGUFWriter
# writes (gen_golden.py), the hostile and crafted ones (gen_hostile.py), and
# each golden and crafted file's description from GGUFReader (describe.py).
# Run with the gguf package's Python (tests/pyref/install.sh prints it):
#
#   tests/gguf/generate.sh PYTHON OUTDIR
#
# The committed tests/gguf/ was written by it; regenerate.sh checks that it
# still is.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
py=$1
out=$2
mkdir -p "$out"
"$py" "$here/gen_golden.py" "$out/golden"
"$py" "$here/gen_hostile.py" "$out"
for f in "$out"/crafted/*.gguf; do
  "$py" "$here/describe.py" --dequantize "$f" > "${f%.gguf}.txt"
done
