# Sourced by the CLI test scripts (env: PPSIM, the binary; SRC, the checkout). It makes $tmp, a
# folder removed at exit, and $out in it (hidden: not counted as a leftover), and counts the checks
# in pass and fail. A script ends with `finish`, which exits non-zero when a check failed.
#   good MSG / bad MSG: one check passed / failed (a failure also prints the last output)
#   expect CODE ARGS...: runs "$PPSIM" ARGS with stdout and stderr in "$out", checks its exit code
#     (stopped after $run_timeout seconds where a script sets it)
#   has TEXT / lacks TEXT: "$out" holds TEXT / does not
set -u
fail=0
pass=0
tmp=$(mktemp -d)
# (write permission first: a test may leave a directory it locked)
trap 'chmod -R u+rwx "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
out="$tmp/.out"

bad() { local m="$*"; echo "FAIL: ${m:0:300}"; [ -f "$out" ] && head -c 3000 "$out"; fail=$((fail + 1)); }
good() { local m="$*"; echo "ok: ${m:0:300}"; pass=$((pass + 1)); }
expect() {  # expect CODE ARGS...
  local want=$1; shift
  ${run_timeout:+timeout "$run_timeout"} "$PPSIM" "$@" >"$out" 2>&1
  local got=$?
  if [ "$got" != "$want" ]; then bad "ppsim $* exited $got, expected $want"; else good "ppsim $* -> $got"; fi
}
has() { if grep -qF -- "$1" "$out"; then good "output has '$1'"; else bad "output lacks '$1'"; fi; }
lacks() { if grep -qF -- "$1" "$out"; then bad "output has '$1'"; else good "output lacks '$1'"; fi; }
finish() {
  echo "$pass passed, $fail failed"
  [ "$fail" = 0 ]
}
