#!/bin/sh
# Runs README.md's checkpoint example on golden files; the values are those
# torch.load gives for them (tensor.flatten()[0], printed with %g), the names
# those tstor inspect prints.
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
# a nested training checkpoint: its tensors by their dotted names, one found by name
out=$(./readme_ckpt_example "${srcdir:-.}/ckpt/golden/checkpoint_nested.pt" model) ||
  { echo "readme_ckpt_example on checkpoint_nested.pt exited with $?"; exit 1; }
printf '%s\n' "$out"
for line in 'model.weight: float32, 12 elements' 'history[2].w: float32, 4 elements' 'model is a dict'; do
  printf '%s\n' "$out" | grep -qF "$line" || { echo "missing: $line"; exit 1; }
done
./readme_ckpt_example "${srcdir:-.}/ckpt/golden/checkpoint_nested.pt" nothing.here 2>&1 |
  grep -q "no value named 'nothing.here'" || { echo "a missing name not said"; exit 1; }
./readme_ckpt_example 2> /dev/null && { echo "no file: exit 0"; exit 1; }
./readme_ckpt_example /nonexistent.pt 2>&1 | grep -q 'No such file' || { echo "no reason given"; exit 1; }
exit 0
