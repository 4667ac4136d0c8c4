#!/bin/sh
# compare-torch2.sh: runs the generators of the golden data made with Debian's
# PyTorch 1.13 (view chains, shape cases, tensor views, copies and printing,
# storage printing, the three networks) under torch 2.x (tests/pyref:
# $TSTOR_PYREF_PYTHON) into a scratch folder, and compares each file with the
# committed one case by case (diff_cases.py): per file, the cases, how many
# differ and the first few differences. docs/formats.md ("PyTorch 1.13 and
# 2.x") lists every one. Fails when a count is not the documented one (for
# torch 2.15.0); skipped (77) without the references or with another torch.
# The networks need torchvision, which tests/pyref does not install: without
# it they are reported and not compared (PYTHONPATH may name a folder that has
# it: pip install --no-deps --target DIR torchvision pillow).
# conversions.bin is left out: docs/dtypes.md lists those differences.
py=${TSTOR_PYREF_PYTHON:-$(sh "${srcdir:-.}/pyref/install.sh" --find)} || py=
if [ -z "$py" ]; then
  echo "no PyPI references (tests/pyref/install.sh): the 1.13 cases not compared with torch 2.x"
  exit 77
fi
dir=${srcdir:-.}/vectors
have=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null)
case $have in
  2.15.0*) ;;
  *)
    echo "torch $have: the differences are counted for torch 2.15.0, not compared"
    exit 77
    ;;
esac
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
export TSTOR_GEN_ALL_VERSIONS=1
status=0
# compare FILE EXPECTED: the committed FILE against the one made in $out
compare() {
  line=$(python3 "$dir/diff_cases.py" -n "${SHOW:-3}" "$dir/$1" "$out/$1") || {
    echo "$1: not compared"
    status=1
    return
  }
  echo "$line"
  got=$(echo "$line" | sed -n '1s/.* cases, \([0-9]*\) differ.*/\1/p')
  if [ "$got" != "$2" ]; then
    echo "$1: $got cases differ between PyTorch 1.13 and $have, documented: $2"
    status=1
  fi
}
run() {
  "$py" "$dir/$@" > "$out/log" 2>&1 || {
    cat "$out/log"
    echo "$1 failed under torch $have"
    status=1
  }
}
run gen_shapes.py "$out"
compare shapes.txt 614
run gen_tensors.py "$out"
compare tensor_views.txt 27
compare tensor_copies.txt 0
compare tensor_print.txt 0
run gen_chains.py "$out" --replay "$dir/tensor_chains.txt"
compare tensor_chains.txt 177
run gen_vectors.py "$out"
compare print.txt 0
if "$py" -c 'import torchvision' 2>/dev/null; then
  run gen_networks.py "$out"
  compare networks.txt 139
else
  echo "networks.txt: no torchvision for $py, not compared"
fi
exit $status
