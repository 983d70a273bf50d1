#!/usr/bin/env bash
# The test venv: Python 3.11 with the pinned torch 2.x and peers of
# scripts/venv-requirements.txt. Made once; reused while the stamp it keeps holds the
# requirements file's hash (a changed file reinstalls into the same venv). Prints the
# venv's python on stdout, nothing else; pip's progress goes to stderr.
#   scripts/venv.sh
# Environment: MEMTOOL_VENV (build/venv): where the venv is; MEMTOOL_VENV_PYTHON (the
# first python3.11 of pyenv's versions, then of PATH): the interpreter that makes it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${MEMTOOL_VENV:-build/venv}
REQUIREMENTS=scripts/venv-requirements.txt
STAMP=$VENV/.memtool-requirements.sha256
want=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
case $VENV in
    /*) python=$VENV/bin/python ;;
    *) python=$PWD/$VENV/bin/python ;;  # printed for trees configured from elsewhere
esac
if [ -x "$python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
    echo "$python"
    exit 0
fi

find_python311() {
    if [ -n "${MEMTOOL_VENV_PYTHON:-}" ]; then
        echo "$MEMTOOL_VENV_PYTHON"
        return
    fi
    local candidate
    for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.11*/bin/python3.11; do
        [ -x "$candidate" ] && { echo "$candidate"; return; }
    done
    command -v python3.11 || true
}
if [ ! -x "$python" ]; then
    base=$(find_python311)
    if [ -z "$base" ]; then
        echo "venv: no Python 3.11 (pyenv install 3.11, or set MEMTOOL_VENV_PYTHON)" >&2
        exit 1
    fi
    mkdir -p "$(dirname "$VENV")"
    "$base" -m venv "$VENV" >&2
fi
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$version" != 3.11 ]; then
    echo "venv: $VENV has Python $version, not 3.11: remove it, or set MEMTOOL_VENV" >&2
    exit 1
fi
echo "venv: installing $REQUIREMENTS into $VENV" >&2
"$python" -m pip install -q --disable-pip-version-check -r "$REQUIREMENTS" >&2
echo "$want" >"$STAMP"
echo "$python"
