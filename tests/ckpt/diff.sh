#!/bin/sh
# The differential test against the references, a bounded slice of it:
# gen_diff.py writes TSTOR_DIFF_COUNT (default 1000) broken and intact
# checkpoints from TSTOR_DIFF_SEED (default 1) with what torch.load
# (TSTOR_PYTHON, Debian's) makes of each, and torch 2.x of the reference
# environment (TSTOR_PYREF_PYTHON) judges the same files too, where it is:
# test_ckpt_diff must agree with 2.x on every one (and says where 1.13
# differs); then as many of 2.x's own kinds broken from its golden files
# (gen_diff_torch2.py: v3 and quantized tensors, tensors with attributes...),
# judged by it; then as many safetensors files from gen_st_diff.py, with what
# the safetensors package of the reference environment makes of each. Each
# part runs where its reference is; skipped (77) where neither is. The long
# run for docs/reliability.md is the same with a larger count and other
# seeds.
PY=${TSTOR_PYTHON:-/usr/bin/python3}
dir=${srcdir:-.}/ckpt
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
ran=0
if "$PY" -c 'import torch' 2>/dev/null; then
  "$PY" "$dir/gen_diff.py" "$out" "${TSTOR_DIFF_COUNT:-1000}" "${TSTOR_DIFF_SEED:-1}" || exit 1
  # torch 2.x of the pyref environment as the second judge of the same files:
  # tstor must then agree with it (test_ckpt_diff names where 1.13 differs)
  if [ -n "${TSTOR_PYREF_PYTHON:-}" ] && "$TSTOR_PYREF_PYTHON" -c 'import torch' 2>/dev/null; then
    "$TSTOR_PYREF_PYTHON" -W ignore "$dir/gen_diff.py" --judge "$out" || exit 1
  else
    echo "no torch 2.x (TSTOR_PYREF_PYTHON): judged by $PY alone"
  fi
  TSTOR_DIFF_DIR=$out ./test_ckpt_diff || exit 1
  ran=1
else
  echo "no torch for $PY: torch.load part skipped"
fi
# the kinds only torch 2.x writes (v3 tensors, quantized tensors, tensors with
# attributes...), broken from its golden files and judged by it
if [ -n "${TSTOR_PYREF_PYTHON:-}" ] && "$TSTOR_PYREF_PYTHON" -c 'import torch' 2>/dev/null; then
  mkdir "$out/torch2" || exit 1
  "$TSTOR_PYREF_PYTHON" -W ignore "$dir/gen_diff_torch2.py" "$out/torch2" "${TSTOR_DIFF_COUNT:-1000}" \
    "${TSTOR_DIFF_SEED:-1}" || exit 1
  TSTOR_DIFF_DIR=$out/torch2 ./test_ckpt_diff || exit 1
  ran=1
fi
if [ -n "${TSTOR_PYREF_PYTHON:-}" ] && "$TSTOR_PYREF_PYTHON" -c 'import safetensors' 2>/dev/null; then
  mkdir "$out/st" || exit 1
  "$TSTOR_PYREF_PYTHON" "$dir/gen_st_diff.py" "$out/st" "${TSTOR_DIFF_COUNT:-1000}" "${TSTOR_DIFF_SEED:-1}" || exit 1
  TSTOR_DIFF_DIR=$out/st ./test_ckpt_diff || exit 1
  ran=1
else
  echo "no safetensors package (TSTOR_PYREF_PYTHON, tests/pyref/install.sh): safetensors part skipped"
fi
[ $ran = 1 ] || exit 77
