#!/bin/sh
# The lines of C and C++ changed since .clang-format was committed are as
# clang-format writes them (older lines are left as they are, so that a
# reformat never buries a change in noise). Run from a git checkout; outside
# one (a release tarball) there are no changes to check, and it says so.
#
#   tests/format-check.sh [BASE]    BASE: the commit to compare with (default:
#                                   the one that added .clang-format)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
if ! git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  echo "format-check: not a git checkout: nothing to compare"
  exit 77
fi
if ! command -v git-clang-format > /dev/null 2>&1; then
  echo "format-check: git-clang-format not found (install-deps.sh installs clang-format)"
  exit 1
fi
base=${1:-$(git log --diff-filter=A --format=%H -- .clang-format | tail -1)}
# The work tree against BASE: committed and uncommitted changes alike.
diff=$(git-clang-format --diff --extensions c,h,cc,cu "$base" -- core backends tools tests \
  bindings bench 2>&1) || true
case "$diff" in
  *"no modified files to format"* | *"clang-format did not modify any files"* | "")
    echo "format-check: every changed line since ${base%"${base#???????}"} is formatted"
    exit 0
    ;;
esac
echo "$diff"
echo "format-check: the lines above differ from clang-format's; run git-clang-format $base"
exit 1
