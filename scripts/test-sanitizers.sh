#!/usr/bin/env bash
# The unit and end-to-end tests once more under ASan+UBSan (build-asan/), and the
# engine's and the symbolizers' tests under TSan (build-tsan/).
# memtool's own processes are instrumented, the libraries injected into targets are not (see
# cmake/MemtoolSanitize.cmake). Any sanitizer report fails the run. Expects the
# packages of scripts/setup.sh; .ci/run runs it after scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}

# Reports are fatal (UBSan is also built with -fno-sanitize-recover) and name the frame.
# verify_asan_link_order=0: a test runs the CLI with an LD_PRELOAD of its own (to see
# it passed on), which ASan would otherwise refuse because its runtime is not first.
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:verify_asan_link_order=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

configure() {  # DIR SANITIZERS [extra cmake options]
    local dir=$1 sanitizers=$2
    shift 2
    if [ ! -f "$dir/CMakeCache.txt" ]; then
        cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMTOOL_SANITIZE="$sanitizers" "$@" >/dev/null
    fi
}

ASAN_DIR=${ASAN_DIR:-build-asan}
echo "sanitizers: address,undefined in $ASAN_DIR" >&2
configure "$ASAN_DIR" address,undefined
cmake --build "$ASAN_DIR" -j "$JOBS"
(cd "$ASAN_DIR" && ctest --output-on-failure -j "$JOBS" -L 'unit|e2e')

# engine_tests (tests/collectors/EngineTest.cpp) is the engine's own test; of the CLI,
# the tests of its symbolizers, whose worker thread shares object files with the
# main thread. The rest of this tree is not built. (They always run: a check for the
# target piped into `grep -q` under pipefail could lose to SIGPIPE and skip TSan.)
TSAN_DIR=${TSAN_DIR:-build-tsan}
configure "$TSAN_DIR" thread -DMEMTOOL_CUDA=OFF -DMEMTOOL_BUILD_LIBTORCH_SAMPLE=OFF
echo "sanitizers: thread in $TSAN_DIR (engine_tests, the symbolizers' tests)" >&2
cmake --build "$TSAN_DIR" -j "$JOBS" --target engine_tests cli_unit_tests
"$TSAN_DIR/bin/engine_tests"
"$TSAN_DIR/bin/cli_unit_tests" --gtest_filter='ElfSymbolizer*:BackgroundSymbolizer*:ObjectFiles*'
