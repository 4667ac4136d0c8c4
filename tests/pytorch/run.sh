#!/bin/sh
# Runs pytorch/test_device.py with Debian's Python and its torch against the
# freshly built libtstor-torch.so (TSTOR_TORCH_LIB, set by make check) and the
# build tree's backends. 77 where there is nothing to run it with.
PY=${TSTOR_PYTHON:-/usr/bin/python3}
if [ -z "$TSTOR_TORCH_LIB" ]; then
  echo "SKIP: configure found no libtorch: libtstor-torch.so not built"; exit 77
fi
if [ -n "$TSTOR_TORCH_SANITIZED" ]; then
  echo "SKIP: a sanitizer build's library cannot be loaded into an uninstrumented Python"; exit 77
fi
"$PY" -c 'import torch' 2>/dev/null || { echo "SKIP: no torch for $PY"; exit 77; }
exec "$PY" "${srcdir:-.}/pytorch/test_device.py" -v
