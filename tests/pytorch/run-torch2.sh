#!/bin/sh
# run.sh's suites on PyTorch 2.x: the torch of the Python configure found
# (--with-torch-python, by default the tests' reference environment) with
# libtstor-torch2.so built against it. 77, saying why, where either is
# missing.
if [ -n "$TSTOR_TORCH_SANITIZED" ]; then
  echo "SKIP: sanitizer builds leave out the PyTorch device: their runtime cannot be loaded"
  echo "into an uninstrumented Python"; exit 77
fi
if [ -z "$TSTOR_TORCH2_LIB" ]; then
  echo "SKIP: configure found no torch 2.x, so libtstor-torch2.so was not built: the 2.x line"
  echo "is untested here (tests/pyref/install.sh installs the reference environment; then run"
  echo "configure again, or name a Python with --with-torch-python=PYTHON)"; exit 77
fi
TSTOR_PYTHON=$TSTOR_TORCH2_PYTHON TSTOR_TORCH_LIB=$TSTOR_TORCH2_LIB \
  exec sh "${srcdir:-.}/pytorch/run.sh"
