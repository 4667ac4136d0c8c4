#!/bin/sh
# The .t7 generator writes what Torch7 writes: byte for byte the files Torch7
# itself wrote (torch7-written/), and its corpus reads back as its manifest.
PY=${TSTOR_PYTHON:-/usr/bin/python3}
command -v "$PY" > /dev/null 2>&1 || { echo "SKIP: no $PY"; exit 77; }
exec "$PY" "${srcdir:-.}/t7/check_gen.py"
