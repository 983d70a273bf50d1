#!/usr/bin/env bash
# scripts/gpu-pack.sh packs a complete, small .carry/gpu from this build, and
# scripts/gpu-check.sh, run here against it, builds what it can and stops with a
# one-line reason (this machine has no GPU and no CUDA torch).
# usage: gpu_pack_test.sh SOURCE_DIR BUILD_DIR CUDA_BUILT(0|1)
# Exits 77 (skipped) after the pack checks where a GPU is present: run gpu-check.sh there.
set -euo pipefail
src=$1 build=$2 cuda_built=$3
scratch=$(realpath "$(mktemp -d /tmp/memtool-gpupack-XXXXXX)")
trap 'rm -rf "$scratch"' EXIT
fail() {
    echo "gpu_pack_test: $*" >&2
    exit 1
}
pack=$scratch/pack
# gpu-check.sh's build of scripts/gpu is kept in the build tree: a later run rebuilds
# only what changed (with ccache, where installed, also after a clean).
gpu_build=$build/gpu-check

MEMTOOL_GPU_PACK=$pack BUILD_DIR=$build "$src/scripts/gpu-pack.sh" --no-build
bytes=$(du -sb "$pack" | cut -f1)
# A budget well under the 64 MiB a device call carries (gpu-pack.sh refuses more),
# so that growth shows here long before it stops a GPU session: 17.1 MiB in
# December 2026 (memtool 6.1 MiB, e2e_tests 3.7 MiB, the collector 3.3 MiB).
((bytes < 24 * 1024 * 1024)) || fail "the pack is $bytes bytes; it should stay well under 64 MiB"
for f in bin/memtool bin/unit_tests bin/e2e_tests lib/libmemtool_collector.so lib/deps/libunwind.so.8 \
    fakes/cuda_runtime_user; do
    [ -f "$pack/$f" ] || fail "$f is not in the pack"
done
# elfutils and fmt are linked into memtool: neither is loaded at its start.
! env -i ldd "$pack/bin/memtool" | grep -E '^\s*lib(dw|elf|fmt)\.so' || fail "bin/memtool loads elfutils or fmt"

# Complete: without LD_LIBRARY_PATH, each binary resolves every library that is not
# part of glibc, libstdc++ or libgcc inside the pack.
for f in "$pack"/bin/* "$pack"/lib/*.so "$pack"/lib/deps/* "$pack"/fakes/*; do
    env -i ldd "$f" | awk -v pack="$pack/" -v f="$f" '
        /not found/ { print f ": " $0; bad = 1 }
        $2 == "=>" && $1 !~ /^(libc|libm|libmvec|libpthread|libdl|librt|libutil|libresolv|libstdc\+\+|libgcc_s)\.so/ {
            if (index($3, pack) != 1) { print f ": " $1 " => " $3 " (outside the pack)"; bad = 1 } }
        END { exit bad }' || fail "the pack is incomplete"
done

# The packed memtool profiles exactly, and the collector loads the pack's libunwind.
cd "$scratch"
LD_DEBUG=libs LD_DEBUG_OUTPUT=$scratch/ld "$pack/bin/memtool" run -q -o t.json -- \
    /usr/bin/python3 "$src/tests/e2e/scripts/storages.py" >/dev/null
[ "$(/usr/bin/python3 -c 'import json; print(json.load(open("t.json"))["processes"][0]["devices"]["cpu"]["peak_bytes"])')" = 5000000 ] ||
    fail "the packed memtool's cpu peak is not 5,000,000"
grep -q "calling init: $pack/lib/deps/libunwind.so.8" "$scratch"/ld.* || fail "the collector did not load the pack's libunwind.so.8"

if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_pack_test: a GPU is present; run scripts/gpu-check.sh itself"
    exit 77
fi
set +e
MEMTOOL_GPU_PACK=$pack MEMTOOL_GPU_BUILD=$gpu_build MEMTOOL_GPU_PYTHON=/usr/bin/python3 OUT=$scratch/out \
    "$src/scripts/gpu-check.sh" >"$scratch/check.txt" 2>&1
rc=$?
set -e
last=$(tail -1 "$scratch/check.txt")
[ "$rc" = 1 ] || fail "gpu-check.sh exited $rc, expected 1:"$'\n'"$(cat "$scratch/check.txt")"
[ "$(tail -1 "$scratch/out/gpu-check.log")" = "$last" ] || fail "\$OUT/gpu-check.log does not hold the whole log"
if [ "$cuda_built" = 1 ]; then
    case "$last" in
        "gpu-check: stopped: no usable CUDA GPU here ("*"; /usr/bin/python3: torch "*"(CUDA None, available: False); built: cuda_sample libmemtool_cupti.so") ;;
        *) fail "unexpected last line: $last" ;;
    esac
    [ -x "$gpu_build/bin/cuda_sample" ] && [ -f "$gpu_build/lib/libmemtool_cupti.so" ] ||
        fail "gpu-check.sh did not build cuda_sample and the CUPTI injection"
    grep -q "torch bridge: not built (torch .* is older than 2.2)" "$scratch/check.txt" || fail "no reason for the missing bridge"
else
    case "$last" in
        "gpu-check: stopped: configure failed: "*) ;;
        *) fail "unexpected last line: $last" ;;
    esac
fi
echo "gpu_pack_test: pack of $((bytes / 1024)) KiB complete; gpu-check.sh here: $last"
