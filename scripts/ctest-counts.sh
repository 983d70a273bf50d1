#!/usr/bin/env bash
# Reads a ctest log and prints "PASSED SKIPPED FAILED": the tests that passed, those
# skipped or not run (a SKIP_RETURN_CODE, a GTEST_SKIP, a disabled test), those that
# failed. .ci/run adds them up over its phases.
#   scripts/ctest-counts.sh LOG
set -euo pipefail
log=$1
# "100% tests passed out of 3" (CMake 4), "...passed, 0 tests failed out of 3", "90%
# tests passed, 1 tests failed out of 10"
summary=$(grep -E '^[0-9]+% tests passed(, [0-9]+ tests? failed)? out of [0-9]+' "$log" | tail -1 || true)
if [ -z "$summary" ]; then
    echo "0 0 0"
    exit 0
fi
total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$summary")
failed=0
[[ ! $summary =~ ([0-9]+)\ tests?\ failed ]] || failed=${BASH_REMATCH[1]}
skipped=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*(Skipped|Not Run)' "$log" || true)
echo "$((total - failed - skipped)) $skipped $failed"
