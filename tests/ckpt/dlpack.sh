#!/bin/sh
# DLPack with the real clients (ckpt/dlpack_clients.py): PyTorch and numpy of
# /usr/bin/python3 exchange tensors with libtstor-io, loaded by ctypes.
# Skipped (77) where that python has no torch or numpy.
PY=${TSTOR_PYTHON:-/usr/bin/python3}
"$PY" -c 'import torch, numpy' 2>/dev/null || { echo "no torch/numpy for $PY: skipped"; exit 77; }
lib=$(cd ../core/io/.libs && pwd)/libtstor-io.so
LD_LIBRARY_PATH=$(cd ../core/.libs && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
# A sanitizer build's library needs its runtime loaded first, which python,
# not built with it, does not do: preload the runtime the library links. The
# interpreter's own allocations are not ours to leak-check.
asan=$(ldd "$lib" 2>/dev/null | awk '/libasan\.so/ { print $3 }')
if [ -n "$asan" ]; then
  LD_PRELOAD=$asan${LD_PRELOAD:+:$LD_PRELOAD}
  ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
  export LD_PRELOAD ASAN_OPTIONS
fi
exec "$PY" "${srcdir:-.}/ckpt/dlpack_clients.py" "$lib"
