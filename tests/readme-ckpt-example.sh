#!/bin/sh
# Runs README.md's checkpoint example on a golden file; the values are those
# torch.load gives for it (tensor.flatten()[0], printed with %g).
out=$(./readme_ckpt_example "${srcdir:-.}/ckpt/golden/share_dict_float32.pt") ||
  { echo "readme_ckpt_example exited with $?"; exit 1; }
printf '%s\n' "$out"
want='base: float32, 30 elements, the first 125.995
a: float32, 6 elements, the first 58.1801
b: float32, 30 elements, the first 125.995
c: float32, 30 elements, the first 125.995
d: float32, 5 elements, the first 125.995
again: float32, 30 elements, the first 125.995'
[ "$out" = "$want" ] || { echo "expected:"; printf '%s\n' "$want"; exit 1; }
./readme_ckpt_example 2> /dev/null && { echo "no file: exit 0"; exit 1; }
./readme_ckpt_example /nonexistent.pt 2>&1 | grep -q 'No such file' || { echo "no reason given"; exit 1; }
exit 0
