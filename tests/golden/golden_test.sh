#!/usr/bin/env bash
# One golden case of memtool report, check or diff (tests/golden/cases): runs
# memtool in tests/golden, so that the fixtures' relative paths (traces/,
# src/ for --lines) hold wherever the repository is, and compares its whole
# stdout with expected/NAME.out, byte for byte; stderr must be empty and the
# exit status the one the case names. CTest runs every case (label golden).
#
# Re-blessing on purpose, after a change that is meant to change output:
#     MEMTOOL_BLESS=1 ctest --test-dir build -L golden
# rewrites expected/*.out from what memtool prints now; review the diff
# (git diff tests/golden/expected) and check its numbers before committing.
#
# Usage: golden_test.sh MEMTOOL NAME
set -euo pipefail
memtool=$1
name=$2
cd "$(dirname "$0")"

line=$(grep -E "^${name}[[:space:]]" cases) || { echo "golden: no case '$name' in cases" >&2; exit 2; }
read -r _ want args <<<"$line"
read -ra argv <<<"$args"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
"$memtool" "${argv[@]}" >"$out/stdout" 2>"$out/stderr" || status=$?

failed=0
if [ "$status" != "$want" ]; then
  echo "golden $name: exit status $status, expected $want" >&2
  failed=1
fi
if [ -s "$out/stderr" ]; then
  echo "golden $name: stderr is not empty:" >&2
  cat "$out/stderr" >&2
  failed=1
fi
expected="expected/$name.out"
if [ "${MEMTOOL_BLESS:-0}" = 1 ]; then
  cp "$out/stdout" "$expected"
  echo "golden $name: blessed $expected" >&2
elif ! cmp -s "$out/stdout" "$expected"; then
  echo "golden $name: stdout differs from $expected (- expected, + now):" >&2
  diff -u "$expected" "$out/stdout" >&2 || true
  failed=1
fi
exit "$failed"
