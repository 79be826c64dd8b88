#!/usr/bin/env bash
# test/fuzz/run.sh: each libFuzzer target of mk/fuzz.mk for FUZZ_SECONDS (default 300) from a
# working copy of its seed corpus (test/fuzz/corpus/<target>, read only). A crash, a sanitizer
# report or a timeout fails the target and leaves the input in build/fuzz/crashes/<target>/; add it
# to the corpus as crash-<name> once the reader is fixed (make test replays it). Ends with
# "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
SECONDS_EACH=${FUZZ_SECONDS:-300}
TARGETS=${FUZZ_TARGETS:-checkpoint state shard tokenizer evalfile layer_table}
passed=0
failed=0
for t in $TARGETS; do
  bin=build/fuzz/fuzz_$t
  work=build/fuzz/work/$t
  crashes=build/fuzz/crashes/$t
  log=build/fuzz/$t.log
  mkdir -p "$work" "$crashes"
  # inputs an earlier run left are kept, in crashes/<target>.earlier/: only this run's count
  if [ -n "$(ls -A "$crashes" 2>/dev/null)" ]; then
    mkdir -p "$crashes.earlier" && mv "$crashes"/* "$crashes.earlier/"
    echo "note: fuzz_$t: inputs of an earlier run moved to $crashes.earlier/ (this run counts its own)"
  fi
  if [ ! -x "$bin" ]; then
    echo "FAIL fuzz_$t: $bin is not built (make fuzz_bins; needs clang with libFuzzer)"
    failed=$((failed + 1))
    continue
  fi
  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1 \
    "$bin" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$crashes/" "$work" "test/fuzz/corpus/$t" > "$log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  found=$(ls "$crashes" 2>/dev/null | head -3 | tr '\n' ' ')
  if [ "$rc" -eq 0 ] && [ -z "$found" ]; then
    echo "PASS fuzz_$t: ${runs:-?} inputs in ${SECONDS_EACH} s, no crash (corpus $(ls "$work" | wc -l) inputs)"
    passed=$((passed + 1))
  else
    echo "FAIL fuzz_$t: exit $rc; inputs in $crashes: ${found:-none}; log $log:"
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -5 | sed 's/^/    /'
    failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
