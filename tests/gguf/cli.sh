#!/bin/sh
# tstor inspect and tstor convert on GGUF files: quantized types and metadata
# listed (a vocabulary cut short, whole in --json), quantized tensors refused
# by the formats without quantized types unless --dequantize, GGUF to GGUF
# the same file, and GGUF from the other formats.
set -u
tstor=../tools/tstor
dir=${srcdir:-.}/gguf
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

$tstor inspect "$dir/golden/quant.gguf" > "$out/q.txt" || fail "inspect exit $?"
grep -q '^r\.Q4_K  *Q4_K  *\[2, 512\]  *-  ' "$out/q.txt" || fail "a Q4_K line: $(head -5 "$out/q.txt")"
grep -q 'quant.gguf: GGUF file, 33 tensors, 33 storages$' "$out/q.txt" || fail "the title"
$tstor inspect "$dir/golden/metadata.gguf" > "$out/m.txt" || fail "inspect metadata exit $?"
grep -q "^  tokenizer.ggml.tokens (arr\[str\]): \['<unk>', '<s>', .*, \.\.\. 3005 items\]$" "$out/m.txt" ||
  fail "the vocabulary, cut: $(grep tokens "$out/m.txt")"
grep -q '^  t.uint64.hi (u64): 18446744073709551615$' "$out/m.txt" || fail "a u64 past int64"
$tstor inspect --json "$dir/golden/metadata.gguf" > "$out/m.json" || fail "inspect --json exit $?"
grep -q '"t5xx"\|"tok2999"' "$out/m.json" || fail "--json holds the whole vocabulary"
grep -q '"tokenizer.ggml.tokens": "arr\[str\]"' "$out/m.json" || fail "--json's metadata types"

# quantized tensors into safetensors: refused, saying what to do, then done
$tstor convert "$dir/golden/quant.gguf" "$out/q.safetensors" 2> "$out/err" && fail "quantized into safetensors"
grep -q -- '--dequantize' "$out/err" || fail "the refusal names --dequantize: $(cat "$out/err")"
[ ! -e "$out/q.safetensors" ] || fail "a refused convert left a file"
$tstor convert --dequantize "$dir/golden/quant.gguf" "$out/q.safetensors" || fail "--dequantize"
$tstor inspect "$out/q.safetensors" | grep -q '^r\.Q4_K  *float32  *\[2, 512\]' || fail "dequantized"
$tstor convert --dequantize=bfloat16 "$dir/golden/quant.gguf" "$out/q.pt" || fail "--dequantize=bfloat16"
$tstor inspect "$out/q.pt" | grep -q '^r\.IQ2_S  *bfloat16  *\[2, 512\]' || fail "bfloat16"
$tstor convert --dequantize=int8 "$dir/golden/quant.gguf" "$out/x.pt" 2> /dev/null
[ $? = 2 ] || fail "--dequantize=int8 is bad usage"

# GGUF to GGUF: the same file; through safetensors and back: the same tensors
for f in metadata plain quant; do
  $tstor convert "$dir/golden/$f.gguf" "$out/$f.gguf" || fail "$f to GGUF"
  cmp -s "$dir/golden/$f.gguf" "$out/$f.gguf" || fail "$f.gguf written again is another file"
done
$tstor convert "$dir/golden/plain.gguf" "$out/p.safetensors" 2> /dev/null || fail "plain to safetensors"
$tstor convert "$out/p.safetensors" "$out/p.gguf" || fail "safetensors to GGUF"
$tstor inspect "$out/p.gguf" | grep -q '^F32\.2x3x4  *float32  *\[2, 3, 4\]' || fail "read back"
# a nested checkpoint goes in flattened
$tstor convert "${srcdir:-.}/ckpt/golden/checkpoint_nested.pt" "$out/n.gguf" 2> /dev/null &&
  fail "a nested tree into GGUF"
$tstor convert --flatten "${srcdir:-.}/ckpt/golden/checkpoint_nested.pt" "$out/n.gguf" 2> /dev/null ||
  fail "--flatten into GGUF"
echo "gguf: inspect and convert passed"
