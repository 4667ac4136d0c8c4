#!/bin/sh
# Runs README.md's example and checks that it prints what its comments say.
out=$(./readme_example) || { echo "readme_example exited with $?"; exit 1; }
printf '%s\n' "$out"
first=$(printf '%s\n' "$out" | sed -n 1p)
second=$(printf '%s\n' "$out" | sed -n 2p)
[ "$first" = 42 ] || { echo "expected 42 on the first line, got '$first'"; exit 1; }
case $second in
  "TSTOR_ENODATA: "*"no data"*) ;;
  *) echo "expected 'TSTOR_ENODATA: ... no data', got '$second'"; exit 1 ;;
esac
