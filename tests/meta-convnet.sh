#!/bin/sh
# Runs docs/examples/meta-convnet.c and checks what it prints: each layer's
# shape and strides (as PyTorch gives them for the same network on meta), the
# bytes, and that the cpu arena holds exactly the planned total.
out=$(./meta_convnet) || { echo "meta_convnet exited with $?"; exit 1; }
printf '%s\n' "$out"
status=0
squeezed=$(printf '%s\n' "$out" | tr -s ' ')
expect() {
  printf '%s\n' "$squeezed" | grep -qxF -- "$1" || { echo "missing line: $1"; status=1; }
}
expect "input [8, 3, 32, 32] [3072, 1024, 32, 1] 98304"
expect "conv1 [8, 16, 32, 32] [16384, 1024, 32, 1] 524288"
expect "relu1 [8, 16, 32, 32] [16384, 1024, 32, 1] 524288"
expect "pool1 [8, 16, 16, 16] [4096, 256, 16, 1] 131072"
expect "conv2 [8, 32, 16, 16] [8192, 256, 16, 1] 262144"
expect "relu2 [8, 32, 16, 16] [8192, 256, 16, 1] 262144"
expect "pool2 [8, 32, 8, 8] [2048, 64, 8, 1] 65536"
expect "flatten [8, 2048] [2048, 1] (view)"
expect "linear [8, 10] [10, 1] 320"
expect "softmax [8, 10] [10, 1] 320"
expect "total: 1868416 bytes for 10 activations"
expect "cpu: one storage of 1868416 bytes holds them all"
exit $status
