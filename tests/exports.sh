#!/bin/sh
# libtstor.so's ABI is the tstor_* functions declared in the installed headers
# (core/include/tstor/, each with TSTOR_EXTERN), and nothing else: no test
# hook (tstor__fault_*, which the suites reach through libtstor_test.la), no
# internal, no stray global. Both ways: every declared function is exported.
set -eu
top=${srcdir:-.}/..
lib=${top_builddir:-..}/core/.libs/libtstor.so
if [ ! -f "$lib" ]; then
  echo "SKIP: no shared $lib (built with --disable-shared?)"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tstor-exports.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

grep -h '^TSTOR_EXTERN' "$top"/core/include/tstor/*.h | sed 's/(.*//; s/.*[ *]//' | sort -u \
  > "$tmp/declared"
nm -D --defined-only "$lib" | awk '{ print $NF }' | sed 's/@.*//' | sort -u > "$tmp/exported"

status=0
if ! grep -q '^tstor_context_open$' "$tmp/declared"; then
  echo "FAIL: no declarations found in $top/core/include/tstor"
  exit 1
fi
extra=$(comm -13 "$tmp/declared" "$tmp/exported")
if [ -n "$extra" ]; then
  echo "FAIL: $lib exports symbols no installed header declares:"
  echo "$extra" | sed 's/^/  /'
  status=1
fi
missing=$(comm -23 "$tmp/declared" "$tmp/exported")
if [ -n "$missing" ]; then
  echo "FAIL: declared in the installed headers but not exported by $lib:"
  echo "$missing" | sed 's/^/  /'
  status=1
fi
if [ "$status" -eq 0 ]; then
  echo "libtstor.so exports exactly the $(wc -l < "$tmp/declared") functions the headers declare"
fi
exit $status
