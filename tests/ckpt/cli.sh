#!/bin/sh
# tstor inspect and tstor convert on the golden files: listings, sharing,
# JSON, refusals and exit statuses; a convert's output loads in PyTorch
# where /usr/bin/python3 has torch.
set -u
tstor=../tools/tstor
dir=${srcdir:-.}/ckpt
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# the program links libtstor and libtstor-io alone: libtorch (hundreds of
# libraries, seconds to load) stays in bench-torch.so, loaded for --torch
libs=$(../libtool --mode=execute ldd ../tools/tstor) || fail "ldd tstor"
echo "$libs" | grep -q 'libtstor\.so' || fail "tstor does not link libtstor: $libs"
if echo "$libs" | grep -Eq 'libtorch|libc10'; then fail "tstor links libtorch"; fi

$tstor inspect "$dir/golden/checkpoint_nested.pt" > "$out/a.txt" || fail "inspect exit $?"
grep -q '^model.weight  *float32  *\[3, 4\]  *\[4, 1\]  *0  *0  *48 cpu$' "$out/a.txt" || fail "model.weight line"
grep -q '^history\[2\].w  *float32  *\[4\]  *\[1\]  *8  *0  *48 cpu$' "$out/a.txt" || fail "history[2].w line"
# the whole tree, not only tensors: numbers, strings, None, bools, in tree order
grep -q '^epoch  *int  *3$' "$out/a.txt" || fail "epoch line"
grep -q '^lr\[0\]  *float  *0.1$' "$out/a.txt" || fail "lr[0] line"
grep -q "^name  *str  *'linear'$" "$out/a.txt" || fail "name line"
grep -q '^done  *bool  *False$' "$out/a.txt" || fail "done line"
grep -q "^model@_metadata\\[''\\].version  *int  *1$" "$out/a.txt" || fail "a state_dict's _metadata"
# a name longer than the column pushes its own line only
$tstor inspect "$dir/golden/deep_tensor_200.pt" > "$out/deep.txt" || fail "inspect deep exit $?"
[ "$(grep -c 'float32' "$out/deep.txt")" -eq 1 ] || fail "deep tensor line"
# where tensors were saved, as the file says, and meta tensors
$tstor inspect "$dir/../ckpt/cuda_saved.pt" | grep -q ' cuda:0$' || fail "a tensor saved on cuda:0"
$tstor inspect "$dir/golden/meta_tensors.pt" | grep -q '^m  *float32  *\[3, 4\] .* meta$' || fail "meta tensor line"
grep -q 'storage 0 (record 0, 48 bytes): model.weight history\[0\].w history\[1\].w history\[2\].w' "$out/a.txt" ||
  fail "shared storage line"

$tstor inspect --json "$dir/golden/share_dict_float32.pt" > "$out/a.json" || fail "inspect --json exit $?"
python3 - "$out/a.json" <<'PY' || fail "JSON listing"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "torch"
t = {x["name"]: x for x in d["tensors"]}
assert t["c"]["shape"] == [5, 6] and t["c"]["strides"] == [1, 5], t["c"]
assert t["a"]["storage_offset"] == 2 and t["a"]["storage_nbytes"] == 120
assert d["shared"] == [["base", "a", "b", "c", "d", "again"]], d["shared"]
assert all(x["device"] == "cpu" for x in d["tensors"])
PY
$tstor inspect --json "$dir/golden/checkpoint_nested.pt" > "$out/n.json" || fail "inspect --json nested"
python3 - "$out/n.json" <<'PY' || fail "JSON values"
import json, sys
v = {x["name"]: x for x in json.load(open(sys.argv[1]))["values"]}
assert v["epoch"] == {"name": "epoch", "exact": "['epoch']", "kind": "int", "value": 3}, v["epoch"]
assert v["lr[1]"]["value"] == 0.01 and v["name"]["value"] == "linear" and v["done"]["value"] is False
PY

# bad files and bad usage
$tstor inspect "$dir/hostile/global_os_system.pt" 2> "$out/err"; st=$?
[ $st -eq 1 ] || fail "hostile file: exit $st"
grep -q "posix.system' is refused" "$out/err" || fail "hostile message: $(cat "$out/err")"
$tstor inspect "$out/none.pt" 2>/dev/null; [ $? -eq 1 ] || fail "missing file"
$tstor inspect 2>/dev/null; [ $? -eq 2 ] || fail "no file: usage"
$tstor inspect --bogus x 2>/dev/null; [ $? -eq 2 ] || fail "bad option: usage"
$tstor convert onlyone 2>/dev/null; [ $? -eq 2 ] || fail "convert with one file: usage"

# a file in torch.save's legacy format is named as such, not misread as
# safetensors (it was: "a header of 5088219219985302144 bytes"), and convert
# migrates it to the zip format
$tstor inspect "$dir/golden/legacy_checkpoint_nested.pt" > "$out/legacy.txt" || fail "inspect legacy exit $?"
grep -q ': torch.save checkpoint (legacy format), 5 tensors' "$out/legacy.txt" || fail "legacy title: $(head -1 "$out/legacy.txt")"
grep -q '^model.weight  *float32  *\[3, 4\]  *\[4, 1\]  *0 ' "$out/legacy.txt" || fail "legacy model.weight line"
$tstor convert "$dir/golden/legacy_checkpoint_nested.pt" "$out/migrated.pt" || fail "convert legacy exit $?"
if /usr/bin/python3 -c 'import torch' 2> /dev/null; then
  /usr/bin/python3 - "$dir/golden/legacy_checkpoint_nested.pt" "$out/migrated.pt" <<'PY' || fail "migrated file in PyTorch"
import sys, torch
old, new = torch.load(sys.argv[1]), torch.load(sys.argv[2])
assert old.keys() == new.keys()
for k, v in old["model"].items():
    assert torch.equal(v, new["model"][k]), k
assert new["history"][1]["w"].storage_offset() == 4 and new["epoch"] == 3
PY
fi

# torch.save's first format, PyTorch 0.1's tar archive, is named as such
# (it was "not a checkpoint tstor knows"), a refusal names the member and
# its offset, and convert migrates it to the zip format
$tstor inspect "$dir/tar/py2_checkpoint.pt" > "$out/tar.txt" || fail "inspect tar exit $?"
grep -q ': torch.save checkpoint (tar format of PyTorch 0.1), 5 tensors' "$out/tar.txt" ||
  fail "tar title: $(head -1 "$out/tar.txt")"
grep -q '^state_dict.weight  *float32  *\[3, 4\]  *\[4, 1\]  *0 ' "$out/tar.txt" || fail "tar state_dict.weight line"
$tstor inspect --json "$dir/tar/storage_views.pt" > "$out/tar.json" || fail "inspect --json tar exit $?"
grep -q '"format": "torch-tar"' "$out/tar.json" || fail "tar JSON format: $(head -c 200 "$out/tar.json")"
$tstor inspect "$dir/tar_hostile/tensor_past_storage.pt" > /dev/null 2> "$out/err"; st=$?
[ $st -eq 1 ] || fail "hostile tar: exit $st"
grep -q "member 'tensors' offset 5637: tensor 94376301290000 needs 32 bytes" "$out/err" ||
  fail "hostile tar message: $(cat "$out/err")"
$tstor convert "$dir/tar/py2_checkpoint.pt" "$out/from_tar.pt" || fail "convert tar exit $?"
if /usr/bin/python3 -c 'import torch' 2> /dev/null; then
  /usr/bin/python3 - "$dir/tar/py2_checkpoint.pt" "$out/from_tar.pt" <<'PY' || fail "migrated tar file in PyTorch"
import sys, torch
old, new = torch.load(sys.argv[1]), torch.load(sys.argv[2])
assert old.keys() == new.keys()
for k, v in old["state_dict"].items():
    assert torch.equal(v, new["state_dict"][k]), k
assert new["epoch"] == old["epoch"]
PY
fi

# a FIFO is refused at once, not read (with nothing at the other end, a read
# would wait for ever)
mkfifo "$out/fifo"
timeout 10 $tstor inspect "$out/fifo" 2> "$out/err"; st=$?
[ $st -eq 1 ] || fail "FIFO: exit $st (124: it hung)"
grep -q "not a regular file" "$out/err" || fail "FIFO message: $(cat "$out/err")"
timeout 10 $tstor convert "$out/fifo" "$out/f.pt" 2>/dev/null; st=$?
[ $st -eq 1 ] || fail "convert from a FIFO: exit $st"

# names that would rewrite the terminal are printed escaped: ESC [ 2 K (erase
# the line), CR, and the C1 control CSI (U+009B)
python3 - "$out/evil.safetensors" <<'PY' || fail "writing evil.safetensors"
import json, struct, sys
names = ["backdoor.weight\x1b[2K\rmodel.norm.weight", "csi\u009b2Kx", "back\\slash"]
header = {n: {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]} for i, n in enumerate(names)}
header["__metadata__"] = {"note\x07": "bell\x07"}
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + bytes(len(names)))
PY
$tstor inspect "$out/evil.safetensors" > "$out/evil.txt" || fail "inspect evil.safetensors: exit $?"
if LC_ALL=C grep -q "$(printf '[\001-\010\013-\037\177]')" "$out/evil.txt" ||
   LC_ALL=C grep -q "$(printf '\302[\200-\237]')" "$out/evil.txt"; then
  fail "a control character reached the listing: $(od -c "$out/evil.txt" | head)"
fi
grep -qF 'backdoor.weight\x1b[2K\x0dmodel.norm.weight' "$out/evil.txt" || fail "ESC and CR escaped"
grep -qF 'csi\x9b2Kx' "$out/evil.txt" || fail "CSI escaped"
grep -qF 'back\\slash' "$out/evil.txt" || fail "backslash doubled"
grep -qF 'note\x07: bell\x07' "$out/evil.txt" || fail "metadata escaped"

# a failed save names its file once
$tstor convert "$dir/golden/checkpoint_nested.pt" "$out/none/x.pt" 2> "$out/err"; st=$?
[ $st -eq 1 ] || fail "convert into a missing folder: exit $st"
[ "$(grep -o "$out/none/x.pt" "$out/err" | wc -l)" -eq 1 ] || fail "the file named twice: $(cat "$out/err")"

# sharing refused into safetensors, then copied
$tstor convert "$dir/golden/share_dict_float32.pt" "$out/s.safetensors" 2> "$out/err"; st=$?
[ $st -eq 1 ] || fail "shared into safetensors: exit $st"
grep -q "share a storage" "$out/err" || fail "sharing message"
[ ! -e "$out/s.safetensors" ] || fail "a refused convert left a file"
$tstor convert --copy "$dir/golden/share_dict_float32.pt" "$out/s.safetensors" || fail "convert --copy"
$tstor inspect "$out/s.safetensors" | grep -q '^c  *float32  *\[5, 6\]  *\[6, 1\]  *0' || fail "copied c is contiguous"
$tstor convert "$dir/golden/checkpoint_nested.pt" "$out/n.safetensors" 2> "$out/err"; [ $? -eq 1 ] ||
  fail "nested tree into safetensors"
grep -q "only string -> tensor" "$out/err" && grep -q -- "--select NAME" "$out/err" &&
  grep -q -- "--flatten" "$out/err" || fail "nested message says what to do: $(cat "$out/err")"
# a torch.save file cut short says so (it said 'Not a zip archive')
head -c 600 "$dir/golden/checkpoint_nested.pt" > "$out/cut.pt"
$tstor inspect "$out/cut.pt" 2> "$out/err"; st=$?
[ $st -eq 1 ] && grep -q "truncated: it opens as a zip archive but has no end record" "$out/err" ||
  fail "a cut file: $st $(cat "$out/err")"

# one subtree, or every tensor under its dotted name: what a safetensors file holds
$tstor convert --select model "$dir/golden/checkpoint_nested.pt" "$out/model.safetensors" || fail "--select model"
$tstor inspect "$out/model.safetensors" | grep -q '^weight  *float32  *\[3, 4\]' || fail "selected weight"
$tstor convert --flatten --copy "$dir/golden/checkpoint_nested.pt" "$out/flat.safetensors" 2> "$out/err" ||
  fail "--flatten"
grep -q 'keeps the 5 tensors and leaves out' "$out/err" || fail "--flatten says what it left out"
$tstor inspect "$out/flat.safetensors" | grep -q '^history\[1\].w  *float32  *\[4\]' || fail "flattened name"
$tstor convert --select nothing.here "$dir/golden/checkpoint_nested.pt" "$out/x.pt" 2> "$out/err"; st=$?
[ $st -eq 1 ] && grep -q "no value named 'nothing.here'" "$out/err" || fail "--select of a missing name: $st"
[ ! -e "$out/x.pt" ] || fail "a refused --select left a file"

# names that collide when dotted ({"a.b": x, "a": {"b": y}}; "x[0]" against
# x's item 0): listed by their exact names, refused by --flatten naming both
# (it kept 2 of the 4 tensors and exited 0), each reachable by --select
python3 "$dir/craft_pt.py" collide "$out/collide.pt" || fail "writing collide.pt"
$tstor inspect "$out/collide.pt" > "$out/collide.txt" || fail "inspect collide.pt: exit $?"
for name in "\['a.b'\]" "\['a'\]\['b'\]" "\['x\[0\]'\]" "\['x'\]\[0\]"; do
  grep -q "^$name  *float32  *\[2\]" "$out/collide.txt" || fail "exact name $name: $(cat "$out/collide.txt")"
done
$tstor convert --flatten "$out/collide.pt" "$out/collide.safetensors" 2> "$out/err"; st=$?
[ $st -eq 1 ] || fail "--flatten of colliding names: exit $st"
grep -q "'a.b' names more than one value" "$out/err" && grep -qF "['a.b'], ['a']['b']" "$out/err" ||
  fail "--flatten names both: $(cat "$out/err")"
[ ! -e "$out/collide.safetensors" ] || fail "a refused --flatten left a file"
$tstor convert --select a.b "$out/collide.pt" "$out/x.pt" 2> "$out/err"; st=$?
[ $st -eq 1 ] && grep -q "names more than one value" "$out/err" || fail "--select of a shared name: $st"
for pick in "['a.b']:0.0" "['a']['b']:10.0" "['x[0]']:20.0" "['x'][0]:30.0"; do
  $tstor convert --select "${pick%:*}" --flatten "$out/collide.pt" "$out/one.safetensors" ||
    fail "--select ${pick%:*}: exit $?"
  python3 - "$out/one.safetensors" "${pick##*:}" <<'PY' || fail "--select ${pick%:*} took the wrong tensor"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = {k: v for k, v in json.loads(raw[8:8 + n]).items() if k != "__metadata__"}
assert list(h) == ["$"], h
start = 8 + n + h["$"]["data_offsets"][0]
first = struct.unpack("<f", raw[start:start + 4])[0]
assert first == float(sys.argv[2]), (first, sys.argv[2])
PY
done
$tstor convert --flatten --select a "$out/collide.pt" "$out/sub.safetensors" || fail "--flatten under --select a"

# every message that quotes the file is escaped: safetensors refuses two
# names that share a storage, and quotes them
python3 "$dir/craft_pt.py" control "$out/control.pt" || fail "writing control.pt"
$tstor convert "$out/control.pt" "$out/control.safetensors" 2> "$out/err"; st=$?
[ $st -eq 1 ] || fail "control.pt into safetensors: exit $st"
grep -q "share a storage" "$out/err" || fail "control.pt message: $(cat "$out/err")"
if LC_ALL=C grep -q "$(printf '[\001-\010\013-\037\177]')" "$out/err"; then
  fail "a control character reached a convert message: $(od -c "$out/err" | head)"
fi
grep -qF 'evil\x1b[2K\x0dname' "$out/err" || fail "the name escaped: $(cat "$out/err")"

# a 500 KB file naming one tensor 60000 times under 200 keys of 1000
# characters (24 GB of names spelled out; inspect needed 3 GB and printed
# nothing in 30 s): listed up to the names' budget, which it says
python3 "$dir/craft_pt.py" amplify "$out/amplify.pt" || fail "writing amplify.pt"
timeout 120 $tstor inspect --json "$out/amplify.pt" > "$out/amp.json" 2> "$out/err"; st=$?
[ $st -eq 0 ] || fail "inspect amplify.pt: exit $st (124: it ran for minutes)"
grep -q "listed [0-9]* values and stopped: .*the names of the values pass 67108864 bytes" "$out/err" ||
  fail "the cut is not said: $(cat "$out/err")"
python3 - "$out/amp.json" <<'PY' || fail "amplify.pt's listing"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["complete"] is False
assert 0 < len(d["tensors"]) < 200, len(d["tensors"])
assert all(t["name"].count(".") == 199 and t["name"].endswith("[%d]" % i) for i, t in enumerate(d["tensors"]))
PY
# and the same bound against a legitimate large tree: 120000 tensors nested
# eight deep in a 7 MB file, listed whole
python3 "$dir/craft_pt.py" model "$out/model.pt" || fail "writing model.pt"
$tstor inspect --json "$out/model.pt" > "$out/model.json" 2> "$out/err" || fail "inspect model.pt: exit $?"
[ ! -s "$out/err" ] || fail "inspect model.pt complained: $(cat "$out/err")"
python3 - "$out/model.json" <<'PY' || fail "model.pt's listing"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["complete"] is True and len(d["tensors"]) == 120000, len(d["tensors"])
last = "model.encoder.modules[999].modules[19].modules[0].attention.output.gradBias"
assert d["tensors"][-1]["name"] == last, d["tensors"][-1]["name"]
PY
rm -f "$out/model.pt" "$out/model.json"
timeout 120 $tstor convert --flatten "$out/amplify.pt" "$out/amp.safetensors" 2> "$out/err"; st=$?
[ $st -eq 1 ] && grep -q "the names of the values pass" "$out/err" || fail "--flatten past the budget: $st"
if /usr/bin/python3 -c 'import torch' 2> /dev/null; then
  /usr/bin/python3 - "$out" <<'PY' || fail "PyTorch reads the crafted files"
import sys, torch
d = torch.load(sys.argv[1] + "/collide.pt", weights_only=True)
assert d["a.b"].tolist() == [0, 1] and d["a"]["b"].tolist() == [10, 11] and d["x"][0].tolist() == [30, 31]
a = torch.load(sys.argv[1] + "/amplify.pt", weights_only=True)
for _ in range(200):
    (a,) = a.values()
assert len(a) == 60000 and a[0] is a[-1]
PY
fi

# Torch7: listed, and converted to .pt and back
t7=${srcdir:-.}/t7/torch7-written
$tstor inspect "$t7/gmodule_with_linear_identity.t7" > "$out/g.txt" || fail "inspect .t7"
grep -q ': Torch7 file, 11 tensors, 4 storages' "$out/g.txt" || fail "Torch7 title: $(head -1 "$out/g.txt")"
grep -q '^\$  *object  *nn.gModule version 1$' "$out/g.txt" || fail "the root object"
$tstor convert "$t7/doubletensor.t7" "$out/dt.pt" || fail ".t7 to .pt"
$tstor convert "$out/dt.pt" "$out/dt.t7" || fail ".pt to .t7"
cmp -s "$out/dt.t7" "$t7/doubletensor.t7" || fail "a .t7 through .pt and back is not the same bytes"
$tstor convert "$t7/list_table.t7" "$out/list.pt" || fail "a table to .pt"

# safetensors -> .pt, which PyTorch reads
$tstor convert "$out/s.safetensors" "$out/back.pt" || fail "safetensors to .pt"
$tstor convert "$dir/golden/module_mlp.pt" "$out/mlp.safetensors" || fail "module to safetensors"
$tstor convert "$out/mlp.safetensors" "$out/mlp.pt" || fail "and back"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  /usr/bin/python3 - "$out" "$dir/golden/module_mlp.pt" <<'PY' || fail "PyTorch reads the converted files"
import sys, torch
out, orig = sys.argv[1], sys.argv[2]
a = torch.load(out + "/back.pt", weights_only=True)
assert torch.equal(a["c"], a["base"].view(6, 5).t()), "values"
m, o = torch.load(out + "/mlp.pt", weights_only=True), torch.load(orig)
assert list(m) == sorted(o, key=lambda k: (-o[k].element_size(), k)) or set(m) == set(o)
for k in o:
    assert torch.equal(m[k], o[k]), k
t = torch.load(out + "/dt.pt", weights_only=True)
assert t.dtype == torch.float64 and t.tolist() == [[1, 2, 3], [4, 5, 6.9]], t
assert torch.load(out + "/list.pt", weights_only=True) == {1: "hello", 2: "world", 3: "third item", 4: 123}
PY
fi
echo "cli: inspect and convert behave"
