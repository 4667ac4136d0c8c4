#!/bin/sh
# tstor re-saves every golden checkpoint (and the hostile files PyTorch
# reads, and the tar format's files) and PyTorch must load each one, with
# weights_only=True where the tree holds no floats, and see what it read
# from the original (golden_as_torch2.txt for 2.x; golden.txt for 1.13, but
# for the files the two read differently, where tstor follows 2.x;
# tar.txt): Debian's torch 1.13
# (/usr/bin/python3, or $TSTOR_PYTHON) and torch 2.x of the pyref
# environment ($TSTOR_PYREF_PYTHON), each where it is. Then tstor re-saves the
# golden files of torch 2.x (golden_torch2/, dtypes 1.13 has not) and torch
# 2.x must read each with weights_only=True and see what golden_torch2.txt
# says. Skipped (77) where neither torch is.
dir=${srcdir:-.}/ckpt
pys=
for PY in "${TSTOR_PYTHON:-/usr/bin/python3}" "${TSTOR_PYREF_PYTHON:-}"; do
  [ -n "$PY" ] || continue
  if "$PY" -c 'import torch' 2>/dev/null; then pys="$pys $PY"; else echo "no torch for $PY: not read by it"; fi
done
[ -n "$pys" ] || { echo "no torch: skipped"; exit 77; }
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
./ckpt_resave "$out" "$dir"/golden/*.pt "$dir"/hostile/deflated.pt "$dir"/hostile/unaligned.pt \
  "$dir"/hostile/big_endian.pt "$dir"/hostile/memo_after_repeated_binput.pt \
  "$dir"/hostile/dict_numeric_keys.pt "$dir"/hostile/unicode_path_swaps_records.pt \
  "$dir"/hostile/stop_two_values.pt "$dir"/hostile/stop_with_mark_open.pt "$dir"/hostile/memo_huge_index.pt \
  "$dir"/hostile/long_int_sign_padded.pt "$dir"/hostile/zero_size_after_huge_sizes.pt \
  "$dir"/hostile/dict_tuple_keys.pt "$dir"/hostile/version_padded.pt "$dir"/hostile/dict_tensor_key.pt \
  "$dir"/hostile/rebuild_v2_none_hooks.pt "$dir"/hostile/legacy_view_other_class.pt \
  "$dir"/hostile/legacy_key_other_size.pt \
  "$dir"/hostile/ordereddict_items.pt || exit 1
./ckpt_resave --built "$out/built.pt" || exit 1
# the tar format's files too (PyTorch 0.1's; those saved on cuda need a
# map_location, which ckpt_resave does not give), checked against tar.txt
mkdir "$out/tar" || exit 1
./ckpt_resave "$out/tar" $(ls "$dir"/tar/*.pt | grep -v '/cuda_') || exit 1
awk '/^file /{skip = ($2 ~ /\/cuda_/)} !skip' "$dir/tar.txt" > "$out/tar.txt" || exit 1
for PY in $pys; do
echo "torch $("$PY" -c 'import torch; print(torch.__version__)') ($PY):"
# 2.x against what it reads from the 1.13 files; 1.13 against what it reads,
# but for the files the two read differently (docs/formats.md), where tstor
# and its re-save follow 2.x
if "$PY" -c 'import sys, torch; sys.exit(torch.__version__ < "2")' 2>/dev/null; then
  "$PY" -W ignore::UserWarning "$dir/check_torch.py" "$dir/golden_as_torch2.txt" "$out" || exit 1
else
  "$PY" -W ignore::UserWarning "$dir/check_torch.py" "$dir/golden.txt" "$out" \
    --where-same "$dir/golden_as_torch2.txt" || exit 1
fi
"$PY" -W ignore::UserWarning "$dir/check_torch.py" "$out/tar.txt" "$out/tar" || exit 1
# a tree built with the value API: PyTorch sees the values, the layouts and
# that w, wt, row, col and again are views of one storage
"$PY" -W ignore::UserWarning - "$out/built.pt" <<'PY' || exit 1
import sys, torch
d = torch.load(sys.argv[1], weights_only=True)
w = torch.arange(12.).view(3, 4)
assert torch.equal(d["w"], w) and torch.equal(d["wt"], w.t()) and d["wt"].stride() == (1, 4)
assert torch.equal(d["row"], w[1]) and d["row"].storage_offset() == 4
assert torch.equal(d["col"], w[:, 2]) and d["col"].stride() == (4,) and d["col"].storage_offset() == 2
assert len({d[k].storage()._cdata for k in ("w", "wt", "row", "col", "again")}) == 1, "sharing lost"
assert d["again"] is d["w"], "the same value twice is one object"
assert torch.equal(d["i"], torch.tensor([-1, 0, 7], dtype=torch.int16))
assert d["meta"] == [5, "five", None, True, (1, 2), -123456789012], d["meta"]
print("built tree: PyTorch reads values, layouts and sharing")
PY
done
# the files of torch 2.x, read back by it alone (1.13 has no _rebuild_tensor_v3)
PY=${TSTOR_PYREF_PYTHON:-}
if [ -n "$PY" ] && "$PY" -c 'import torch' 2>/dev/null; then
  mkdir "$out/torch2" || exit 1
  # but the file whose tensors view one storage as three dtypes, which
  # torch.save refuses to write, and tstor with it (test_ckpt_golden)
  ./ckpt_resave "$out/torch2" $(ls "$dir"/golden_torch2/*.pt | grep -v /storage_three_dtypes.pt) || exit 1
  awk '/^file /{skip = ($2 == "storage_three_dtypes.pt")} !skip' "$dir/golden_torch2.txt" > "$out/golden_torch2.txt" ||
    exit 1
  echo "torch $("$PY" -c 'import torch; print(torch.__version__)') ($PY), golden_torch2:"
  "$PY" -W ignore::UserWarning "$dir/check_torch.py" "$out/golden_torch2.txt" "$out/torch2" --weights-only || exit 1
else
  echo "no torch 2.x (TSTOR_PYREF_PYTHON): golden_torch2 not read back"
fi
