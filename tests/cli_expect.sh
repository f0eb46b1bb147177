# Sourced by the CLI test scripts: `expect CODE ARGS...` runs "$PPSIM" ARGS with stdout and stderr
# in "$out" and checks its exit code; `has TEXT` checks that "$out" holds TEXT. A failure prints
# the output and sets fail=1.
expect() {  # expect CODE ARGS...
  local want=$1; shift
  "$PPSIM" "$@" >"$out" 2>&1
  local got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: ppsim $* exited $got, expected $want"; head -c 2000 "$out"; fail=1
  else
    echo "ok: ppsim $* -> $got"
  fi
}
has() { if grep -qF -- "$1" "$out"; then echo "ok: has '$1'"; else echo "FAIL: lacks '$1'"; head -c 2000 "$out"; fail=1; fi; }
