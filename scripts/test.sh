#!/usr/bin/env bash
# One command from a fresh clone: install, build, run every test.
#   scripts/test.sh               scripts/setup.sh (packages, build/ with -Werror), the
#                                 developer tools (scripts/devtools.sh), then ctest
#   scripts/test.sh --no-setup    ctest only, in a tree that is built
#   scripts/test.sh --no-fuzz     leave the fuzz test out (it builds and runs the libFuzzer
#                                 harnesses in a clang tree of its own, build/fuzz)
# Environment: BUILD_DIR (build); MEMTOOL_CI_COUNTS, a file that gets a line
# "default PASSED SKIPPED FAILED".
set -euo pipefail
cd "$(dirname "$0")/.."
setup=1
exclude=()
for arg in "$@"; do
    case "$arg" in
        --no-setup) setup=0 ;;
        --no-fuzz) exclude=(-LE '^fuzz$') ;;
        *)
            echo "test: unknown option '$arg' (use --no-setup, --no-fuzz)" >&2
            exit 2
            ;;
    esac
done
BUILD_DIR=${BUILD_DIR:-build}
if ((setup)); then
    scripts/setup.sh
    # lizard for the function-length test; without a network it skips.
    scripts/devtools.sh || echo "test: scripts/devtools.sh failed: the lint tests that need it skip" >&2
fi
# --timeout: a test with no limit of its own that hangs fails after 10 minutes, where
# one used to hold a slot until CI ended the whole run.
log=$BUILD_DIR/Testing/ci-ctest.log
mkdir -p "$(dirname "$log")"
status=0
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 600 -j "$(nproc)" "${exclude[@]}") 2>&1 | tee "$log" || status=1
[ -z "${MEMTOOL_CI_COUNTS:-}" ] || echo "default $(scripts/ctest-counts.sh "$log")" >>"$MEMTOOL_CI_COUNTS"
exit $status
