#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) in build-fuzz/ and runs each for SECONDS
# (default 60) on a temporary copy of the seed corpus fuzz/corpus/<target>/; the repository is not
# written to. Prints executions per second and total executions per target; exits 1 if any target
# found a crash, a sanitizer report, a timeout or an out-of-memory (reproducers are copied to
# $FUZZ_ARTIFACTS, default build-fuzz/artifacts/<target>/). FUZZ_ARGS adds libFuzzer flags, e.g.
# "-fork=1 -ignore_crashes=1" to go on after a crash; FUZZ_JOBS how many targets run at once
# (default: the cores). See docs/FUZZING.md.
#   scripts/fuzz.sh [SECONDS] [TARGET...]    targets: config oplist torch_csv pipeline search_result profile
#                                            hf_config
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(config oplist torch_csv pipeline search_result profile hf_config)
build=${FUZZ_BUILD_DIR:-build-fuzz}
artifacts=${FUZZ_ARTIFACTS:-$build/artifacts}

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (scripts/install-deps.sh)" >&2; exit 2; }
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
fi
# A build already instrumented for fuzzing (FUZZ_BUILD_DIR=build-asan after scripts/test.sh
# --sanitize) is used as it is: only the fuzz targets are linked.
if ! grep -qs '^PPSIM_FUZZ:BOOL=ON' "$build/CMakeCache.txt"; then
  # -O1 with line tables and assertions on: faster to build, still fast to run, asserts checked.
  cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" "${launcher[@]}" \
    -DPPSIM_FUZZ=ON -DPPSIM_BUILD_TESTS=OFF -DPPSIM_BUILD_BENCH=OFF -DPPSIM_GPU=OFF \
    -DPPSIM_MPI=OFF >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target "${targets[@]/#/fuzz_}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
failed=()
# Each target runs on a core of its own, FUZZ_JOBS (default: the cores) at once: the same time
# and executions per target, less wall time.
fuzz_one() {  # target: runs it, leaves its exit status in $work/$t.rc
  local t=$1 rc=0
  "$build/fuzz/fuzz_$t" "$work/$t" -dict="$work/$t.dict" -max_total_time="$seconds" \
    -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/$t/" ${FUZZ_ARGS:-} >"$work/$t.log" 2>&1 || rc=$?
  echo "$rc" >"$work/$t.rc"
}
jobs=${FUZZ_JOBS:-$(nproc)}
running=0
for t in "${targets[@]}"; do
  rm -rf "${artifacts:?}/$t"
  mkdir -p "$work/$t" "$artifacts/$t"
  cp fuzz/corpus/"$t"/* "$work/$t/"
  case $t in
    oplist) cat fuzz/oplist.dict >"$work/$t.dict" ;;
    config) cat fuzz/json.dict >"$work/$t.dict" ;;
    torch_csv) cat fuzz/torch_csv.dict >"$work/$t.dict" ;;
    search_result) cat fuzz/json.dict fuzz/search_result.dict >"$work/$t.dict" ;;
    profile) cat fuzz/json.dict fuzz/profile.dict >"$work/$t.dict" ;;
    hf_config) cat fuzz/hf_config.dict >"$work/$t.dict" ;;
    *) cat fuzz/json.dict fuzz/oplist.dict >"$work/$t.dict" ;;
  esac
  echo "== fuzz_$t: ${seconds}s"
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait
for t in "${targets[@]}"; do
  rc=$(cat "$work/$t.rc")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/$t.log")
  if [ -z "$execs" ]; then  # -fork mode prints no final stats: read its last status line
    last=$(grep -E '^#[0-9]+' "$work/$t.log" | tail -1)
    execs=$(sed -E 's/^#([0-9]+).*/\1/' <<<"$last")
    [ -n "$execs" ] && rate=$((execs / seconds))
  fi
  cp "$work/$t.log" "$artifacts/$t.log"
  # -fork=1 -ignore_crashes=1 goes on after a crash and exits 0: count the reproducers instead.
  found=$(find "$artifacts/$t" -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' | wc -l)
  [ "$found" -gt 0 ] && [ "$rc" -eq 0 ] && rc=1
  echo "fuzz_$t: exit $rc, ${execs:-?} executions, ${rate:-?} exec/s, $found reproducers"
  if [ "$rc" -ne 0 ]; then
    failed+=("$t")
    grep -E -A30 '^==[0-9]+==ERROR|runtime error|deadly signal|ALARM|out-of-memory|uncaught|terminate' \
      "$work/$t.log" | head -60 || tail -40 "$work/$t.log"
    ls "$artifacts/$t/"
  fi
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz.sh: failures in: ${failed[*]} (reproducers under $artifacts/)" >&2
  exit 1
fi
echo "fuzz.sh: no crashes"
