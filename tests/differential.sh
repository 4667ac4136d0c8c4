#!/bin/sh
# The differential runs against PyTorch and the gguf package, bounded, on
# inputs that change with the day: GGUF files against the gguf package's
# GGUFReader (gguf/diff.sh), checkpoints against torch.load (ckpt/diff.sh)
# and chains of views against torch 2.x's (vectors/gen_chains.py), each from a
# seed no committed vector uses, so every run of the suite tries inputs the
# last did not.
#
#   tests/differential.sh BUILD [SEED]
#
# BUILD is a configured build tree whose check programs are built (make
# check); SEED defaults to today's date, and is printed, so a failure can be
# replayed with it. The GGUF run is skipped (said so) without the gguf package
# (tests/pyref/install.sh), the rest (exit 0, said so) where /usr/bin/python3
# has no torch, the chains (said so) without the reference environment. The
# safetensors files are judged by the safetensors package of the reference
# environment (tests/pyref/install.sh --find), where it is.
# TSTOR_GGUF_DIFF_COUNT (default 2000), TSTOR_DIFF_COUNT (default 3000) and
# TSTOR_CHAINS_COUNT (default 5000) set the sizes.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1/tests" && pwd)
seed=${2:-$(date -u +%Y%m%d)}
PY=${TSTOR_PYTHON:-/usr/bin/python3}
TSTOR_BACKEND_DIR="$build/../modules"
export TSTOR_BACKEND_DIR
TSTOR_PYREF_PYTHON=${TSTOR_PYREF_PYTHON:-$(sh "$src/tests/pyref/install.sh" --find || true)}
export TSTOR_PYREF_PYTHON
echo "differential: seed $seed"
rc=0
(cd "$build" && TSTOR_GGUF_DIFF_COUNT=${TSTOR_GGUF_DIFF_COUNT:-2000} TSTOR_GGUF_DIFF_SEED=$seed \
   srcdir="$src/tests" sh "$src/tests/gguf/diff.sh") || rc=$?
[ $rc = 0 ] || [ $rc = 77 ] || exit $rc
if ! "$PY" -c 'import torch' 2> /dev/null; then
  echo "differential: no torch for $PY, the rest not run"
  exit 0
fi
(cd "$build" && TSTOR_DIFF_COUNT=${TSTOR_DIFF_COUNT:-3000} TSTOR_DIFF_SEED=$seed srcdir="$src/tests" \
   sh "$src/tests/ckpt/diff.sh")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The chains are torch 2.x's, which tstor's views follow; skipped (said so)
# without the reference environment. PyTorch itself may crash on a chain (1.13
# on a stride it wrapped into the range it keeps for symbolic sizes); the
# generator then goes on after that chain.
if [ -z "$TSTOR_PYREF_PYTHON" ]; then
  echo "differential: no PyPI references (tests/pyref/install.sh): the view chains not run"
  echo "differential: passed"
  exit 0
fi
tries=0
until (ulimit -v 8000000; "$TSTOR_PYREF_PYTHON" "$src/tests/vectors/gen_chains.py" "$out" "$seed" \
         "${TSTOR_CHAINS_COUNT:-5000}"); do
  tries=$((tries + 1))
  [ $tries -lt 50 ] || { echo "differential: gen_chains.py keeps failing"; exit 1; }
done
(cd "$build" && TSTOR_CHAINS_FILE="$out/tensor_chains.txt" CK_RUN_CASE=pytorch ./test_tensor_vectors)
echo "differential: passed"
