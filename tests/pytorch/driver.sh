#!/bin/sh
# pytorch_driver (pytorch/driver.cc) on the freshly built libtstor-torch.so:
# the device through libtorch's C++ API, every byte back to tstor after.
if [ -n "$TSTOR_TORCH_SANITIZED" ]; then
  echo "SKIP: a sanitizer build's library is checked by its own runtime in the C suites"; exit 77
fi
exec ./pytorch_driver "${TSTOR_TORCH_LIB:?TSTOR_TORCH_LIB is set by make check}"
