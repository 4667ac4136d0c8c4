#!/bin/sh
# The recorded networks, regenerated with PyTorch and torchvision and compared
# (compare-generated.sh); skipped (77) without torchvision.
PY=${TSTOR_PYTHON:-/usr/bin/python3}
"$PY" -c 'import torchvision' 2>/dev/null || {
  echo "no torchvision for $PY: networks.txt not regenerated"
  exit 77
}
exec sh "${srcdir:-.}/vectors/compare-generated.sh" gen_networks.py networks.txt
