#!/usr/bin/env bash
# The developer tools that come from PyPI, in a virtual environment of their own that
# later runs reuse: lizard (scripts/check-function-length.sh) and ruff (scripts/check-ruff.sh).
# scripts/test.sh runs it; the quickstart does not. Prints nothing when they are there.
#   scripts/devtools.sh    install what is missing into $MEMTOOL_DEVTOOLS (build/devtools-venv)
# Debian's python3 (python3-venv, scripts/setup.sh) makes the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${MEMTOOL_DEVTOOLS:-build/devtools-venv}
# Pinned: a new ruff brings new findings, which should come with a commit of their own.
TOOLS=(lizard==1.24.3 ruff==0.17.6)
if [ -x "$VENV/bin/python" ]; then
    have=$("$VENV/bin/python" -m pip freeze 2>/dev/null || true)
    [ "$(grep -cxF -f <(printf '%s\n' "${TOOLS[@]}") <<<"$have")" != "${#TOOLS[@]}" ] || exit 0
fi
[ -x "$VENV/bin/python" ] || /usr/bin/python3 -m venv "$VENV"
echo "devtools: installing ${TOOLS[*]} into $VENV" >&2
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "${TOOLS[@]}"
