#!/bin/sh
# The cases made by torch 2.x (the *_torch2 files), regenerated with the PyPI
# references (tests/pyref: $TSTOR_PYREF_PYTHON) and compared
# (compare-generated.sh); skipped (77) where they are not installed.
py=${TSTOR_PYREF_PYTHON:-$(sh "${srcdir:-.}/pyref/install.sh" --find)} || py=
if [ -z "$py" ]; then
  echo "no PyPI references (tests/pyref/install.sh): the torch 2.x cases not regenerated"
  exit 77
fi
status=77
compare() {
  TSTOR_PYTHON=$py sh "${srcdir:-.}/vectors/compare-generated.sh" "$@"
  case $? in
    0) [ $status = 1 ] || status=0 ;;
    77) ;;
    *) status=1 ;;
  esac
}
compare gen_vectors.py print_torch2.txt conversions_torch2.bin refusals_torch2.txt
compare gen_tensors.py tensor_views_torch2.txt tensor_print_torch2.txt tensor_copies_torch2.txt
compare gen_chains.py tensor_chains_torch2.txt
compare gen_shapes.py shapes_torch2.txt
if "$py" -c 'import torchvision' 2> /dev/null; then
  compare gen_networks.py networks_torch2.txt
else
  echo "no torchvision for $py (tests/pyref/requirements-nodeps.txt): networks_torch2.txt not regenerated"
fi
exit $status
