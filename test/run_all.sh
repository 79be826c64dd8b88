#!/usr/bin/env bash
# test/run_all.sh: runs every test of the project (what `make test` and .ci/run call).
#
# Each test prints PASS/FAIL lines and ends with "N passed, N failed". This runner shows each
# test's failures and summary, keeps full logs in build/logs/, and ends with the total line.
# It exits non-zero if any assertion failed or any test did not reach its summary line (a crash
# counts as a failure). A missing dependency is a failure; the one exception is SKIP_TESTS (names,
# space-separated) with SKIP_REASON, which `make test` sets for the GPU build checks on a machine
# without the CUDA toolkit, and for the suites the Makefile lists in SAN_SKIP_TESTS under
# SANITIZE=1: they are named in one line and not run. Under SANITIZE=1, SANITIZER_REPORTS names the folder where ASan and UBSan write their
# reports: a report written during a test fails it, whatever the test did with the program's output.
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
export PYTHON
# OpenMP threads wait by sleeping, not spinning: with the suites' small models, spinning threads
# beside one busy core made a step 5 to 20 times slower (measured with 2 threads and one core
# busy: a 64-token step of test/lib.sh's byte model 74 ms spinning, 3.8 ms sleeping, 3.7 ms on one
# thread; -e tiny 257, 54 and 50 ms)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
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
  if [ -n "${SANITIZER_REPORTS:-}" ]; then rm -rf "$SANITIZER_REPORTS"; mkdir -p "$SANITIZER_REPORTS"; fi
  start=$(date +%s)
  PYTHON=$PYTHON bash -c "$cmd" >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  # a report is a file with an error in it (ASan also writes a one-line warning when a program
  # switches stacks with swapcontext, as test/warp_emul.cpp does under its fiber annotations)
  reports=()
  if [ -n "${SANITIZER_REPORTS:-}" ]; then
    while IFS= read -r r; do reports+=("$r"); done < <(grep -lE 'ERROR: |runtime error: ' "$SANITIZER_REPORTS"/* 2>/dev/null)
  fi
  if [ ${#reports[@]} -gt 0 ]; then
    echo "[$name] sanitizer reports (${secs}s):"
    for r in "${reports[@]}"; do
      echo "    $r:"
      grep -m 3 -E 'ERROR|runtime error|SUMMARY' "$r" | sed 's/^/      /'
    done
    mkdir -p build/logs/sanitizer_kept && cp "${reports[@]}" build/logs/sanitizer_kept/
    total_fail=$((total_fail + 1))
    continue
  fi
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
  echo "skipped ${#skipped[@]} tests (${skipped[*]}): ${SKIP_REASON:-not available here}"
fi
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
