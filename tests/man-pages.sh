#!/bin/sh
# The manual pages say what the program says: every command of `tstor --help`
# has a section in tstor(1) and the reverse, and every option of
# `tstor COMMAND --help` appears in that command's section and the reverse.
# Each page is formatted by man's own formatter without a warning.
set -eu
tstor=${top_builddir:-..}/tools/tstor
man=${srcdir:-.}/../docs/man
fail() { echo "FAIL: $*"; exit 1; }

for page in tstor.1 tstor.ini.5 tstor.3; do
  warnings=$(groff -man -Tutf8 -ww -z "$man/$page" 2>&1) || fail "$page does not format"
  [ -z "$warnings" ] || fail "$page: $warnings"
done

options() { grep -o -- '--[a-z][a-z0-9-]*' | sort -u; }
# The man page's text for one command: from its .SS lines to the next command
# or section, with roff's \- as -.
section() {
  sed 's/\\-/-/g' "$man/tstor.1" |
    awk -v cmd="$1" '/^\.SH/ { inside = 0 }
      /^\.SS tstor / { inside = ($3 == cmd) }
      inside'
}

commands=$("$tstor" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }')
[ -n "$commands" ] || fail "tstor --help lists no commands"
paged=$(sed -n 's/^\.SS tstor \([a-z]*\).*/\1/p' "$man/tstor.1" | sort -u)
[ "$(echo "$commands" | sort -u)" = "$paged" ] ||
  fail "commands in tstor --help: $(echo $commands); in tstor(1): $(echo $paged)"

for cmd in $commands; do
  help=$("$tstor" "$cmd" --help | options | grep -vx -- --help || true)
  page=$(section "$cmd" | options)
  missing=$(printf '%s\n' "$help" | grep -vxF -e "$page" || true)
  extra=$(printf '%s\n' "$page" | grep -vxF -e "$help" || true)
  [ -z "$missing" ] || fail "tstor $cmd --help has options tstor(1) lacks: $(echo $missing)"
  [ -z "$extra" ] || fail "tstor(1) gives tstor $cmd options its --help lacks: $(echo $extra)"
done
for opt in --help --version; do
  "$tstor" --help | grep -q -- "$opt" || fail "tstor --help lacks $opt"
  sed 's/\\-/-/g' "$man/tstor.1" | grep -q -- "$opt" || fail "tstor(1) lacks $opt"
done
echo "man pages: tstor(1) matches every --help; the pages format cleanly"
