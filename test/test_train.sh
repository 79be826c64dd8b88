#!/usr/bin/env bash
# test/test_train.sh: training-loop semantics of train_gpt2.
#   - gradient accumulation: B 4 in one micro-step and B 2 in two micro-steps read the same tokens
#     (-a 1: the first val window, reset every step) and must give the same loss, norm and update
#     (to fp32 rounding: 1e-5 relative over 3 steps);
#   - the loss falls when overfitting one batch;
#   - the lr column follows -k/-u/-q (t = u is the first decay step, r = 0: still the peak);
#     main.log lines have llm.c's format;
#   - -h 1 -ht: the zero-shot evals at the val steps (needs `make evals`);
#   - one writer per run folder: a second trainer on a folder in use stops with one line naming
#     the first one's PID and writes nothing there; once the first has ended (killed), the folder
#     is free again.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
d=build/tmp_train
rm -rf "$d"; mkdir -p "$d"
TS=dev/data/tinyshakespeare
COMMON=(-e tiny -i "$TS/tiny_shakespeare_train.bin" -j "$TS/tiny_shakespeare_val.bin" -t 32 -x 3 -l 1e-3 -v 0 -m 1 -s 0 -a 1)
./train_gpt2 "${COMMON[@]}" -b 4 -o "$d/one" > "$d/one.log" 2>&1
./train_gpt2 "${COMMON[@]}" -b 2 -d 128 -o "$d/two" > "$d/two.log" 2>&1
check "B 2 x 2 micro-steps runs 2 micro-steps" grep -q "B 2 x T 32 x 2 micro-steps = 128 tokens" "$d/two.log"
cols() { grep -E '^step ' "$1" | awk -F'|' '{print $2, $3}' | sed -E 's/\([^)]*\)//g; s/loss|norm//g'; }
cmp_out=$(paste <(cols "$d/one.log") <(cols "$d/two.log") | awk '
  { n++; for (i = 1; i <= 2; i++) { a = $i; b = $(i + 2); r = (a - b) / (b == 0 ? 1 : b); if (r < 0) r = -r; if (r > w) w = r } }
  END { printf "%d %.2e", n, w }')
n=${cmp_out% *}; worst=${cmp_out#* }
check "grad accumulation: 3 steps of (loss, norm) equal to 1e-5 relative (worst $worst)" \
  awk -v n="$n" -v w="$worst" 'BEGIN { exit !(n == 3 && w <= 1e-5) }'
first=$(grep -E '^step +1/' "$d/one.log" | awk '{print $5}')
last=$(grep -E '^step +3/' "$d/one.log" | awk '{print $5}')
check "overfitting one batch lowers the loss ($first -> $last)" awk -v a="$first" -v b="$last" 'BEGIN { exit !(a != "" && b != "" && b + 0 < a + 0) }'
check "main.log train lines: s:%d trl:%.4f lr:%.6f norm:%.2f" grep -Eq '^s:2 trl:[0-9]+\.[0-9]{4} lr:0\.[0-9]{6} norm:[0-9]+\.[0-9]{2}$' "$d/one/main.log"
check "main.log val line at the last step: s:3 tel:%.4f" grep -Eq '^s:3 tel:[0-9]+\.[0-9]{4}$' "$d/one/main.log"

./train_gpt2 "${COMMON[@]}" -b 1 -x 10 -k linear -u 2 -q 0.1 -l 1e-3 > "$d/lr.log" 2>&1
lrs=$(grep -E '^step ' "$d/lr.log" | awk -F'|' '{print $4}' | awk '{print $2}' | tr '\n' ' ')
check "lr column for -k linear -u 2 -q 0.1 -l 1e-3 over 10 steps: $lrs" \
  test "$lrs" = "5.00e-04 1.00e-03 1.00e-03 8.88e-04 7.75e-04 6.63e-04 5.50e-04 4.38e-04 3.25e-04 2.12e-04 "
# -h 1 with -ht: every listed task scored at the val steps, llm.c's "eval:" line for HellaSwag and
# "eval_<task>:" for the others; an unknown task is one error line
./train_gpt2 -e L2C64H2T256 -i "$TS/tiny_shakespeare_train.bin" -j "$TS/tiny_shakespeare_val.bin" -b 4 -t 256 -x 2 -v 2 -m 1 -s 0 \
  -h 1 -hn 8 -ht hellaswag,piqa,lambada -o "$d/evals" > "$d/evals.log" 2>&1
check "-h 1 -ht hellaswag,piqa,lambada prints the three results" \
  bash -c "grep -q '^HellaSwag: [0-9]*/8 = ' '$d/evals.log' && grep -q '^piqa: [0-9]*/8 = ' '$d/evals.log' && grep -q '^lambada: [0-9]*/8 = ' '$d/evals.log'"
check "main.log: s:2 eval: (HellaSwag, llm.c's line), eval_piqa:, eval_lambada:" \
  bash -c "grep -Eq '^s:2 eval:[0-9.]+$' '$d/evals/main.log' && grep -Eq '^s:2 eval_piqa:[0-9.]+$' '$d/evals/main.log' && grep -Eq '^s:2 eval_lambada:[0-9.]+$' '$d/evals/main.log'"
expect_error "-ht with an unknown task" "^error: -ht 'mmlu': unknown task" \
  ./train_gpt2 -e L2C64H2T256 -i "$TS/tiny_shakespeare_train.bin" -j "$TS/tiny_shakespeare_val.bin" -b 4 -t 256 -x 1 -s 0 -h 1 -ht piqa,mmlu
# stdout into a file is written line by line: a d12 model's start-up table is in the file long
# before its first val loss is computed (block buffering held it back until the first flush)
./train_gpt2 -e d12 -i "$TS/tiny_shakespeare_train.bin" -j "$TS/tiny_shakespeare_val.bin" -b 1 -t 64 -x 10 -m 20 \
  > "$d/live.log" 2>&1 &
pid=$!
seen=0
for _ in $(seq 1 600); do
  if grep -q '^train: ' "$d/live.log" 2>/dev/null && ! grep -q '^val loss' "$d/live.log"; then seen=1; break; fi
  grep -q '^val loss' "$d/live.log" 2>/dev/null && break
  sleep 0.05
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
check "stdout redirected to a file: the start-up lines are there while the first evaluation runs" test "$seen" = 1
check "the run ends with a summary: steps, time, and the plot command for -o" \
  bash -c "grep -Eq '^run summary: 3 of 3 steps in [0-9]+m[0-9]{2}s; best val loss [0-9.]+ at step 3$' '$d/one.log' && grep -q '^  plot: .*scripts/plot_logs.py $d/one$' '$d/one.log'"
check "the ETA field is a time (recent steps' wall time), not nan or inf" \
  bash -c "grep -E '^step ' '$d/one.log' | grep -Evq 'eta ([0-9]+h[0-9]{2}m|[0-9]+m[0-9]{2}s)\$' && exit 1 || exit 0"

# Samples as llm.c's train_gpt2.c draws them: -g 5 (genT) is 4 tokens after <|endoftext|>, and one
# RNG is carried from sample to sample, so with -l 0 (weights unchanged) the two samples differ.
# Run where gpt2_tokenizer.bin is absent, so tokens print as <id>.
mkdir -p "$d/notok"
root=$PWD
(cd "$d/notok" && "$root/train_gpt2" -e tiny -i "$root/$TS/tiny_shakespeare_train.bin" -j "$root/$TS/tiny_shakespeare_val.bin" \
   -b 1 -t 16 -x 2 -l 0 -v 0 -m 1 -s 1 -g 5) > "$d/sample.log" 2>&1
mapfile -t S < <(samples_of "$d/sample.log")
counts=$(for x in "${S[@]}"; do grep -o '<[0-9]*>' <<<"$x" | wc -l; done | tr '\n' ' ')
check "-g 5: two samples of 4 tokens each (counts: ${counts})" test "${#S[@]}" = 2 -a "$counts" = "4 4 "
check "the CPU trainer's sampling RNG carries over: the second sample differs (${S[0]:-} / ${S[1]:-})" \
  test -n "${S[0]:-}" -a "${S[0]:-}" != "${S[1]:-}"
# one writer per run folder
LOCKRUN=(-e tiny -i "$TS/tiny_shakespeare_train.bin" -j "$TS/tiny_shakespeare_val.bin" -b 2 -t 32 -v 0 -m 1 -s 0 -n 0)
./train_gpt2 "${LOCKRUN[@]}" -x 100000 -o "$d/locked" > "$d/locked.log" 2>&1 &
holder=$!
for _ in $(seq 1 100); do grep -q '^s:' "$d/locked/main.log" 2>/dev/null && break; sleep 0.1; done
cp "$d/locked/flags.txt" "$d/locked.flags"
expect_error "a second trainer on a run folder in use is refused, naming the holder's PID" \
  "^error: $d/locked: another trainer \(PID $holder\) is writing this run folder" \
  ./train_gpt2 "${LOCKRUN[@]}" -x 2 -o "$d/locked"
check "... and wrote nothing there: flags.txt is the first run's (-x 100000)" \
  bash -c "cmp -s $d/locked/flags.txt $d/locked.flags && grep -q '^-x 100000$' $d/locked/flags.txt"
kill -9 "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
./train_gpt2 "${LOCKRUN[@]}" -x 2 -start_over 1 -o "$d/locked" > "$d/locked2.log" 2>&1; rc=$?
check "once the holder is killed the folder is free: a new run there starts over (exit $rc)" test "$rc" -eq 0
finish
