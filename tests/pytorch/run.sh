#!/bin/sh
# hpu-stub through `tstor conformance`, then the same device under PyTorch:
# pytorch/test_privateuse1.py, pytorch/test_torch_suite.py (PyTorch's own
# device-generic tests, translated) and pytorch/test_openreg.py (PyTorch 2.x's
# tests of its reference out-of-tree backend, translated; skipped on 1.13)
# with $TSTOR_PYTHON (default Debian's Python and its torch 1.13) against the
# freshly built libtstor-torch (TSTOR_TORCH_LIB, set by make check;
# run-torch2.sh runs this for 2.x) and the build tree's backends. A backend
# that passes conformance must also work under PyTorch: the suites run, and
# all must pass. They run again on a type of one device, and
# test_privateuse1.py on the backend guide's toy device. 77 where there is
# nothing to run the second half with.
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
"$PY" "${srcdir:-.}/pytorch/test_openreg.py" -v || rc=1
# A type of one device, as on a machine with one GPU (devices.py): the cases
# that move tensors between devices move within it; those that need two skip.
ini=$(mktemp "${TMPDIR:-/tmp}/tstor-one.XXXXXX") || exit 99
printf '[backend cpu]\nlibrary = %s\n[backend hpu]\nlibrary = %s\ndevices = 1\n' \
  "$modules/tstor-cpu.so" "$modules/tstor-hpu-stub.so" > "$ini"
for suite in test_privateuse1 test_torch_suite test_openreg; do
  TSTOR_CONFIG=$ini "$PY" "${srcdir:-.}/pytorch/$suite.py" -v || rc=1
done
rm -f "$ini"
# A device type of an author's own, by name: the backend guide's minimal
# example ("toy"), which PyTorch 2.x then calls by that name.
toy=${TSTOR_TEST_PLUGINS:-}/guide_minimal.so
if [ -f "$toy" ]; then
  ini=$(mktemp "${TMPDIR:-/tmp}/tstor-toy.XXXXXX") || exit 99
  printf '[backend cpu]\nlibrary = %s\n[backend toy]\nlibrary = %s\ndevices = 2\n' \
    "$modules/tstor-cpu.so" "$toy" > "$ini"
  TSTOR_CONFIG=$ini TSTOR_TORCH_DEVICE=toy "$PY" "${srcdir:-.}/pytorch/test_privateuse1.py" -v ||
    rc=1
  rm -f "$ini"
fi
exit $rc
