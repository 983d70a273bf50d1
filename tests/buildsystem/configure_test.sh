#!/usr/bin/env bash
# The build options do what they say, at configure time: MEMTOOL_CUDA=AUTO|ON|OFF
# (a missing toolkit is simulated with CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit), bad
# values get a one-line reason, and MEMTOOL_SANITIZE instruments memtool's own
# processes but no library that is injected into another program; the CLI links
# elfutils statically when every archive is there, shared otherwise.
# usage: configure_test.sh CMAKE GENERATOR SOURCE_DIR CUDA_FOUND(0|1)
# Ten configures, a minute on two cores: skipped (exit 77) when no CMakeLists.txt,
# cmake/ file or this script changed since it last passed on this machine, under a
# day ago. The stamp is outside the clone ($XDG_CACHE_HOME/memtool-ci/, else
# ~/.cache/memtool-ci/), so a fresh machine runs it; MEMTOOL_CI_ALL=1 always does.
set -euo pipefail
cmake=$1 generator=$2 src=$3 cuda_found=$4

stamp=${XDG_CACHE_HOME:-$HOME/.cache}/memtool-ci/configure_options.stamp
# What the outcome depends on: every CMakeLists.txt and cmake/ file (not in build
# trees), this script, and cmake's version.
inputs_hash() {
    (
        cd "$src"
        find . \( -path './build*' -o -path './.*' \) -prune -o \( -name CMakeLists.txt -o -path './cmake/*' \) \
            -type f -print | LC_ALL=C sort | xargs sha256sum
        sha256sum tests/buildsystem/configure_test.sh
        "$cmake" --version | head -1
    ) | sha256sum | cut -d' ' -f1
}
hash=$(inputs_hash)
if [ "${MEMTOOL_CI_ALL:-0}" != 1 ] && [ -f "$stamp" ]; then
    read -r stamp_hash stamp_time <"$stamp" || true
    if [ "${stamp_hash:-}" = "$hash" ] && (($(date +%s) - ${stamp_time:-0} < 86400)); then
        echo "configure_options: skipped: cmake files unchanged since $(date -d "@$stamp_time" '+%F %T'); MEMTOOL_CI_ALL=1 runs it"
        exit 77
    fi
fi

scratch=$(mktemp -d /tmp/memtool-configure-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
fail() {
    echo "configure_test: $*" >&2
    exit 1
}

# configure NAME [-DVAR=VALUE...]: configures into $scratch/NAME (no tests, no LibTorch
# sample, unless asked), output in $scratch/NAME.log; returns cmake's status.
configure() {
    local name=$1
    shift
    "$cmake" -S "$src" -B "$scratch/$name" -G "$generator" -DMEMTOOL_BUILD_TESTS=OFF \
        -DMEMTOOL_BUILD_LIBTORCH_SAMPLE=OFF "$@" >"$scratch/$name.log" 2>&1
}
expect_failure() {  # NAME MESSAGE OPTIONS...
    local name=$1 message=$2
    shift 2
    ! configure "$name" "$@" || fail "$name: configured, expected the error '$message'"
    grep -qF "$message" "$scratch/$name.log" || fail "$name: no '$message' in:"$'\n'"$(cat "$scratch/$name.log")"
}
expect_success() {  # NAME MESSAGE OPTIONS...
    local name=$1 message=$2
    shift 2
    configure "$name" "$@" || fail "$name: configure failed:"$'\n'"$(cat "$scratch/$name.log")"
    grep -qF "$message" "$scratch/$name.log" || fail "$name: no '$message' in:"$'\n'"$(cat "$scratch/$name.log")"
}
has_target() { [ -d "$scratch/$1/$2/CMakeFiles/$3.dir" ]; }

no_cuda=-DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON
expect_failure cuda-on-missing "MEMTOOL_CUDA=ON, but no CUDA toolkit found" -DMEMTOOL_CUDA=ON $no_cuda
expect_failure cuda-bad-value "MEMTOOL_CUDA is 'maybe'; use AUTO, ON or OFF" -DMEMTOOL_CUDA=maybe
expect_success cuda-auto-missing "memtool: CUDA parts are not built: no CUDA toolkit found" -DMEMTOOL_CUDA=AUTO $no_cuda
expect_success cuda-off "memtool: CUDA parts are not built: MEMTOOL_CUDA=OFF" -DMEMTOOL_CUDA=OFF
for name in cuda-auto-missing cuda-off; do
    has_target $name collectors memtool_collector || fail "$name: no collector"
    ! has_target $name collectors/cuda memtool_cupti || fail "$name: the CUPTI injection is built"
    ! has_target $name samples/cuda cuda_sample || fail "$name: cuda_sample is built"
done
if [ "$cuda_found" = 1 ]; then
    expect_success cuda-on "memtool: CUDA parts are built" -DMEMTOOL_CUDA=ON
    has_target cuda-on collectors/cuda memtool_cupti || fail "cuda-on: no CUPTI injection"
    has_target cuda-on samples/cuda cuda_sample || fail "cuda-on: no cuda_sample"
fi

expect_failure sanitize-typo "MEMTOOL_SANITIZE: unknown sanitizer 'adress'" -DMEMTOOL_SANITIZE=adress,undefined
expect_failure sanitize-mix "MEMTOOL_SANITIZE: thread cannot be combined with address" -DMEMTOOL_SANITIZE=thread,address

# Which objects get -fsanitize, from the compile commands of an ASan+UBSan tree.
# In a clang tree with the fuzzers (scripts/test-sanitizers.sh's), the fuzzers' coverage
# (-fsanitize=fuzzer-no-link) goes exactly where the sanitizers go.
check_instrumented() {  # TREE FUZZ(0|1)
/usr/bin/python3 - "$scratch/$1/compile_commands.json" "$2" <<'PY'
import json, re, sys
instrumented = {}
fuzz_tree = sys.argv[2] == "1"
for entry in json.load(open(sys.argv[1])):
    target = re.search(r"CMakeFiles/([^/]+)\.dir/", entry["output"] if "output" in entry else entry["command"]).group(1)
    if target.endswith("_fuzzer"):  # the harnesses: -fsanitize=fuzzer,address,undefined of their own
        continue
    flag = "-fsanitize=address,undefined" in entry["command"]
    if instrumented.setdefault(target, flag) != flag:
        sys.exit(f"configure_test: {target} is instrumented in part")
    if ("-fsanitize=fuzzer-no-link" in entry["command"]) != (flag and fuzz_tree):
        sys.exit(f"configure_test: {target}: the fuzzers' coverage is not exactly where the sanitizers are")
own = {"memtool", "memtool_cli_lib", "memtool_reporters", "memtool_trace", "memtool_core", "memtool_collector_engine",
       "memtool_cuda_translator", "unit_tests", "e2e_tests"}
injected = {"memtool_collector", "memtool_core_uninstrumented", "memtool_collector_engine_uninstrumented",
            "memtool_cuda_translator_uninstrumented", "fake_cudart", "fake_c10_cuda", "fake_torch_bridge",
            "cuda_runtime_user"}
if "memtool_cupti" in instrumented:
    own |= {"memtool_cupti_decoder"}
    injected |= {"memtool_cupti", "memtool_cupti_decoder_uninstrumented", "cuda_sample"}
wrong = sorted(t for t in own if not instrumented.get(t)) + sorted(t for t in injected if instrumented.get(t, True))
if wrong:
    sys.exit(f"configure_test: wrongly (un)instrumented or missing: {wrong}; all: {instrumented}")
PY
}
expect_success sanitize "memtool: sanitizers address,undefined" -DMEMTOOL_SANITIZE=address,undefined \
    -DMEMTOOL_BUILD_TESTS=ON -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
check_instrumented sanitize 0
if command -v clang++ >/dev/null; then
    expect_success sanitize-fuzz "memtool: sanitizers address,undefined" -DMEMTOOL_SANITIZE=address,undefined \
        -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DMEMTOOL_FUZZ=ON \
        -DMEMTOOL_BUILD_TESTS=ON -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
    check_instrumented sanitize-fuzz 1
fi
# The CLI links elfutils' archives where every one is installed (as setup.sh makes
# sure), the shared libraries where one is missing: simulated by ignoring the
# directories that hold them (libunwind, found there too, named instead).
grep -qF "elfutils: static, " "$scratch/cuda-off.log" || fail "cuda-off: elfutils is not linked from its archives"
unwind=$(sed -n 's/^LIBUNWIND_SHARED:FILEPATH=//p' "$scratch/cuda-off/CMakeCache.txt")
expect_success elfutils-shared "elfutils: shared (not every archive is installed)" -DMEMTOOL_CUDA=OFF \
    "-DCMAKE_IGNORE_PATH=/usr/lib/x86_64-linux-gnu;/lib/x86_64-linux-gnu" "-DLIBUNWIND_SHARED=$unwind"

# A missing build dependency stops the configure with the Debian package to install.
expect_failure missing-fmt "memtool: fmt is missing: install the Debian package libfmt-dev" -DMEMTOOL_CUDA=OFF \
    -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON
expect_failure missing-cli11 "memtool: CLI11 is missing: install the Debian package libcli11-dev" -DMEMTOOL_CUDA=OFF \
    -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON
expect_failure missing-unwind "memtool: libunwind.so.8 is missing: install the Debian package libunwind-dev" \
    -DMEMTOOL_CUDA=OFF "-DCMAKE_IGNORE_PATH=/usr/lib/x86_64-linux-gnu;/lib/x86_64-linux-gnu"

mkdir -p "$(dirname "$stamp")"
echo "$hash $(date +%s)" >"$stamp"
echo "configure_test: MEMTOOL_CUDA, MEMTOOL_SANITIZE, elfutils and missing dependencies behave"
