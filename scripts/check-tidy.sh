#!/usr/bin/env bash
# clang-tidy (Debian's clang-tidy; scripts/setup.sh installs it) with .clang-tidy's
# checks over the C++ sources of cli/ core/ collectors/ reporters/ trace/ that changed
# since the merge base with main (committed or not), or over all of them. Reads
# BUILD_DIR/compile_commands.json (scripts/setup.sh configures build/ with it); a file
# that the build does not compile (CUDA-only, not built here) is left out. Any finding
# fails (WarningsAsErrors).
#   scripts/check-tidy.sh          the changed files
#   scripts/check-tidy.sh --all    every file (several minutes on two cores)
#   scripts/check-tidy.sh FILE...  those files
# Environment: BUILD_DIR (build), JOBS (nproc), MEMTOOL_TIDY_BASE (the branch to diff
# against: origin/main, else main), CLANG_TIDY (clang-tidy).
#
# Left out of .clang-tidy, as noise here: bugprone-easily-swappable-parameters (every
# function of two sizes), bugprone-narrowing-conversions and
# bugprone-implicit-widening-of-multiplication-result (byte arithmetic on purpose),
# bugprone-reserved-identifier (the libc and CUDA names the hooks must have),
# bugprone-branch-clone (switchboards whose cases read alike), bugprone-exception-escape
# (main's one catch); of performance-* and readability-*, all but the few listed.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
CLANG_TIDY=${CLANG_TIDY:-clang-tidy}
command -v "$CLANG_TIDY" >/dev/null || {
    echo "check-tidy: $CLANG_TIDY is not installed (scripts/setup.sh installs clang-tidy)" >&2
    exit 2
}
db=$BUILD_DIR/compile_commands.json
[ -f "$db" ] || {
    echo "check-tidy: no $db: configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON (scripts/setup.sh does)" >&2
    exit 2
}
dirs=(cli core collectors reporters trace)
if [ "${1:-}" = --all ]; then
    mapfile -t files < <(git ls-files -- "${dirs[@]/%//*.cpp}")
    what="all"
elif (($#)); then
    files=("$@")
    what="given"
else
    base=${MEMTOOL_TIDY_BASE:-}
    if [ -z "$base" ]; then
        for ref in origin/main main; do
            if git rev-parse -q --verify "$ref^{commit}" >/dev/null; then
                base=$ref
                break
            fi
        done
    fi
    [ -n "$base" ] || {
        echo "check-tidy: no main branch to diff against (MEMTOOL_TIDY_BASE names one); use --all" >&2
        exit 2
    }
    merge_base=$(git merge-base HEAD "$base")
    mapfile -t files < <({ git diff --name-only --diff-filter=d "$merge_base" -- "${dirs[@]/%//*.cpp}"
        git ls-files --others --exclude-standard -- "${dirs[@]/%//*.cpp}"; } | sort -u)
    what="changed (since $(git rev-parse --short "$merge_base"), the merge base with $base)"
fi
# Only what the build compiles: the database names it.
compiled=()
for f in "${files[@]}"; do
    grep -qF "\"$PWD/$f\"" "$db" && compiled+=("$f")
done
if ((${#compiled[@]} == 0)); then
    echo "check-tidy: no $what C++ file of ${dirs[*]} to check"
    exit 0
fi
echo "check-tidy: ${#compiled[@]} $what file(s), $JOBS at a time" >&2
# GCC's options that clang does not know are not findings; "N warnings generated" (in
# headers outside HeaderFilterRegex, not shown) is not either.
printf '%s\n' "${compiled[@]}" |
    xargs -P "$JOBS" -n 1 "$CLANG_TIDY" -p "$BUILD_DIR" --quiet \
        --extra-arg=-Wno-unknown-warning-option --extra-arg=-Wno-ignored-optimization-argument \
        2> >(grep -vE '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$' >&2)
echo "check-tidy: ${#compiled[@]} file(s) clean"
