#!/usr/bin/env bash
# `cmake --install` puts everything `memtool run` needs under a prefix, and the
# installed memtool profiles a Python program with it, nothing from the build tree.
# usage: install_test.sh CMAKE BUILD_DIR SOURCE_DIR CUPTI_DIR BRIDGE_BUILT [PYTHON [BRIDGE_TORCH_LIB]]
#   CUPTI_DIR         folder of the libcupti the build linked; empty: no CUDA parts built
#   BRIDGE_BUILT      1 when the build made the torch bridge, else 0
#   PYTHON            the Python (with torch) the profiled programs run on (/usr/bin/python3)
#   BRIDGE_TORCH_LIB  the lib/ of the torch the bridge was built against, which its run
#                     path names wherever that torch is (the test venv is in the build tree)
set -euo pipefail
cmake=$1 build=$2 src=$3 cupti_dir=$4 bridge_built=$5 python=${6:-/usr/bin/python3} bridge_torch_lib=${7:-}
fail() {
    echo "install_test: $*" >&2
    exit 1
}

prefix=$(realpath "$(mktemp -d /tmp/memtool-install-XXXXXX)")
trap 'rm -rf "$prefix"' EXIT
"$cmake" --install "$build" --prefix "$prefix" >/dev/null

# Exactly these files: memtool and, beside each other, the libraries it injects.
# The package's modules: every .py file of python/memtool, its subpackages' too.
expected=(bin/memtool lib/memtool/libmemtool_collector.so)
while IFS= read -r module; do
    expected+=("lib/memtool/python/memtool/$module")
done < <(cd "$src/python/memtool" && find . -name '*.py' -type f -printf '%P\n')
[ -z "$cupti_dir" ] || expected+=(lib/memtool/libmemtool_cupti.so)
[ "$bridge_built" = 0 ] || expected+=(lib/memtool/libmemtool_torch_bridge.so)
want=$(printf '%s\n' "${expected[@]}" | sort)
got=$(cd "$prefix" && find . -type f -printf '%P\n' | sort)
[ "$got" = "$want" ] || fail "installed files are"$'\n'"$got"$'\n'"expected"$'\n'"$want"

# No installed file looks for libraries in the build tree; the CUPTI injection finds
# libcupti where it was at build time (the driver loads it by path, from anywhere).
for f in "${expected[@]}"; do
    paths=$(readelf -d "$prefix/$f" | grep -E 'R(UN)?PATH' || true)
    case "$f" in *.py) continue ;; esac
    # The bridge loads only into the very torch it was built against; its run path
    # names that torch's folder, even one in the build tree.
    if [ "$f" = lib/memtool/libmemtool_torch_bridge.so ] && [ -n "$bridge_torch_lib" ]; then
        paths=${paths//"$bridge_torch_lib"/}
    fi
    case "$paths" in *"$build"*) fail "$f has a run path into the build tree: $paths" ;; esac
done
if [ -n "$cupti_dir" ]; then
    injection=$prefix/lib/memtool/libmemtool_cupti.so
    # Read whole before grep -q: under pipefail, grep leaving early could fail the
    # pipe with the writer's SIGPIPE, and did under load.
    dynamic=$(readelf -d "$injection")
    grep -q "RUNPATH.*\[$cupti_dir\]" <<<"$dynamic" ||
        fail "libmemtool_cupti.so's RUNPATH is not $cupti_dir: $(grep PATH <<<"$dynamic")"
    resolved=$(env -i /usr/bin/ldd "$injection")
    grep -q "libcupti.so.* => $cupti_dir/" <<<"$resolved" ||
        fail "libmemtool_cupti.so does not resolve libcupti in $cupti_dir: $resolved"
fi

# The installed memtool profiles a Python program, exactly.
cd "$prefix"
run=(env -u LD_PRELOAD -u CUDA_INJECTION64_PATH -u MEMTOOL_TORCH_BRIDGE "$prefix/bin/memtool" run -q)
"${run[@]}" -o t.json -- "$python" "$src/tests/e2e/scripts/storages.py" >/dev/null
/usr/bin/python3 - t.json <<'PY'
import json, sys
proc = json.load(open(sys.argv[1]))["processes"][0]
cpu = proc["devices"]["cpu"]
got = (cpu["peak_bytes"], cpu["allocated_bytes"], proc["complete"], proc["stream"]["verified"])
if got != (5000000, 6000000, True, True):
    sys.exit(f"install_test: cpu peak, allocated, complete, verified are {got}; expected (5000000, 6000000, True, True)")
PY

# ... and hands the target the installed libraries, and only those.
lib=$prefix/lib/memtool
environment=$("${run[@]}" -o env.json -- /usr/bin/env)
grep -qx "LD_PRELOAD=$lib/libmemtool_collector.so" <<<"$environment" || fail "LD_PRELOAD is not the installed collector"
if [ -n "$cupti_dir" ]; then
    grep -qx "CUDA_INJECTION64_PATH=$lib/libmemtool_cupti.so" <<<"$environment" ||
        fail "CUDA_INJECTION64_PATH is not the installed CUPTI injection"
else
    ! grep -q "^CUDA_INJECTION64_PATH=" <<<"$environment" || fail "CUDA_INJECTION64_PATH is set without CUPTI"
fi
if [ "$bridge_built" = 1 ]; then
    grep -qx "MEMTOOL_TORCH_BRIDGE=$lib/libmemtool_torch_bridge.so" <<<"$environment" ||
        fail "MEMTOOL_TORCH_BRIDGE is not the installed torch bridge"
fi
# `import memtool` comes from the installed package, ahead of what the user had.
grep -qx "PYTHONPATH=$lib/python:/elsewhere" <<<"$(PYTHONPATH=/elsewhere "${run[@]}" -o env2.json -- /usr/bin/env)" ||
    fail "PYTHONPATH does not start with the installed package"
where=$("${run[@]}" -o py.json -- "$python" -c 'import memtool; print(memtool.__file__, memtool.enabled)')
[ "$where" = "$lib/python/memtool/__init__.py True" ] || fail "import memtool gave: $where"
echo "install_test: ${#expected[@]} files installed; the installed memtool profiled storages.py exactly"
