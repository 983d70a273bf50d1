#!/usr/bin/env bash
# ruff over the repository's Python (ruff.toml says which files and rules), from
# scripts/devtools.sh's environment (build/devtools-venv).
#   scripts/check-ruff.sh          check; exit 1 on a finding
#   scripts/check-ruff.sh --fix    apply ruff's safe fixes (mind tests/e2e/scripts: the
#                                  e2e tests assert its line numbers)
set -euo pipefail
cd "$(dirname "$0")/.."
RUFF=${RUFF:-${MEMTOOL_DEVTOOLS:-build/devtools-venv}/bin/ruff}
[ -x "$RUFF" ] || scripts/devtools.sh
case "${1:-}" in
    "") exec "$RUFF" check ;;
    --fix) exec "$RUFF" check --fix ;;
    *)
        echo "check-ruff: unknown option '$1' (use --fix)" >&2
        exit 2
        ;;
esac
