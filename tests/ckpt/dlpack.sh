#!/bin/sh
# DLPack with the real clients, libtstor-io loaded by ctypes: PyTorch 1.13 and
# numpy 1.24 of /usr/bin/python3 (TSTOR_PYTHON) over DLPack 0.x
# (ckpt/dlpack_clients.py), and PyTorch 2.x and numpy 2.x of the reference
# environment (TSTOR_PYREF_PYTHON) over DLPack 1.x (ckpt/dlpack_v1.py). Each
# runs where its python has torch and numpy; skipped (77) where neither has.
PY=${TSTOR_PYTHON:-/usr/bin/python3}
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
ran=0
if "$PY" -c 'import torch, numpy' 2>/dev/null; then
  "$PY" "${srcdir:-.}/ckpt/dlpack_clients.py" "$lib" || exit 1
  ran=1
else
  echo "no torch/numpy for $PY: DLPack 0.x clients skipped"
fi
if [ -n "${TSTOR_PYREF_PYTHON:-}" ] && "$TSTOR_PYREF_PYTHON" -c 'import torch, numpy' 2>/dev/null; then
  "$TSTOR_PYREF_PYTHON" "${srcdir:-.}/ckpt/dlpack_v1.py" "$lib" || exit 1
  ran=1
else
  echo "no reference environment (tests/pyref/install.sh): DLPack 1.x clients skipped"
fi
[ $ran = 1 ] || exit 77
