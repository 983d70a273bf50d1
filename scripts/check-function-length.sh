#!/usr/bin/env bash
# No C++ function of cli/ core/ collectors/ reporters/ trace/ is longer than 120 lines
# (lizard's length: first line to last), except those scripts/function-length-allow.txt
# still lists. Prints the longest ones; exits 1 naming each function over the limit
# that the list does not allow; an entry no longer over it is named, to be removed. lizard comes from scripts/devtools.sh (build/devtools-venv); exit 77
# (CTest: skipped) where it is not installed and cannot be.
#   scripts/check-function-length.sh [--top N]   (N longest printed, default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=120
top=10
[ "${1:-}" != --top ] || top=$2
LIZARD=${LIZARD:-${MEMTOOL_DEVTOOLS:-build/devtools-venv}/bin/lizard}
if [ ! -x "$LIZARD" ] && ! scripts/devtools.sh >&2; then
    echo "check-function-length: skipped: no lizard ($LIZARD), and scripts/devtools.sh could not install it"
    exit 77
fi
# -l cpp: C and C++ only (not reporters/html's JavaScript).
functions=$(mktemp)
trap 'rm -f "$functions"' EXIT
"$LIZARD" -l cpp --csv cli core collectors reporters trace >"$functions"
/usr/bin/python3 - "$LIMIT" "$top" scripts/function-length-allow.txt "$functions" <<'PY'
import csv, sys
limit, top, allow_file, functions = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
allowed = [line.strip() for line in open(allow_file) if line.strip() and not line.startswith("#")]
# NLOC, CCN, tokens, parameters, length, location, file, function, long name, start, end
rows = sorted(((int(r[4]), r[6], r[7], int(r[9])) for r in csv.reader(open(functions))), reverse=True)

def matches(entry, path, name):
    file, _, function = entry.partition(":")
    return file == path and (name == function or name.endswith("::" + function))

print(f"check-function-length: the {top} longest of {len(rows)} functions (limit {limit} lines):")
for length, path, name, start in rows[:top]:
    print(f"  {length:4d}  {path}:{start}  {name}")
over = [(length, path, name, start) for length, path, name, start in rows if length > limit]
bad = [r for r in over if not any(matches(e, r[1], r[2]) for e in allowed)]
stale = [e for e in allowed if not any(matches(e, r[1], r[2]) for r in over)]
for length, path, name, start in bad:
    print(f"{path}:{start}: {name} is {length} lines, over {limit}: split it", file=sys.stderr)
for e in stale:
    print(f"{allow_file}: {e} is not over {limit} lines (or gone): remove it from the list", file=sys.stderr)
if bad:
    sys.exit(1)
print(f"check-function-length: none over {limit} lines but the {len(allowed)} that {allow_file} still allows")
PY
