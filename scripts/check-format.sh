#!/usr/bin/env bash
# clang-format (Debian's; scripts/setup.sh installs it) against .clang-format, over the
# C and C++ files git tracks: `--dry-run --Werror`, so any file that would change fails.
#   scripts/check-format.sh              check; exit 1 when a file is off (.ci/run's
#                                        format phase)
#   scripts/check-format.sh --advisory   check, print a summary and the files, exit 0
#   scripts/check-format.sh --fix        reformat those files in place
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-check}
case "$mode" in
    check | --advisory | --fix) ;;
    *)
        echo "check-format: unknown option '$mode' (use --advisory or --fix)" >&2
        exit 2
        ;;
esac
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
if ! command -v "$CLANG_FORMAT" >/dev/null; then
    echo "check-format: $CLANG_FORMAT is not installed (scripts/setup.sh installs clang-format)" >&2
    exit 2
fi

# Golden fixtures' sources are data: their line numbers are what the expected outputs name.
mapfile -t files < <(git ls-files -- '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' ':!:tests/golden/src/*')
if [ "$mode" = --fix ]; then
    "$CLANG_FORMAT" -i "${files[@]}"
    echo "check-format: reformatted ${#files[@]} files with $("$CLANG_FORMAT" --version)"
    exit 0
fi

off=()
for f in "${files[@]}"; do
    if [ "$mode" = --advisory ]; then
        "$CLANG_FORMAT" --dry-run --Werror "$f" >/dev/null 2>&1 || off+=("$f")
    else
        "$CLANG_FORMAT" --dry-run --Werror "$f" || off+=("$f")
    fi
done
if ((${#off[@]} == 0)); then
    echo "check-format: all ${#files[@]} files match .clang-format"
    exit 0
fi
echo "check-format: ${#off[@]} of ${#files[@]} files differ from .clang-format ($("$CLANG_FORMAT" --version)); scripts/check-format.sh --fix reformats them" >&2
if [ "$mode" = --advisory ]; then
    printf '  %s\n' "${off[@]}" >&2
    echo "check-format: advisory only: not failing" >&2
    exit 0
fi
exit 1
