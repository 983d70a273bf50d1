#!/usr/bin/env bash
# One command from a fresh clone: install what a user needs (scripts/setup.sh --user:
# no test, lint or bench packages), build memtool alone (no tests, no LibTorch sample)
# into build-quickstart/, profile the quickstart sample, print the report.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --user
BUILD_DIR=${BUILD_DIR:-build-quickstart}
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMTOOL_BUILD_TESTS=OFF \
        -DMEMTOOL_BUILD_LIBTORCH_SAMPLE=OFF >/dev/null
fi
cmake --build "$BUILD_DIR" -j "$(nproc)"
"$BUILD_DIR/bin/memtool" run -o quickstart.trace.json -- /usr/bin/python3 samples/python/quickstart.py
"$BUILD_DIR/bin/memtool" report quickstart.trace.json
"$BUILD_DIR/bin/memtool" report quickstart.trace.json --lines
"$BUILD_DIR/bin/memtool" report quickstart.trace.json --format html -o quickstart.html
echo "quickstart: the same report with charts is in quickstart.html (open it in a browser)" >&2
