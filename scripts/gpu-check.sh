#!/usr/bin/env bash
# The GPU checks in one command. Run on a machine with an NVIDIA GPU, from the
# repository root, with .carry/gpu (scripts/gpu-pack.sh) beside the tracked files:
#   scripts/gpu-check.sh
# 1. the carried binaries are copied into build-gpu/ and must load here (ldd);
# 2. build (scripts/gpu/CMakeLists.txt into build-gpu/), against this machine's CUDA
#    toolkit and torch: the CUPTI injection, the torch bridge, samples/cuda, beside
#    the carried memtool and collector. Nothing else is compiled;
# 3. stop, with a one-line reason, where no GPU is usable;
# 4. each check in CHECKS, logged in full, then one summary line; exit 0 when all pass.
# Environment: MEMTOOL_GPU_PYTHON, the python whose torch is used (default
# /opt/torch/.venv/bin/python3 where it exists, else python3); MEMTOOL_GPU_PACK
# (.carry/gpu); MEMTOOL_GPU_BUILD (build-gpu); OUT: when set, the full log
# (gpu-check.log), the traces and the test results are written there.
#
# To add a check: write a function check_<name> that prints what it measured and
# returns non-zero when it fails, and append <name> to CHECKS. It can use $ROOT, $PY,
# $BUILD (bin/memtool, bin/e2e_tests, bin/unit_tests, bin/cuda_sample, lib/, fakes/),
# $RESULTS, e2e_env and the bridge state in $BRIDGE_BUILT / $BRIDGE_WHY.
CHECKS=(
    carried_unit_tests  # the carried unit tests pass on this machine
    cupti_e2e           # RunCuda.*: the CUPTI injection and the runtime hooks on a real driver
    torch_bridge_e2e    # *TorchCuda*: active/reserved peaks equal torch's, both allocator configs
    figures             # memtool beside torch.cuda.max_memory_* and NVML, printed
    regions             # *TorchCudaRegions*: 1 GiB paused and resumed, both hook modes, each backup; timings
    courtesy            # TorchCudaCourtesy: a training run yielded to host and restored; yield/restore per GiB
    verify              # TorchCudaVerify: the checksum kernel passes a good 1 GiB restore, catches a spoiled one; its cost
    graph_pools         # TorchCudaGraphPools: CUDA graphs' private pools with torch's ids and exact peaks
    graph_pause         # TorchCudaGraphPause: a graph's pool paused, resumed, and the graph replays
)
# MEMTOOL_GPU_CHECKS="courtesy regions" runs only those checks, in that order.
set -uo pipefail  # no -e: a failing check is recorded and the next one still runs
cd "$(dirname "$0")/.."
ROOT=$PWD
PACK=$(realpath -m "${MEMTOOL_GPU_PACK:-.carry/gpu}")
BUILD=$(realpath -m "${MEMTOOL_GPU_BUILD:-build-gpu}")
PY=${MEMTOOL_GPU_PYTHON:-}
if [ -z "$PY" ]; then
    if [ -x /opt/torch/.venv/bin/python3 ]; then PY=/opt/torch/.venv/bin/python3; else PY=$(command -v python3 || echo python3); fi
fi
RESULTS=${OUT:-$BUILD/results}
BRIDGE_BUILT=0
BRIDGE_WHY=""

log() { echo "gpu-check: $*"; }
stop() {  # the last line says why
    log "stopped: $*"
    exit 1
}

# Copies the pack into $BUILD (the layout of a build tree: bin/memtool finds
# bin/../lib/libmemtool_collector.so and the libraries built here beside it), execute
# bits restored, and checks that every carried binary loads here.
stage_pack() {
    [ -f "$PACK/MANIFEST" ] || stop "no pack at $PACK (run scripts/gpu-pack.sh where memtool builds and carry .carry/gpu)"
    log "pack: $(head -3 "$PACK/MANIFEST" | paste -sd ';' | sed 's/;/; /g')"
    log "this machine: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), $(getconf GNU_LIBC_VERSION), $(uname -m)"
    mkdir -p "$BUILD/bin" "$BUILD/lib" "$BUILD/fakes"
    rm -rf "$BUILD/lib/deps"
    cp "$PACK"/bin/* "$BUILD/bin/"
    cp -r "$PACK/lib/." "$BUILD/lib/"
    cp "$PACK"/fakes/* "$BUILD/fakes/"
    # The Python package travels as tracked files: where the carried memtool finds it.
    mkdir -p "$BUILD/lib/python"
    rm -rf "$BUILD/lib/python/memtool"
    cp -r "$ROOT/python/memtool" "$BUILD/lib/python/"
    chmod u+x "$BUILD"/bin/* "$BUILD/fakes/cuda_runtime_user"
    local f problem
    for f in "$PACK"/bin/* "$PACK"/lib/*.so "$PACK"/lib/deps/*; do
        f=${f#"$PACK"/}
        problem=$(env -i ldd "$BUILD/$f" 2>&1 | grep -m1 -E 'not found|not a dynamic')
        [ -z "$problem" ] || stop "the carried $f cannot load here: $(echo "$problem" | sed 's/^[[:space:]]*//')"
    done
}

# Configures and builds scripts/gpu into $BUILD. Where the CUDA toolkit has no CUPTI,
# the one from pip (nvidia-cuda-cupti, beside torch) is used.
build() {
    command -v cmake >/dev/null || stop "cmake is not installed"
    command -v c++ >/dev/null || command -v g++ >/dev/null || stop "no C++ compiler (c++, g++)"
    local generator=() cupti=() lib
    command -v ninja >/dev/null && generator=(-G Ninja)
    mkdir -p "$BUILD"
    configure() {
        cmake -S scripts/gpu -B "$BUILD" "${generator[@]}" -DMEMTOOL_CUDA=ON -DMEMTOOL_TORCH_PYTHON="$PY" "${cupti[@]}" \
            >"$RESULTS/configure.log" 2>&1
    }
    if ! configure && grep -q "has no CUPTI" "$RESULTS/configure.log"; then
        lib=$("$PY" -c 'import glob, os, site
for root in site.getsitepackages():
    for lib in sorted(glob.glob(os.path.join(root, "nvidia", "**", "libcupti.so*"), recursive=True)):
        print(lib); raise SystemExit' 2>/dev/null)
        if [ -n "$lib" ] && [ -f "$(dirname "$lib")/../include/cupti.h" ]; then
            log "the CUDA toolkit has no CUPTI; using pip's: $lib"
            cupti=(-DMEMTOOL_CUPTI_LIBRARY="$lib" -DMEMTOOL_CUPTI_INCLUDE="$(realpath "$(dirname "$lib")/../include")")
            configure
        fi
    fi
    grep -q "Configuring done" "$RESULTS/configure.log" ||
        stop "configure failed: $(grep -m1 -A1 'CMake Error' "$RESULTS/configure.log" | tail -1 | sed 's/^ *//') (log: $RESULTS/configure.log)"
    sed -n 's/^-- memtool: /configure: /p' "$RESULTS/configure.log" | while read -r line; do log "$line"; done
    if ! cmake --build "$BUILD" -j "$(nproc)" >"$RESULTS/build.log" 2>&1; then
        stop "build failed: $(grep -m1 -E 'error|Error' "$RESULTS/build.log") (log: $RESULTS/build.log)"
    fi
    BRIDGE_WHY=$(sed -n 's/.*memtool: torch bridge not built (\(.*\)); cuda rows.*/\1/p' "$RESULTS/configure.log")
    grep -q "memtool: torch bridge built against" "$RESULTS/configure.log" && BRIDGE_BUILT=1
}

require_gpu() {
    local probe rc torch
    probe=$("$BUILD/bin/cuda_sample" --probe 2>&1)
    rc=$?
    torch=$("$PY" -c 'import torch; print(f"torch {torch.__version__} (CUDA {torch.version.cuda}, available: {torch.cuda.is_available()})")' 2>/dev/null ||
        echo "no torch")
    log "$PY: $torch; torch bridge: $([ "$BRIDGE_BUILT" = 1 ] && echo built || echo "not built ($BRIDGE_WHY)")"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader |
        while read -r line; do log "GPU: $line"; done
    if [ "$rc" != 0 ]; then
        [ "$rc" = 77 ] && probe="cudaGetDeviceCount found no usable device"
        probe=${probe##*error while loading shared libraries: }
        stop "no usable CUDA GPU here (cuda_sample --probe exited $rc: $(echo "$probe" | head -1)); $PY: $torch; built: $(cd "$BUILD" && ls bin/cuda_sample lib/libmemtool_*.so 2>/dev/null | xargs -n1 basename | grep -v collector | paste -sd ' ')"
    fi
}

# The environment under which the carried e2e_tests find this machine's programs
# (tests/e2e/E2eSupport.h).
e2e_env=()
set_e2e_env() {
    e2e_env=(
        E2E_MEMTOOL_BIN="$BUILD/bin/memtool" E2E_SCRIPTS_DIR="$ROOT/tests/e2e/scripts" E2E_PYTHON_BIN="$PY"
        E2E_CUDA_SAMPLE_BIN="$BUILD/bin/cuda_sample" E2E_TORCH_PYTHON_BIN="$PY" E2E_TORCH_BRIDGE_BUILT="$BRIDGE_BUILT"
        E2E_CUDA_RUNTIME_USER_BIN="$BUILD/fakes/cuda_runtime_user"
        E2E_FAKE_TORCH_BRIDGE="$BUILD/fakes/libmemtool_fake_torch_bridge.so"
    )
}

# e2e_tests with a gtest filter; a skipped test fails here, where everything it needs is.
run_e2e() {  # NAME FILTER
    local out="$RESULTS/$1.txt"
    env "${e2e_env[@]}" "$BUILD/bin/e2e_tests" --gtest_filter="$2" --gtest_output="json:$RESULTS/$1.json" 2>&1 |
        tee "$out"
    local rc=${PIPESTATUS[0]}
    if grep -q '^\[  SKIPPED \]' "$out"; then
        log "$1: tests were skipped on a GPU machine"
        return 1
    fi
    return "$rc"
}

check_carried_unit_tests() { "$BUILD/bin/unit_tests" --gtest_brief=1; }

check_cupti_e2e() { run_e2e cupti_e2e 'RunCuda.*'; }

check_torch_bridge_e2e() {
    if [ "$BRIDGE_BUILT" != 1 ]; then
        log "the torch bridge is not built: $BRIDGE_WHY"
        return 1
    fi
    run_e2e torch_bridge_e2e 'AllocatorConfigs/*'
}

# memtool's cuda:0 figures beside PyTorch's own and NVML's per-process figure, for
# tests/e2e/scripts/torch_cuda.py under both allocator configurations.
check_figures() {
    local conf name trace status=0
    for conf in "" "expandable_segments:True"; do
        name=torch_cuda${conf:+-expandable}
        trace="$RESULTS/$name.trace.json"
        if ! PYTORCH_CUDA_ALLOC_CONF="$conf" "$BUILD/bin/memtool" run -q -o "$trace" -- \
            "$PY" tests/e2e/scripts/torch_cuda.py >"$RESULTS/$name.torch.json"; then
            log "figures: memtool run failed for ${conf:-default}"
            status=1
            continue
        fi
        "$PY" - "${conf:-default}" "$trace" "$RESULTS/$name.torch.json" <<'PY' || status=1
import json, sys
conf, trace, torch_out = sys.argv[1:]
torch = json.loads(open(torch_out).read().strip().splitlines()[-1])
proc = json.load(open(trace))["processes"][0]
cuda = proc["devices"].get("cuda:0", {})
def fig(row, key):
    return row.get(key, {}).get("peak_bytes") if isinstance(row.get(key), dict) else None
device = "device peak (" + str(cuda.get("source")) + ")"
rows = [  # memtool's figure beside the one it should equal, or one bounding it: whole
    # blocks (max_memory_allocated) from above, NVML (the context too) from below
    ("active peak", fig(cuda, "active"), "requested_bytes.all.peak", torch["max_requested"]),
    ("active peak", fig(cuda, "active"), "torch.cuda.max_memory_allocated()", torch["max_allocated"]),
    ("reserved peak", fig(cuda, "reserved"), "torch.cuda.max_memory_reserved()", torch["max_reserved"]),
    (device, cuda.get("peak_bytes"), "torch.cuda.max_memory_reserved()", torch["max_reserved"]),
    ("device at exit", cuda.get("current_bytes"), "torch.cuda.memory_reserved() at end", torch["reserved"]),
    (device, cuda.get("peak_bytes"), "NVML, the process at end (+context)", torch.get("nvml_used")),
]
print(f"figures, {conf}:")
for what, mine, theirs_name, theirs in rows:
    delta = "" if mine is None or theirs is None else f"  (memtool - theirs = {mine - theirs:+,})"
    mine = "-" if mine is None else f"{mine:,}"
    theirs = "-" if theirs is None else f"{theirs:,}"
    print(f"  memtool {what:<20} {mine:>15}   {theirs_name:<37} {theirs:>15}{delta}")
for w in proc.get("warnings", []):
    print(f"  warning: {w}")
PY
    done
    return $status
}

# Pausable CUDA regions on the real driver (TorchCudaRegions, the filter of the
# torch_bridge check runs them too when the bridge is built): their figures, and
# pause/resume speed beside a plain pinned copy of the same GiB.
check_regions() {
    run_e2e regions 'ModesAndBackups/*' || return 1
    grep '^regions_cuda ' "$RESULTS/regions.txt" | sed 's/^regions_cuda //' | "$PY" scripts/gpu/regions_table.py
}

# Courtesy on the real driver: the training script under --pausable all, yielded
# from outside (the device keeps only what PyTorch's allocator does not hold; the
# losses equal a bare run's), then bench/courtesy.py's seconds per GiB beside
# torch's own pinned copies of the same bytes.
check_courtesy() {
    run_e2e courtesy 'TorchCudaCourtesy.*' || return 1
    "$PY" bench/courtesy.py --device cuda --gib 2 --rounds 3 --python "$PY" --build "$BUILD"
}

check_verify() { run_e2e verify 'TorchCudaVerify.*'; }

check_graph_pools() { run_e2e graph_pools 'TorchCudaGraphPools.*'; }

check_graph_pause() { run_e2e graph_pause 'TorchCudaGraphPause.*'; }

main() {
    mkdir -p "$RESULTS"
    log "$(date -u +%FT%TZ) in $ROOT, python $PY"
    local check passed=() failed=()
    if [ -n "${MEMTOOL_GPU_CHECKS:-}" ]; then
        read -ra CHECKS <<<"$MEMTOOL_GPU_CHECKS"
        for check in "${CHECKS[@]}"; do
            declare -F "check_$check" >/dev/null || stop "MEMTOOL_GPU_CHECKS: no check named '$check'"
        done
    fi
    stage_pack
    build
    require_gpu
    set_e2e_env
    for check in "${CHECKS[@]}"; do
        log "--- $check"
        if "check_$check"; then passed+=("$check"); else failed+=("$check"); fi
    done
    if ((${#failed[@]})); then
        log "${#passed[@]} of ${#CHECKS[@]} checks passed; failed: ${failed[*]}"
        return 1
    fi
    log "all ${#CHECKS[@]} checks passed"
}

if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    main "$@" 2>&1 | tee "$OUT/gpu-check.log"
    exit "${PIPESTATUS[0]}"
fi
main "$@"
