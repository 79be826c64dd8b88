#!/usr/bin/env bash
# test/run_all.sh: runs every test of the project (what `make test` and .ci/run call).
#
# Each test prints PASS/FAIL lines and ends with "N passed, N failed". This runner shows each
# test's failures and summary, keeps full logs in build/logs/, and ends with the total line.
# It exits non-zero if any assertion failed or any test did not reach its summary line (a crash
# counts as a failure). Nothing is skipped: a missing dependency is a failure.
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
export PYTHON
mkdir -p build/logs

TESTS=(
  "headers_cxx|build/test_headers_cxx"
  "rand|$PYTHON test/test_rand.py build/test_rand"
  "schedulers|build/test_schedulers"
  "schedule|build/test_schedule"
  "neutrality|build/test_neutrality"
  "attention_fd|build/test_attention_fd"
  "dataloader|build/test_dataloader"
  "checkpoint|bash test/test_checkpoint.sh"
  "gpt2_vs_pytorch|bash test/test_gpt2.sh"
  "train|bash test/test_train.sh"
  "resume|bash test/test_resume.sh"
  "cli|bash test/test_cli.sh"
  "data|$PYTHON test/test_data.py"
  "reference|$PYTHON test/test_reference.py"
)

total_pass=0
total_fail=0
for entry in "${TESTS[@]}"; do
  name=${entry%%|*}
  cmd=${entry#*|}
  log=build/logs/$name.log
  start=$(date +%s)
  bash -c "$cmd" >"$log" 2>&1
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
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
