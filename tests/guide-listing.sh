#!/bin/sh
# docs/backend-guide.md shows docs/examples/minimal-backend.c in full; the file
# is what test_guide_example and conformance.sh build and load. This keeps the
# listing identical to the file, and the file under 150 lines, so the guide
# cannot rot.
set -eu
top=${srcdir:-.}/..
guide=$top/docs/backend-guide.md
example=$top/docs/examples/minimal-backend.c
listing=$(mktemp "${TMPDIR:-/tmp}/guide-listing.XXXXXX") || exit 99
trap 'rm -f "$listing"' EXIT

awk '/^<!-- listing: docs\/examples\/minimal-backend.c/ { marked = 1; next }
     marked && !inside && /^```c$/ { inside = 1; next }
     inside && /^```$/ { exit }
     inside { print }' "$guide" > "$listing"

if [ ! -s "$listing" ]; then
  echo "FAIL: no listing of docs/examples/minimal-backend.c in $guide"
  exit 1
fi
if ! diff -u "$example" "$listing"; then
  echo "FAIL: the guide's listing differs from $example (diff above: - file, + guide)"
  exit 1
fi
lines=$(wc -l < "$example")
if [ "$lines" -ge 150 ]; then
  echo "FAIL: $example has $lines lines; the guide promises under 150"
  exit 1
fi
echo "ok: the guide shows $example as it is ($lines lines)"
