#!/usr/bin/env bash
# The tests once more under sanitizers, in two trees:
# - build-asan/: gcc, ASan+UBSan: the unit tests, the e2e tests labelled asan (the
#   suites that drive the CLI's own code: tests/CMakeLists.txt) and the golden outputs.
#   gcc, as the default tree: a clang tree fails the unit tests that pin what gcc's
#   code and debug info are (the CFI walk's counts, inlined frames, a GOT slot). The
#   fuzzers build their own clang tree (tests/fuzz/run_fuzzers.sh, the fuzz test).
# - build-tsan/: gcc, TSan, for engine_tests and the symbolizers' tests of cli_unit_tests.
# memtool's own processes are instrumented, the libraries injected into targets are not
# (see cmake/MemtoolSanitize.cmake). Any sanitizer report fails the run. Expects the
# packages of scripts/setup.sh; .ci/run runs it after scripts/test.sh.
#   scripts/test-sanitizers.sh [STEP...]   steps: asan-build asan-test tsan (default: all three)
# Environment: JOBS (nproc), ASAN_DIR (build-asan), TSAN_DIR (build-tsan),
# MEMTOOL_WERROR (ON), MEMTOOL_CI_COUNTS (a file that gets "asan PASSED SKIPPED FAILED"
# and "tsan PASSED 0 0").
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
steps=("$@")
((${#steps[@]})) || steps=(asan-build asan-test tsan)
for step in "${steps[@]}"; do
    case "$step" in
        asan-build | asan-test | tsan) ;;
        *)
            echo "test-sanitizers: unknown step '$step' (use asan-build, asan-test, tsan)" >&2
            exit 2
            ;;
    esac
done

# Reports are fatal (UBSan is also built with -fno-sanitize-recover) and name the frame.
# verify_asan_link_order=0: a test runs the CLI with an LD_PRELOAD of its own (to see
# it passed on), which ASan would otherwise refuse because its runtime is not first.
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:verify_asan_link_order=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

# -g1 (line tables and functions, no types or variables): a sanitizer report still
# names file:line of every frame, and the compiles cost about 40% less CPU (an ASan
# compile of reporters/Check.cpp: 49 s at -g, 29 s at -g1). The code is the same as
# at -g, so the tests that pin gcc's code hold; the sources whose debug info a test
# reads back set -g themselves (tests/CMakeLists.txt, cli/InlinedCode.cpp).
configure() {  # DIR SANITIZERS [extra cmake options]
    local dir=$1 sanitizers=$2
    shift 2
    if [ ! -f "$dir/CMakeCache.txt" ]; then
        cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMTOOL_SANITIZE="$sanitizers" \
            "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
            -DMEMTOOL_WERROR="${MEMTOOL_WERROR:-ON}" "$@" >/dev/null
    fi
}

# The LibTorch sample and test programs serve only e2e tests that are not labelled
# asan; CUDA stays AUTO, as in the default tree, so the CUPTI decoder's unit tests run.
ASAN_DIR=${ASAN_DIR:-build-asan}
asan_build() {
    echo "sanitizers: address,undefined in $ASAN_DIR" >&2
    configure "$ASAN_DIR" address,undefined -DMEMTOOL_BUILD_LIBTORCH_SAMPLE=OFF
    cmake --build "$ASAN_DIR" -j "$JOBS"
}
asan_test() {
    local log=$ASAN_DIR/Testing/ci-ctest.log status=0
    mkdir -p "$(dirname "$log")"
    (cd "$ASAN_DIR" && ctest --output-on-failure -j "$JOBS" -L 'unit|asan|golden') 2>&1 | tee "$log" || status=1
    [ -z "${MEMTOOL_CI_COUNTS:-}" ] || echo "asan $(scripts/ctest-counts.sh "$log")" >>"$MEMTOOL_CI_COUNTS"
    return $status
}

# engine_tests (tests/collectors/EngineTest.cpp) is the engine's own test; of the CLI,
# the tests of its symbolizers, whose worker thread shares object files with the
# main thread. The rest of this tree is not built. (They always run: a check for the
# target piped into `grep -q` under pipefail could lose to SIGPIPE and skip TSan.)
TSAN_DIR=${TSAN_DIR:-build-tsan}
tsan() {
    configure "$TSAN_DIR" thread -DMEMTOOL_CUDA=OFF -DMEMTOOL_BUILD_LIBTORCH_SAMPLE=OFF
    echo "sanitizers: thread in $TSAN_DIR (engine_tests, the symbolizers' tests)" >&2
    cmake --build "$TSAN_DIR" -j "$JOBS" --target engine_tests cli_unit_tests
    local log=$TSAN_DIR/ci-tsan.log
    "$TSAN_DIR/bin/engine_tests" 2>&1 | tee "$log"
    "$TSAN_DIR/bin/cli_unit_tests" --gtest_filter='ElfSymbolizer*:BackgroundSymbolizer*:ObjectFiles*' 2>&1 |
        tee -a "$log"
    [ -z "${MEMTOOL_CI_COUNTS:-}" ] ||
        echo "tsan $(awk '/^\[  PASSED  \]/ { n += $4 } END { print n + 0 }' "$log") 0 0" >>"$MEMTOOL_CI_COUNTS"
}

for step in "${steps[@]}"; do
    "${step//-/_}"
done
