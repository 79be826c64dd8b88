# test/lib.sh: the assertion harness of the shell tests (sourced). Mirrors test/harness.h.
#
#   pass MSG / fail MSG     record one assertion
#   check MSG CMD...        run CMD; PASS if it exits 0
#   expect_error MSG PATTERN CMD...
#                           CMD must exit non-zero with exactly one stderr line that matches
#                           the extended regex PATTERN (the "one clear line" rule)
#   run_sub CMD...          run a test program that ends with "N passed, N failed" and add its
#                           counts (a missing summary line counts as one failure, and so does a
#                           non-zero exit status: a crash after the summary must not pass)
#   near A B TOL, far A B TOL   |A - B| <= TOL, > TOL (an empty value fails both)
#   finish                  print "N passed, N failed"; exit non-zero on any failure
#
# and the small byte model that suites train where a step's arithmetic is beside the point (run
# folders, resume, the GPU trainer's host build): L4C64 like -e tiny, on TinyShakespeare as bytes
# (make data; doc/formats.md "The byte vocabulary and its shards"), where the 256-way output layer costs a 200th of GPT-2's.
TINY_BYTES=L4C64H4T64V256
TSB_TRAIN=dev/data/tinyshakespeare/tiny_shakespeare_bytes_train.bin
TSB_VAL=dev/data/tinyshakespeare/tiny_shakespeare_bytes_val.bin
TSB_TOK=bytes_tokenizer.bin
T_PASS=0
T_FAIL=0
pass() { T_PASS=$((T_PASS + 1)); echo "PASS $*"; }
fail() { T_FAIL=$((T_FAIL + 1)); echo "FAIL $*"; }
check() {
  local msg=$1; shift
  if "$@"; then pass "$msg"; else fail "$msg"; fi
}
expect_error() {
  local msg=$1 pattern=$2; shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  local lines
  lines=$(printf '%s' "$err" | grep -c '^')
  if [ "$rc" -ne 0 ] && [ "$lines" -eq 1 ] && printf '%s' "$err" | grep -Eq -- "$pattern"; then
    pass "$msg: $err"
  else
    fail "$msg: exit $rc, $lines stderr line(s), expected /$pattern/: $(printf '%s' "$err" | head -3 | tr '\n' '|')"
  fi
}
run_sub() {
  local out rc summary p f
  out=$("$@" 2>&1)
  rc=$?
  echo "$out"
  summary=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
  if [ -z "$summary" ]; then
    fail "$* produced no summary line (exit $rc)"
    return
  fi
  p=${summary%% passed*}; f=${summary#*passed, }; f=${f%% failed*}
  T_PASS=$((T_PASS + p)); T_FAIL=$((T_FAIL + f))
  # A program whose own assertions all passed but that exits non-zero (crash in cleanup, a
  # leak checker, an error after the summary) is a failure too.
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then fail "$* exited $rc after \"$summary\""; fi
}
# near A B TOL / far A B TOL: |A - B| <= TOL / > TOL for two numbers; an empty value fails both
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= t) }'; }
far() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d > t) }'; }
finish() {
  echo "$T_PASS passed, $T_FAIL failed"
  [ "$T_FAIL" -eq 0 ]
}

# The samples of a log (the line after each "generating:" / "---" pair), one per line.
samples_of() { awk '/^generating:$/ {g = 1; next} g == 1 && /^---$/ {g = 2; next} g == 2 {print; g = 0}' "$1"; }
