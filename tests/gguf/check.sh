#!/bin/sh
# tstor reads every golden and crafted GGUF file as GGUFReader does: what
# gguf_describe prints (read, mapped, and from a borrowed buffer, the
# quantized tensors dequantized too) is the committed description that
# describe.py printed from GGUFReader and gguf.quants (generate.sh), line for
# line: every metadata value, every tensor's type, shape, offset and bytes,
# and every dequantized value, bit for bit.
set -eu
dir=${srcdir:-.}/gguf
describe=${builddir:-.}/gguf_describe
status=0
n=0
for txt in "$dir"/golden/*.txt "$dir"/crafted/*.txt "$dir"/real/*.txt; do
  [ -f "$txt" ] || continue
  [ -f "${txt%.txt}.refused" ] && continue
  f=${txt%.txt}.gguf
  for how in --read --mmap --buffer; do
    mode=$how
    [ "$how" = --read ] && mode=
    # shellcheck disable=SC2086
    if ! "$describe" --dequantize $mode "$f" > describe.out 2> describe.err ||
       ! cmp -s describe.out "$txt"; then
      echo "FAIL: ${f#"$dir"/} ($how) is not read as GGUFReader reads it:"
      diff "$txt" describe.out | head -20
      cat describe.err
      status=1
    fi
    n=$((n + 1))
  done
done
# Real files that GGUFReader reads and tstor refuses, as ggml's own loader
# does (real/SOURCES says why): NAME.refused holds the words of the refusal.
for want in "$dir"/real/*.refused; do
  [ -f "$want" ] || continue
  f=${want%.refused}.gguf
  "$describe" "$f" > describe.out 2> describe.err || true
  if ! grep -q '^refused ' describe.out || ! grep -qF "$(cat "$want")" describe.err; then
    echo "FAIL: ${f#"$dir"/} is not refused with '$(cat "$want")':"
    cat describe.err
    status=1
  fi
  n=$((n + 1))
done
rm -f describe.out describe.err
echo "gguf: $n loads of the golden, crafted and real files, each as GGUFReader reads it or as listed"
exit $status
