#!/usr/bin/env bash
# test/run_all.sh: runs every test of the project (what `make test` and .ci/run call).
#
# Each test prints PASS/FAIL lines and ends with "N passed, N failed". This runner shows each
# test's failures and summary, keeps full logs in build/logs/, and ends with the total line.
# It exits non-zero if any assertion failed or any test did not reach its summary line (a crash
# counts as a failure). A missing dependency is a failure; the one exception is SKIP_TESTS (names,
# space-separated) with SKIP_REASON, which `make test` sets for the GPU build checks on a machine
# without the CUDA toolkit: they are named in one line and not run.
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
export PYTHON
mkdir -p build/logs

# The tests: every test/suites.d/*.list file (in name order), lines "name|command".
TESTS=()
for list in test/suites.d/*.list; do
  while IFS= read -r line; do
    case "$line" in ''|'#'*) continue ;; esac
    TESTS+=("$line")
  done < "$list"
done

total_pass=0
total_fail=0
skipped=()
for entry in "${TESTS[@]}"; do
  name=${entry%%|*}
  cmd=${entry#*|}
  if [[ " ${SKIP_TESTS:-} " == *" $name "* ]]; then
    skipped+=("$name")
    continue
  fi
  log=build/logs/$name.log
  start=$(date +%s)
  PYTHON=$PYTHON bash -c "$cmd" >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
  if [ -z "$summary" ]; then
    echo "[$name] no summary line (exit $rc) after ${secs}s; last lines of $log:"
    tail -n 15 "$log" | sed 's/^/    /'
    total_fail=$((total_fail + 1))
    continue
  fi
  p=${summary%% passed*}
  f=${summary#*passed, }
  f=${f%% failed*}
  grep -E '^FAIL' "$log" | sed 's/^/    /'
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "    exit status $rc with no failed assertion"
    f=1
  fi
  echo "[$name] $summary (${secs}s)"
  total_pass=$((total_pass + p))
  total_fail=$((total_fail + f))
done
if [ ${#skipped[@]} -gt 0 ]; then
  echo "skipped ${#skipped[@]} GPU checks (${skipped[*]}): ${SKIP_REASON:-not available here}"
fi
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
