#!/usr/bin/env bash
# One command from a fresh clone: install what building memtool needs (scripts/setup.sh
# --user: Debian packages, no test, lint or bench ones), make a venv with PyTorch
# (build-quickstart/venv: torch 2.13.0, a CPU build), `pip install` memtool into it (the
# wheel's build tree is build-quickstart/wheel), profile samples/python/quickstart.py
# with that venv's torch, print the report. What a user types after that, in the venv:
# `memtool run -- python train.py`.
# Environment: MEMTOOL_QUICKSTART_VENV (build-quickstart/venv), MEMTOOL_QUICKSTART_TORCH
# (torch==2.13.0: pip's requirement for torch; with torchvision, use
# "torch==2.14.1 torchvision==0.29.1").
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --user
venv=${MEMTOOL_QUICKSTART_VENV:-build-quickstart/venv}
read -r -a torch <<<"${MEMTOOL_QUICKSTART_TORCH:-torch==2.13.0}"
pip_quietly() {  # pip, printing only what goes wrong
    "$venv/bin/pip" --disable-pip-version-check install -q "$@" 2> >(grep -v '^WARNING: Location' >&2)
}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
echo "quickstart: installing ${torch[*]} into $venv" >&2
pip_quietly "${torch[@]}" numpy scikit-build-core  # numpy: torch warns at import without it
echo "quickstart: pip install . (memtool) into $venv" >&2
# No build isolation: the build tools are in the venv already, and a CUDA torch there
# gets its torch bridge built.
pip_quietly --no-build-isolation -C build-dir=build-quickstart/wheel .
"$venv/bin/memtool" run -o quickstart.trace.json -- "$venv/bin/python" samples/python/quickstart.py
"$venv/bin/memtool" report quickstart.trace.json
"$venv/bin/memtool" report quickstart.trace.json --lines
"$venv/bin/memtool" report quickstart.trace.json --format html -o quickstart.html
echo "quickstart: the same report with charts is in quickstart.html (open it in a browser);" \
    "memtool is installed in $venv: . $venv/bin/activate; memtool run -- python your_program.py" >&2
