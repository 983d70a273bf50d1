#!/usr/bin/env bash
# Installs the Debian packages memtool needs (only those missing; `apt-get update`
# runs once, and only then), configures and builds into ./build.
# Idempotent: a second run installs nothing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  g++ cmake ninja-build pkg-config git
  libfmt-dev libcli11-dev nlohmann-json3-dev robin-map-dev
  libgtest-dev libgmock-dev
  libunwind-dev libdw-dev libelf-dev
  zlib1g-dev liblzma-dev libbz2-dev  # the archives libdw.a needs: the CLI links elfutils in
  libtorch-dev python3-torch
  python3-torchvision  # bench/workloads/resnet18.py
  heaptrack
  clang-format  # scripts/check-format.sh
  patchelf      # scripts/gpu-pack.sh
  chromium      # the HTML report's browser test (tests/e2e/HtmlReportTest.cpp)
  tmux          # the live view's terminal test
  clang libclang-rt-dev  # tests/fuzz: libFuzzer (the fuzz test skips without them)
)

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

BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$BUILD_DIR" -j "$(nproc)"
