#!/usr/bin/env bash
# Installs the Debian packages memtool needs (only those missing; `apt-get update`
# runs once, and only then), configures and builds into ./build.
# Idempotent: a second run installs nothing and rebuilds only what changed.
#   scripts/setup.sh          a developer's: the user's packages and the developer's
#                             (tests, lint, sanitizers, fuzzers, bench peers), then build
#                             with -Werror
#   scripts/setup.sh --user   only what building and running memtool needs; no build
#                             (scripts/quickstart.sh configures a tree of its own)
# Environment: BUILD_DIR (build); MEMTOOL_WERROR (ON here, as in every tree the scripts
# configure; a plain cmake's default is OFF); MEMTOOL_TEST_PYTHON (the test venv's python,
# from scripts/venv.sh, which makes it once; /usr/bin/python3 leaves the venv out): the
# Python the end-to-end tests run torch on and the torch bridge is built against;
# the ACL headers come from scripts/acl-headers.sh (torch_npu's wheel, once);
# MEMTOOL_UNITY_BUILD (OFF; .ci/run: ON): compile in batches, half the CPU of a build
# from nothing, but a changed file recompiles its batch. An existing tree is
# reconfigured when one of its settings differs.
set -euo pipefail
cd "$(dirname "$0")/.."

# What a user needs: the compilers and build tools, the libraries the CLI and the
# collector build against (torch comes from pip, into the user's venv).
USER_PACKAGES=(
  g++ cmake ninja-build pkg-config git
  libfmt-dev libcli11-dev nlohmann-json3-dev robin-map-dev
  libzstd-dev  # the event log's compression (memtool run --events)
  libunwind-dev libdw-dev libelf-dev
  zlib1g-dev liblzma-dev libbz2-dev  # the archives libdw.a needs: the CLI links elfutils in
  patchelf     # the wheel (its libunwind gets a run path of $ORIGIN), scripts/gpu-pack.sh
  python3-venv # the venvs of scripts/quickstart.sh and scripts/devtools.sh, where Python is Debian's
)
# What the tests, the checks and the bench add.
DEV_PACKAGES=(
  python3-torch        # Debian's torch 1.13, the oldest memtool supports: a subset of the e2e tests
  libgtest-dev libgmock-dev
  libtorch-dev         # the LibTorch samples and test programs
  python3-torchvision  # bench/workloads/resnet18.py
  heaptrack            # bench/run.py's peer
  clang-format         # scripts/check-format.sh
  clang-tidy           # scripts/check-tidy.sh
  ccache               # every tree compiles through it (cmake/MemtoolDefaults.cmake)
  chromium             # the HTML report's browser test (tests/e2e/HtmlReportTest.cpp)
  tmux                 # the live view's terminal test
  clang libclang-rt-dev  # the sanitizer tree and tests/fuzz: libFuzzer (the fuzz test skips without them)
)

mode=dev
case "${1:-}" in
  "" | --dev) ;;
  --user) mode=user ;;
  *)
    echo "setup: unknown option '$1' (use --user or --dev)" >&2
    exit 2
    ;;
esac
PACKAGES=("${USER_PACKAGES[@]}")
[ "$mode" = user ] || PACKAGES+=("${DEV_PACKAGES[@]}")

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ "$mode" = dev ] || exit 0

BUILD_DIR=${BUILD_DIR:-build}
# The tests run torch 2.x first (the venv's, pinned); Debian's torch 1.13 runs the
# twins labelled torch1.13 (tests/CMakeLists.txt). The bridge links the venv's CUDA torch.
test_python=${MEMTOOL_TEST_PYTHON:-$(scripts/venv.sh)}
# compile_commands.json: scripts/check-tidy.sh reads it.
# The Ascend runtime's headers, from torch_npu's wheel: the ACL backend builds against them.
acl_headers=$(MEMTOOL_ACL_PYTHON="$test_python" scripts/acl-headers.sh)
werror=${MEMTOOL_WERROR:-ON}
unity=${MEMTOOL_UNITY_BUILD:-OFF}
options=(-DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DMEMTOOL_WERROR="$werror" -DMEMTOOL_UNITY_BUILD="$unity"
  -DMEMTOOL_TEST_PYTHON="$test_python" -DMEMTOOL_TORCH_PYTHON="$test_python"
  -DMEMTOOL_ACL_INCLUDE_DIR="$acl_headers")
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${options[@]}" >/dev/null
elif ! grep -qx "MEMTOOL_WERROR:BOOL=$werror" "$BUILD_DIR/CMakeCache.txt" ||
  ! grep -qx "MEMTOOL_UNITY_BUILD:BOOL=$unity" "$BUILD_DIR/CMakeCache.txt" ||
  ! grep -qx "MEMTOOL_TEST_PYTHON:FILEPATH=$test_python" "$BUILD_DIR/CMakeCache.txt" ||
  ! grep -qx "MEMTOOL_TORCH_PYTHON:STRING=$test_python" "$BUILD_DIR/CMakeCache.txt" ||
  ! grep -qx "MEMTOOL_ACL_INCLUDE_DIR:PATH=$acl_headers" "$BUILD_DIR/CMakeCache.txt"; then
  cmake -S . -B "$BUILD_DIR" "${options[@]}" >/dev/null
fi
cmake --build "$BUILD_DIR" -j "$(nproc)"
