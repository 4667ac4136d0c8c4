#!/bin/sh
# tstor convert --state-dict on a Lua model and on a real nngraph gModule
# (corpus/), judged by PyTorch 2.x and torchfile (t7/state_dict_check.py says
# how); then what a user meets on the way: the refusals of a plain convert
# name --state-dict, and a table root asks for --select. Skipped (77) without
# the Python references.
set -u
tstor=${top_builddir:-..}/tools/tstor
PY=${TSTOR_PYREF_PYTHON:-}
if [ -z "$PY" ] || [ ! -x "$PY" ]; then
  echo "SKIP: no Python references (tests/pyref/install.sh): torch 2.x and torchfile judge this test"
  exit 77
fi
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$PY" "${srcdir:-.}/t7/state_dict_check.py" "$tstor" "$out" \
  "${srcdir:-.}/corpus/files/torchfile-gmodule_with_linear_identity.t7" || fail "the migrated models"
$tstor convert "$out/model.t7" "$out/plain.pt" 2> "$out/err" && fail "a network into .pt without --state-dict"
grep -q -- "--state-dict" "$out/err" || fail "the .pt refusal does not name --state-dict: $(cat "$out/err")"
$tstor convert "$out/model.t7" "$out/plain.safetensors" 2> "$out/err" && fail "a network into safetensors"
grep -q -- "--state-dict" "$out/err" || fail "the safetensors refusal: $(cat "$out/err")"
# a checkpoint table (char-rnn's {protos = ..., opt = ...}) needs the model selected
"$PY" - "$out/ckpt.t7" "${srcdir:-.}/t7" <<'PY' || fail "writing ckpt.t7"
import sys
sys.path.insert(0, sys.argv[2])
import gen_t7
from gen_t7 import T7Object, T7Tensor, T7Storage
lin = T7Object('nn.Linear', 1, {'weight': T7Tensor('Float', [1, 2], [2, 1], 1, T7Storage('Float', [1, 2])),
                                'bias': T7Tensor('Float', [1], [1], 1, T7Storage('Float', [3]))})
open(sys.argv[1], 'wb').write(gen_t7.write({'protos': {'rnn': lin}, 'epoch': 3}))
PY
$tstor convert --state-dict "$out/ckpt.t7" "$out/x.pt" 2> "$out/err" && fail "a table root converted"
grep -q -- "--select the model first" "$out/err" || fail "the table root's message: $(cat "$out/err")"
$tstor convert --select protos.rnn --state-dict "$out/ckpt.t7" "$out/rnn.pt" || fail "--select protos.rnn --state-dict"
"$PY" -c "import sys, torch; sd = torch.load(sys.argv[1], weights_only=True); assert list(sd) == ['weight', 'bias'], list(sd)" \
  "$out/rnn.pt" || fail "the selected module's state_dict"
echo "state-dict: a Lua model migrates to PyTorch"
