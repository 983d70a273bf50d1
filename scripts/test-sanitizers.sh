#!/usr/bin/env bash
# The tests once more under sanitizers, in two trees:
# - build-asan/: clang, ASan+UBSan, with the libFuzzer harnesses (MEMTOOL_FUZZ): the
#   unit tests, the golden outputs and the fuzz test in this tree, then the e2e tests
#   labelled asan (the suites that drive the CLI's own code: tests/CMakeLists.txt) from
#   the default tree's e2e_tests against this tree's memtool (E2E_MEMTOOL_BIN). The e2e
#   driver links none of memtool's code, so this tree builds only the CLI, what it
#   injects, the unit tests and the fuzzers. Three CfiUnwinder tests that count gcc's
#   code run in the gcc trees only (tests/CMakeLists.txt).
# - build-tsan/: gcc, TSan, for engine_tests and the symbolizers' tests of cli_unit_tests.
# memtool's own processes are instrumented, the libraries injected into targets are not
# (see cmake/MemtoolSanitize.cmake). Any sanitizer report fails the run. Both trees
# compile in batches (MEMTOOL_UNITY_BUILD). Expects the packages of scripts/setup.sh
# (clang among them) and, for asan-test, the default tree built (BUILD_DIR); .ci/run
# runs it after scripts/test.sh --no-fuzz.
#   scripts/test-sanitizers.sh [STEP...]   steps: asan-build asan-test tsan (default: all three)
# Environment: JOBS (nproc), BUILD_DIR (build), ASAN_DIR (build-asan), TSAN_DIR
# (build-tsan), MEMTOOL_WERROR (ON), MEMTOOL_CI_COUNTS (a file that gets "asan PASSED
# SKIPPED FAILED" and "tsan PASSED 0 0").
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
# at -g; the sources whose debug info a test reads back set -g themselves
# (tests/CMakeLists.txt, cli/InlinedCode.cpp).
configure() {  # DIR SANITIZERS [extra cmake options]
    local dir=$1 sanitizers=$2
    shift 2
    if [ ! -f "$dir/CMakeCache.txt" ]; then
        cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMTOOL_SANITIZE="$sanitizers" \
            "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
            -DMEMTOOL_WERROR="${MEMTOOL_WERROR:-ON}" -DMEMTOOL_UNITY_BUILD=ON "$@" >/dev/null
    fi
}

# The LibTorch sample and test programs serve only e2e tests that are not labelled
# asan; CUDA stays AUTO, as in the default tree, so the CUPTI decoder's unit tests run.
# memtool brings what it injects (the collector, the torch bridge, the CUPTI injection).
ASAN_DIR=${ASAN_DIR:-build-asan}
BUILD_DIR=${BUILD_DIR:-build}
asan_build() {
    echo "sanitizers: address,undefined in $ASAN_DIR (clang, with the fuzzers)" >&2
    command -v clang++ >/dev/null ||
        { echo "test-sanitizers: no clang++ (Debian: apt-get install clang; scripts/setup.sh does)" >&2; return 1; }
    if [ -f "$ASAN_DIR/CMakeCache.txt" ] && ! grep -q '^MEMTOOL_FUZZ:BOOL=ON' "$ASAN_DIR/CMakeCache.txt"; then
        echo "sanitizers: $ASAN_DIR is an older gcc tree: made anew with clang" >&2
        rm -rf "$ASAN_DIR"
    fi
    configure "$ASAN_DIR" address,undefined -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
        -DMEMTOOL_FUZZ=ON -DMEMTOOL_BUILD_LIBTORCH_SAMPLE=OFF
    cmake --build "$ASAN_DIR" -j "$JOBS" --target memtool unit_tests engine_tests cli_unit_tests \
        stream_fuzzer trace_fuzzer
}
asan_test() {
    local log=$ASAN_DIR/Testing/ci-ctest.log e2e_log=$ASAN_DIR/Testing/ci-ctest-e2e.log status=0 memtool
    [ -x "$BUILD_DIR/bin/e2e_tests" ] ||
        { echo "test-sanitizers: asan-test runs $BUILD_DIR/bin/e2e_tests: build $BUILD_DIR first" >&2; return 1; }
    mkdir -p "$(dirname "$log")"
    memtool=$(cd "$ASAN_DIR" && pwd)/bin/memtool
    (cd "$ASAN_DIR" && ctest --output-on-failure --timeout 600 -j "$JOBS" -L 'unit|golden|fuzz') 2>&1 | tee "$log" || status=1
    (cd "$BUILD_DIR" && E2E_MEMTOOL_BIN=$memtool ctest --output-on-failure --timeout 600 -j "$JOBS" -L asan) 2>&1 |
        tee "$e2e_log" || status=1
    if [ -n "${MEMTOOL_CI_COUNTS:-}" ]; then
        read -r p1 s1 f1 < <(scripts/ctest-counts.sh "$log")
        read -r p2 s2 f2 < <(scripts/ctest-counts.sh "$e2e_log")
        echo "asan $((p1 + p2)) $((s1 + s2)) $((f1 + f2))" >>"$MEMTOOL_CI_COUNTS"
    fi
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
