#!/usr/bin/env bash
# Checks (default) or applies (--fix) .clang-format on every C++ file git
# tracks (headers and sources, tests, tools, bench, fuzz, python/src); CI runs
# the check (.ci/run).
# Usage: bash scripts/format.sh [--fix]
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT="${CLANG_FORMAT:-clang-format-14}"
# Every C++ file that git tracks, and new ones it does not ignore.
mapfile -t FILES < <(git ls-files --cached --others --exclude-standard '*.cc' '*.h')
if [ "${1:-}" = "--fix" ]; then
  "$CLANG_FORMAT" -i "${FILES[@]}"
  echo "format: ${#FILES[@]} files formatted"
else
  "$CLANG_FORMAT" --dry-run -Werror "${FILES[@]}"
  echo "format: ${#FILES[@]} files follow .clang-format"
fi
