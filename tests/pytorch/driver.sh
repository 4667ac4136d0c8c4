#!/bin/sh
# pytorch_driver (pytorch/driver.cc) on the freshly built libtstor-torch.so:
# the device through libtorch's C++ API, every byte back to tstor after.
if [ -n "$TSTOR_TORCH_SANITIZED" ]; then
  echo "SKIP: sanitizer builds leave out the PyTorch device"; exit 77
fi
if [ -z "$TSTOR_TORCH_LIB" ]; then
  echo "SKIP: configure found no libtorch: libtstor-torch.so not built"; exit 77
fi
exec ./pytorch_driver "$TSTOR_TORCH_LIB"
