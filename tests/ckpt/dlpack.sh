#!/bin/sh
# DLPack with the real clients (ckpt/dlpack_clients.py): PyTorch and numpy of
# /usr/bin/python3 exchange tensors with libtstor-io, loaded by ctypes.
# Skipped (77) where that python has no torch or numpy.
PY=${TSTOR_PYTHON:-/usr/bin/python3}
"$PY" -c 'import torch, numpy' 2>/dev/null || { echo "no torch/numpy for $PY: skipped"; exit 77; }
lib=$(cd ../core/io/.libs && pwd)/libtstor-io.so
LD_LIBRARY_PATH=$(cd ../core/.libs && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
exec "$PY" "${srcdir:-.}/ckpt/dlpack_clients.py" "$lib"
