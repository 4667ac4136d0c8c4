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

# check LIB HEADER...: LIB exports exactly the functions the headers declare.
check() {
  lib=$1
  shift
  grep -h '^TSTOR_EXTERN' "$@" | sed 's/(.*//; s/.*[ *]//' | sort -u > "$tmp/declared"
  nm -D --defined-only "$lib" | awk '{ print $NF }' | sed 's/@.*//' | sort -u > "$tmp/exported"
  if [ ! -s "$tmp/declared" ]; then
    echo "FAIL: no declarations found in $*"
    return 1
  fi
  ok=0
  extra=$(comm -13 "$tmp/declared" "$tmp/exported")
  if [ -n "$extra" ]; then
    echo "FAIL: $lib exports symbols no installed header declares:"
    echo "$extra" | sed 's/^/  /'
    ok=1
  fi
  missing=$(comm -23 "$tmp/declared" "$tmp/exported")
  if [ -n "$missing" ]; then
    echo "FAIL: declared in the installed headers but not exported by $lib:"
    echo "$missing" | sed 's/^/  /'
    ok=1
  fi
  [ "$ok" -ne 0 ] || echo "$lib exports exactly the $(wc -l < "$tmp/declared") functions its headers declare"
  return $ok
}

# serialize.h and dlpack.h are libtstor-io's; every other header is libtstor's.
inc=$top/core/include/tstor
core_headers=$(ls "$inc"/*.h | grep -v -e '/serialize\.h$' -e '/dlpack\.h$')
status=0
# shellcheck disable=SC2086
check "$lib" $core_headers || status=1
io_lib=${top_builddir:-..}/core/io/.libs/libtstor-io.so
if [ -f "$io_lib" ]; then
  check "$io_lib" "$inc/serialize.h" "$inc/dlpack.h" || status=1
fi
exit $status
