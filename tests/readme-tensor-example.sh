#!/bin/sh
# Runs README.md's tensor example and checks that it prints what its comments say.
out=$(./readme_tensor_example) || { echo "readme_tensor_example exited with $?"; exit 1; }
printf '%s\n' "$out"
want='0
tensor([[1.0000, 2.0000, 3.0000],
        [0.5000, 0.5000, 0.5000]])
tensor([[1., 4.],
        [2., 5.],
        [3., 6.]])
TSTOR_EINVAL: view size is not compatible with input tensor'"'"'s size and stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.'
[ "$out" = "$want" ] || { echo "expected:"; printf '%s\n' "$want"; exit 1; }
