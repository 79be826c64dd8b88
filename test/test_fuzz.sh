#!/usr/bin/env bash
# test/test_fuzz.sh: the file readers under fuzzing (test/fuzz/, mk/fuzz.mk).
#   1. the seed corpus and the regression inputs replayed through every reader, built with gcc,
#      ASan and UBSan: ok-* accepted, bad-* rejected with an error, crash-* no longer crashing;
#   2. each libFuzzer target for FUZZ_SMOKE_SECONDS (default 8) from that corpus: no crash, no
#      sanitizer report (`make fuzz` runs them for 5 minutes each). Without clang's libFuzzer the
#      smoke runs are skipped with a line saying so; under CI=true that is a failure.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
TARGETS="checkpoint state shard tokenizer evalfile layer_table"
export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1

for t in $TARGETS; do
  out=$(./build/fuzz/replay_$t test/fuzz/corpus/$t/* 2>&1)
  rc=$?
  n=$(ls test/fuzz/corpus/$t | wc -l)
  summary=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, 0 failed$')
  if [ "$rc" -eq 0 ] && [ "$summary" = "$n passed, 0 failed" ]; then
    pass "replay_$t: the $n corpus inputs behave as named ($(ls test/fuzz/corpus/$t | grep -c '^ok-') accepted, $(ls test/fuzz/corpus/$t | grep -c '^bad-') rejected)"
  else
    fail "replay_$t: exit $rc: $(printf '%s\n' "$out" | grep -E '^FAIL|ERROR|runtime error' | head -3 | tr '\n' '|')"
  fi
done
# control: an input named ok- that the reader rejects fails the replay
ctl=build/tmp_fuzz
rm -rf "$ctl"; mkdir -p "$ctl"
cp test/fuzz/corpus/checkpoint/bad-truncated.bin "$ctl/ok-renamed.bin"
check "control: a rejected input named ok-* fails the replay" bash -c "! ./build/fuzz/replay_checkpoint '$ctl/ok-renamed.bin' > /dev/null 2>&1"

if ls build/fuzz/fuzz_checkpoint > /dev/null 2>&1; then
  out=$(FUZZ_SECONDS=${FUZZ_SMOKE_SECONDS:-8} FUZZ_TARGETS="$TARGETS" bash test/fuzz/run.sh)
  printf '%s\n' "$out" | grep -E '^(PASS|FAIL)' | while IFS= read -r line; do echo "$line"; done
  p=$(printf '%s\n' "$out" | grep -c '^PASS')
  f=$(printf '%s\n' "$out" | grep -c '^FAIL')
  T_PASS=$((T_PASS + p))
  T_FAIL=$((T_FAIL + f))
  printf '%s\n' "$out" | grep -E '^    ' | head -10
elif [ "${CI:-}" = true ]; then
  fail "the libFuzzer targets are not built (clang with libFuzzer missing; Debian: clang libclang-rt-dev)"
else
  echo "skipped: the libFuzzer smoke runs (no clang with libFuzzer here; the corpus replay ran)"
fi
finish
