#!/bin/sh
# The differential test against torch.load, a bounded slice of it: gen_diff.py
# writes TSTOR_DIFF_COUNT (default 1000) broken and intact checkpoints from
# TSTOR_DIFF_SEED (default 1) with what PyTorch makes of each, and
# test_ckpt_diff must agree on every one; then as many safetensors files from
# gen_st_diff.py, against st_reference.py, its model of the reference reader.
# Skipped (77) without torch. The long run for docs/reliability.md is the
# same with a larger count and other seeds.
PY=${TSTOR_PYTHON:-/usr/bin/python3}
dir=${srcdir:-.}/ckpt
"$PY" -c 'import torch' 2>/dev/null || { echo "no torch for $PY: skipped"; exit 77; }
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
"$PY" "$dir/gen_diff.py" "$out" "${TSTOR_DIFF_COUNT:-1000}" "${TSTOR_DIFF_SEED:-1}" || exit 1
TSTOR_DIFF_DIR=$out ./test_ckpt_diff || exit 1
# safetensors files against the model of the reference reader (no torch needed
# for it, but the same run)
mkdir "$out/st" || exit 1
"$PY" "$dir/gen_st_diff.py" "$out/st" "${TSTOR_DIFF_COUNT:-1000}" "${TSTOR_DIFF_SEED:-1}" || exit 1
TSTOR_DIFF_DIR=$out/st ./test_ckpt_diff
