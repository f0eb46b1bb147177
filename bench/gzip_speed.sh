#!/usr/bin/env bash
# How fast gzip encoders compress a trace: the P=64 1F1B JSON trace (199 MiB) written to tmpfs,
# then compressed by GNU gzip (`gzip -1`, its own deflate, not zlib) and ISA-L's `igzip -0..-3`
# (Debian's gzip and isal packages; a tool not installed is skipped), best of 3 each; then ppsim
# itself on one thread (PPSIM_JOBS=1: encode, compress and write in turn) with `.json` and
# `.json.gz`: the difference is its compression less the writing of the bytes it saves.
# Usage: bench/gzip_speed.sh PPSIM
set -euo pipefail
ppsim=$1
cd "$(dirname "$0")/.."
dir=$(mktemp -d /dev/shm/ppsim-gzip.XXXXXX)
trap 'rm -rf "$dir"' EXIT
p64=(configs/1f1b.json --set schedule.ranks=64 --set schedule.microbatches=1024)
"$ppsim" run "${p64[@]}" --trace "$dir/t.json" >/dev/null
best() {  # best user+sys and wall seconds of 3 runs of "$@"
  local b=""
  for _ in 1 2 3; do
    local t
    t=$( { /usr/bin/time -f "%e %U %S" "$@" >/dev/null; } 2>&1 | tail -1)
    b=$(printf '%s\n%s\n' "$b" "$t" | awk 'NF==3 {c=$2+$3; if (best=="" || c<best) {best=c; w=$1}} END {printf "%.2f %.2f", w, best}')
  done
  echo "$b"
}
size=$(stat -c %s "$dir/t.json")
echo "P=64 1F1B JSON trace, $((size / 1048576)) MiB on tmpfs; best of 3 (by CPU), $(nproc) cpus"
echo
printf '%-28s %8s %8s %12s %7s\n' encoder "wall s" "CPU s" "file bytes" "GB/s"
for tool in "gzip -1" "igzip -0" "igzip -1" "igzip -2" "igzip -3"; do
  read -r cmd level <<<"$tool"
  command -v "$cmd" >/dev/null || { printf '%-28s (not installed)\n' "$tool"; continue; }
  read -r wall cpu < <(best sh -c "$cmd $level -c '$dir/t.json' > '$dir/t.gz'")
  printf '%-28s %8s %8s %12s %7.2f\n' "$tool" "$wall" "$cpu" "$(stat -c %s "$dir/t.gz")" \
    "$(awk -v s="$size" -v c="$cpu" 'BEGIN {print s / c / 1e9}')"
done
echo
for ext in json json.gz; do
  read -r wall cpu < <(best env PPSIM_JOBS=1 "$ppsim" run "${p64[@]}" --trace "$dir/o.$ext")
  printf '%-28s %8s %8s %12s\n' "ppsim, PPSIM_JOBS=1, .$ext" "$wall" "$cpu" "$(stat -c %s "$dir/o.$ext")"
done
