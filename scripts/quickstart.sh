#!/usr/bin/env bash
# One command from a fresh clone: install, build, profile the quickstart sample,
# print the report.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
"$BUILD_DIR/bin/memtool" run -o quickstart.trace.json -- /usr/bin/python3 samples/python/quickstart.py
"$BUILD_DIR/bin/memtool" report quickstart.trace.json
"$BUILD_DIR/bin/memtool" report quickstart.trace.json --lines
"$BUILD_DIR/bin/memtool" report quickstart.trace.json --format html -o quickstart.html
echo "quickstart: the same report with charts is in quickstart.html (open it in a browser)" >&2
