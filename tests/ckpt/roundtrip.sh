#!/bin/sh
# tstor re-saves every golden checkpoint (and the hostile files PyTorch reads)
# and PyTorch must load each one, with weights_only=True where the tree holds
# no floats, and see what golden.txt says. Skipped (77) without torch.
PY=${TSTOR_PYTHON:-/usr/bin/python3}
dir=${srcdir:-.}/ckpt
"$PY" -c 'import torch' 2>/dev/null || { echo "no torch for $PY: skipped"; exit 77; }
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
./ckpt_resave "$out" "$dir"/golden/*.pt "$dir"/hostile/deflated.pt "$dir"/hostile/unaligned.pt \
  "$dir"/hostile/big_endian.pt || exit 1
"$PY" "$dir/check_torch.py" "$dir/golden.txt" "$out"
