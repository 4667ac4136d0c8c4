#!/bin/sh
# Every writer's output read back by the format's reference: each corpus file
# and each golden checkpoint, converted by `tstor convert` into torch.save,
# safetensors (--flatten --copy) and Torch7, then read by torch 2.x, the
# safetensors package and torchfile (read_back.py says how each is judged).
# Skipped (77) without the pyref environment.
dir=${srcdir:-.}
tstor=../tools/tstor
PY=${TSTOR_PYREF_PYTHON:-$(sh "$dir/pyref/install.sh" --find)} || {
  echo "no pyref environment (tests/pyref/install.sh): not read back"
  exit 77
}
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
n=0
for src in "$dir"/corpus/files/* "$dir"/ckpt/golden/*.pt; do
  $tstor inspect "$src" > /dev/null 2>&1 || continue # refused on reading: test_corpus's part
  name=${src##*/}
  for ext in pt safetensors t7; do
    flags=
    [ $ext = safetensors ] && flags="--flatten --copy"
    # shellcheck disable=SC2086
    $tstor convert $flags "$src" "$out/$name.$ext" > /dev/null 2> "$out/err" ||
      { [ ! -e "$out/$name.$ext" ] || { echo "$name.$ext: a refused convert left a file"; exit 1; }
        cp "$out/err" "$out/$name.$ext.refused"; }
    n=$((n + 1))
  done
  set -- "$@" "$src"
done
echo "$n conversions"
"$PY" "$dir/corpus/read_back.py" "$out" "$@"
