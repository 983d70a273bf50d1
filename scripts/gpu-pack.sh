#!/usr/bin/env bash
# Packs into .carry/gpu/ (git-ignored; it travels beside the tracked files) what a GPU
# machine lacks to run scripts/gpu-check.sh: the built memtool and collector, the test
# binaries (unit_tests, e2e_tests) with the test doubles they run, and the shared
# libraries these need that are not glibc, libstdc++ or libgcc: libunwind.so.8 (which the
# collector dlopens) and its own (elfutils and fmt are linked in). No headers: the GPU side
# compiles only the CUDA parts, which need the CUDA toolkit and torch, nothing of Debian.
#   scripts/gpu-pack.sh             build (scripts/setup.sh), then pack
#   scripts/gpu-pack.sh --no-build  pack what BUILD_DIR (default build/) holds
# MEMTOOL_GPU_PACK names another folder for the pack.
#
# Layout, a build tree's (bin/memtool finds bin/../lib/libmemtool_collector.so):
#   bin/       memtool, unit_tests, e2e_tests
#   lib/       libmemtool_collector.so, and deps/: the third-party libraries
#   fakes/     the test doubles (tests/fakes/)
#   MANIFEST   what it was built from, and the symbol versions it needs of glibc/libstdc++
# Run paths are rewritten relative to $ORIGIN so that everything resolves inside the
# pack without LD_LIBRARY_PATH, which would leak into the programs memtool profiles.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
PACK=${MEMTOOL_GPU_PACK:-.carry/gpu}
die() {
    echo "gpu-pack: $*" >&2
    exit 1
}
case "${1:-}" in
    "") scripts/setup.sh ;;
    --no-build) ;;
    *)
        echo "gpu-pack: unknown option '$1' (use --no-build)" >&2
        exit 2
        ;;
esac
command -v patchelf >/dev/null || die "patchelf is not installed (scripts/setup.sh installs it)"
for f in bin/memtool bin/unit_tests bin/e2e_tests lib/libmemtool_collector.so tests/fakes/cuda_runtime_user; do
    [ -f "$BUILD_DIR/$f" ] || die "$BUILD_DIR/$f is missing: build first (scripts/setup.sh)"
done

rm -rf "$PACK"
mkdir -p "$PACK/bin" "$PACK/lib/deps" "$PACK/fakes"
cp "$BUILD_DIR"/bin/{memtool,unit_tests,e2e_tests} "$PACK/bin/"
cp "$BUILD_DIR/lib/libmemtool_collector.so" "$PACK/lib/"
find "$BUILD_DIR/tests/fakes" -maxdepth 1 -type f -exec cp {} "$PACK/fakes/" \;  # no symlinks: only sonames matter
# Debug info stays here; symbols stay in.
strip --strip-debug "$PACK"/bin/* "$PACK/lib/libmemtool_collector.so"

# The C and C++ runtimes: the GPU machine has its own (their versions are checked there).
is_runtime() {
    case "$1" in
        linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libmvec.so.* | libpthread.so.* | libdl.so.* | \
            librt.so.* | libutil.so.* | libresolv.so.* | libanl.so.* | libstdc++.so.* | libgcc_s.so.*) return 0 ;;
    esac
    return 1
}
# Copies into lib/deps/ every library `ldd FILE` names that is neither a runtime nor
# one of the pack's own, and those libraries' own.
add_deps() {
    local name arrow path rest
    while read -r name arrow path rest; do
        [ "$arrow" = "=>" ] || continue
        is_runtime "$name" || [ -e "$PACK/fakes/$name" ] || [ -e "$PACK/lib/deps/$name" ] && continue
        [ -f "$path" ] || die "$1 needs $name, which ldd cannot find here"
        cp -L "$path" "$PACK/lib/deps/$name"
        add_deps "$path"
    done < <(ldd "$1")
}
for f in "$PACK"/bin/* "$PACK"/lib/*.so "$PACK"/fakes/*; do
    add_deps "$f"
done
# Not linked, but dlopen()ed by the collector, by soname.
unwind=$(sed -n 's/^LIBUNWIND_SHARED:FILEPATH=//p' "$BUILD_DIR/CMakeCache.txt")
[ -f "$unwind" ] || die "libunwind.so.8 not found (LIBUNWIND_SHARED in $BUILD_DIR/CMakeCache.txt)"
cp -L "$unwind" "$PACK/lib/deps/libunwind.so.8"
add_deps "$unwind"

# memtool: DT_RPATH, not RUNPATH, because only an RPATH is also searched for the
# dependencies of its dependencies (libdw's libelf, libz, ...). The collector finds
# libunwind.so.8 through its RUNPATH, which its dlopen() searches.
patchelf --force-rpath --set-rpath '$ORIGIN/../lib/deps' "$PACK"/bin/*
patchelf --set-rpath '$ORIGIN/deps' "$PACK/lib/libmemtool_collector.so"
patchelf --set-rpath '$ORIGIN' "$PACK"/lib/deps/*
patchelf --set-rpath '$ORIGIN:$ORIGIN/../lib/deps' "$PACK"/fakes/*

# Complete: with no LD_LIBRARY_PATH, every library resolves inside the pack, or is a runtime.
for f in "$PACK"/bin/* "$PACK"/lib/*.so "$PACK"/lib/deps/* "$PACK"/fakes/*; do
    while read -r name arrow path rest; do
        [ "$arrow" = "=>" ] || continue
        is_runtime "$name" && continue
        case "$(realpath -m "$path")" in
            "$(realpath "$PACK")"/*) ;;
            *) die "$f: $name resolves to $path, outside the pack" ;;
        esac
    done < <(env -i ldd "$f")
done

needs() {  # the highest symbol version with this prefix that the pack uses
    objdump -T "$PACK"/bin/* "$PACK"/lib/*.so "$PACK"/lib/deps/* "$PACK"/fakes/* 2>/dev/null |
        grep -o "$1[0-9.]*" | sort -uV | tail -1
}
{
    echo "built from $(git rev-parse --short HEAD)$(git diff --quiet HEAD && echo "" || echo " with uncommitted changes")"
    echo "built on $(. /etc/os-release && echo "$PRETTY_NAME"), $(getconf GNU_LIBC_VERSION)"
    echo "needs $(needs GLIBC_2.) $(needs GLIBCXX_3.) $(needs CXXABI_1.)"
    (cd "$PACK" && find . -type f ! -name MANIFEST -printf '%P\n' | sort)
} >"$PACK/MANIFEST"

bytes=$(du -sb "$PACK" | cut -f1)
echo "gpu-pack: $PACK: $(find "$PACK" -type f | wc -l) files, $((bytes / 1024)) KiB ($(sed -n 3p "$PACK/MANIFEST"))"
((bytes < 64 * 1024 * 1024)) || die "the pack is over the 64 MiB that travels to the GPU machine"
