#!/bin/sh
# hpu-stub through `tstor conformance`, then the same device under PyTorch:
# pytorch/test_privateuse1.py and pytorch/test_torch_suite.py (PyTorch's own
# device-generic tests, translated) with Debian's Python and its torch against
# the freshly built libtstor-torch.so (TSTOR_TORCH_LIB, set by make check) and
# the build tree's backends. A backend that passes conformance must also work
# under PyTorch: both suites run, and both must pass. 77 where there is nothing
# to run the second half with.
PY=${TSTOR_PYTHON:-/usr/bin/python3}
tstor=${TSTOR_BIN:-../tools/tstor}
modules=${TSTOR_BACKEND_DIR:?TSTOR_BACKEND_DIR is set by make check}
if [ -n "$TSTOR_TORCH_SANITIZED" ]; then
  echo "SKIP: sanitizer builds leave out the PyTorch device: their runtime cannot be loaded"
  echo "into an uninstrumented Python"; exit 77
fi
if [ -z "$TSTOR_TORCH_LIB" ]; then
  echo "SKIP: configure found no libtorch: libtstor-torch.so not built"; exit 77
fi
"$PY" -c 'import torch' 2>/dev/null || { echo "SKIP: no torch for $PY"; exit 77; }
# the suites import tstor_torch (bindings/pytorch), which loads $TSTOR_TORCH_LIB
PYTHONPATH=${TSTOR_TORCH_PYTHONPATH:-${srcdir:-.}/../bindings/pytorch}${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH
"$tstor" conformance "$modules/tstor-hpu-stub.so" --name hpu || {
  echo "FAIL: hpu-stub does not pass tstor conformance"; exit 1; }
rc=0
"$PY" "${srcdir:-.}/pytorch/test_privateuse1.py" -v || rc=1
"$PY" "${srcdir:-.}/pytorch/test_torch_suite.py" -v || rc=1
exit $rc
