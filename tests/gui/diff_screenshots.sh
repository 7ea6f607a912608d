#!/usr/bin/env bash
# kiln-workbench --diff A,B --screenshots DIR (issue 21): two builds profiled by the CLI into a
# fresh store, then the Workbench opens their Sessions diff and saves it and the two-build
# Roofline as PNGs. Also: a malformed --diff is one error line and exit code 2.
# Usage: diff_screenshots.sh KILN KILN_WORKBENCH MODEL WORKDIR
set -euo pipefail
kiln=$1 workbench=$2 model=$3 dir=$4
rm -rf "$dir" && mkdir -p "$dir"
"$kiln" profile "$model" -O0 --repeat 3 --threads 2 --roofline --db "$dir/k.db" > "$dir/o0.txt"
"$kiln" profile "$model" -O3 --repeat 3 --threads 2 --roofline --db "$dir/k.db" > "$dir/o3.txt"
grep -q "build 2" "$dir/o3.txt" || { echo "FAIL: the second profile is not build 2"; cat "$dir/o3.txt"; exit 1; }
"$workbench" --db "$dir/k.db" --diff 1,2 --screenshots "$dir/shots"
for png in 07-sessions-diff.png 07b-roofline-diff.png; do
  f="$dir/shots/$png"
  [ -s "$f" ] || { echo "FAIL: $png was not written"; exit 1; }
  [ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || { echo "FAIL: $png is not a PNG"; exit 1; }
done
set +e
err=$("$workbench" --db "$dir/k.db" --diff 1 --screenshots "$dir/shots" 2>&1 >/dev/null); rc=$?
set -e
err=$(printf '%s\n' "$err" | grep -v '^QStandardPaths:' || true)  # Qt's note about XDG_RUNTIME_DIR
[ "$rc" = 2 ] || { echo "FAIL: --diff 1 exited with $rc, not 2"; exit 1; }
[ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && [[ $err == "error: --diff 1: give two build ids"* ]] ||
  { echo "FAIL: --diff 1 said: $err"; exit 1; }
echo "ok: both PNGs written; a malformed --diff is refused"
