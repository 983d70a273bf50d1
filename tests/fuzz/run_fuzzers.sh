#!/usr/bin/env bash
# Runs each libFuzzer harness over its seed corpus for RUNS inputs, seeded, so that a
# run is repeatable. New inputs go to a scratch directory, never into the checked-in
# corpus; a crash's input is kept in FUZZ_TREE/artifacts/ and the test fails.
# The harnesses come from FUZZ_TREE, a clang tree configured with MEMTOOL_FUZZ=ON and
# MEMTOOL_SANITIZE=address,undefined: --fuzz-tree DIR (or MEMTOOL_FUZZ_TREE) names
# one (such a tree configured with the tests passes its own); without it,
# BUILD_DIR/fuzz is made (fuzzers only; the first time takes a few minutes, later ones
# rebuild what changed).
# usage: run_fuzzers.sh SOURCE_DIR BUILD_DIR [--fuzz-tree DIR] [RUNS]
# Exits 77 (CTest: skipped) when there is no clang++ that links libFuzzer.
set -euo pipefail
src=$1 build=$2
shift 2
tree=${MEMTOOL_FUZZ_TREE:-}
if [ "${1:-}" = --fuzz-tree ]; then
    tree=$2
    shift 2
fi
runs=${1:-20000}
cxx=${MEMTOOL_FUZZ_CXX:-clang++} cc=${MEMTOOL_FUZZ_CC:-clang}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
if ! command -v "$cxx" >/dev/null; then
    echo "fuzz: skipped: no $cxx (Debian: apt-get install clang)"
    exit 77
fi
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
    >"$scratch/probe.cpp"
if ! "$cxx" -fsanitize=fuzzer "$scratch/probe.cpp" -o "$scratch/probe" 2>"$scratch/probe.err"; then
    echo "fuzz: skipped: $cxx cannot link libFuzzer (-fsanitize=fuzzer): $(head -1 "$scratch/probe.err")"
    exit 77
fi

if [ -n "$tree" ]; then
    dir=$tree
    grep -q '^MEMTOOL_FUZZ:BOOL=ON' "$dir/CMakeCache.txt" 2>/dev/null ||
        { echo "fuzz: $dir is not a tree configured with -DMEMTOOL_FUZZ=ON" >&2; exit 1; }
else
    dir=$build/fuzz
    if [ ! -f "$dir/CMakeCache.txt" ]; then
        cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" -DMEMTOOL_FUZZ=ON \
            -DMEMTOOL_SANITIZE=address,undefined -DMEMTOOL_BUILD_TESTS=OFF -DMEMTOOL_UNITY_BUILD=ON \
            -DMEMTOOL_BUILD_LIBTORCH_SAMPLE=OFF -DMEMTOOL_CUDA=OFF >/dev/null
    fi
fi
# Up to date already in a tree that was just built; else what changed.
cmake --build "$dir" --target stream_fuzzer trace_fuzzer events_fuzzer
mkdir -p "$dir/artifacts"

status=0
for name in stream trace events; do
    mkdir "$scratch/$name"
    dict=()
    [ ! -f "$src/tests/fuzz/$name.dict" ] || dict=(-dict="$src/tests/fuzz/$name.dict")
    echo "fuzz: $name, $runs inputs from tests/fuzz/corpus/$name" >&2
    if ! "$dir/bin/${name}_fuzzer" -runs="$runs" -seed=1 -max_len=65536 "${dict[@]}" \
        -artifact_prefix="$dir/artifacts/$name-" -print_final_stats=1 \
        "$scratch/$name" "$src/tests/fuzz/corpus/$name" 2>"$scratch/$name.log"; then
        tail -60 "$scratch/$name.log" >&2
        status=1
    fi
    grep -E "^(Done|stat::number_of_executed_units|INFO: seed corpus)" "$scratch/$name.log" >&2 || true
done
exit "$status"
