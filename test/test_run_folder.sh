#!/usr/bin/env bash
# test/test_run_folder.sh: the run folder is the user's data (llmc/run_folder.h,
# llmc/stop_signal.h; doc/formats.md "Optimizer/DataLoader state": the run folder), with the CPU trainer:
#   - a second run on a folder that holds one is refused and changes nothing; -start_over 1 moves
#     the old run's files (byte for byte) into replaced_1/, then replaced_2/;
#   - -y 1 on a missing folder or one without a run, and no -e: one error, nothing created; with -e
#     the restart-loop habit starts the run; -y 1 on a folder with flags.txt and no checkpoint
#     starts that run (its flags) from scratch and moves the earlier files aside;
#   - Ctrl-C (SIGINT) and SIGTERM: the step finishes, a checkpoint is written, the resume command
#     printed, exit 130 / 143; the resumed run ends byte-identical to an uninterrupted one, with
#     the same main.log, and -nk prunes the off-schedule checkpoint; a second Ctrl-C exits at once;
#   - kill -9 after a checkpoint: -y 1 ends byte-identical, and main.log drops the records past the
#     checkpoint instead of repeating them;
#   - resuming with another -b or -t than the run's names the flag and the run's value;
#   - make train checkpoints every 50 steps, keeps the last two and resumes with -y 1.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
d=build/tmp_run_folder
rm -rf "$d"
mkdir -p "$d"
TS=dev/data/tinyshakespeare
RUN=(-e "$TINY_BYTES" -i "$TSB_TRAIN" -j "$TSB_VAL" -tok "$TSB_TOK" -b 2 -t 32 -v 2 -m 1 -s 0)
# GPT-2's vocabulary where a step must be slow (the second Ctrl-C arrives during one)
SLOW=(-e tiny -i "$TS/tiny_shakespeare_train.bin" -j "$TS/tiny_shakespeare_val.bin" -b 8 -t 64 -v 2 -m 1 -s 0)
md5() { md5sum "$@" | awk '{print $1}' | tr '\n' ' '; }

# --- a folder that holds a run -----------------------------------------------------------------
./train_gpt2 "${RUN[@]}" -x 4 -n 2 -o "$d/A" > "$d/A1.log" 2>&1
check "a first run writes its folder" test -f "$d/A/DONE_00000004"
before=$(cd "$d/A" && md5 main.log flags.txt model_00000004.bin state_00000004_00000.bin)
expect_error "a second run on a folder that holds one is refused, saying what it holds and the ways on" \
  "^error: $d/A holds a run \(main.log, flags.txt, 2 complete checkpoints \(newest: step 4\), 8 files in all\): -y 1 resumes it; -start_over 1 moves its files into $d/A/replaced_<n>/ and starts this run there; or give another -o$" \
  ./train_gpt2 "${RUN[@]}" -x 2 -seed 7 -o "$d/A"
check "... and changed nothing there" test "$(cd "$d/A" && md5 main.log flags.txt model_00000004.bin state_00000004_00000.bin)" = "$before"
./train_gpt2 "${RUN[@]}" -x 2 -seed 7 -n 2 -start_over 1 -o "$d/A" > "$d/A2.log" 2>&1; rc=$?
check "-start_over 1 starts the new run there (exit $rc)" test "$rc" -eq 0 -a -f "$d/A/DONE_00000002" -a ! -e "$d/A/DONE_00000004"
check "... saying where the old files went" \
  grep -q "^-start_over 1: moved the earlier run's files (main.log, flags.txt, 2 complete checkpoints (newest: step 4), 8 files in all) into $d/A/replaced_1/$" "$d/A2.log"
check "... which hold the old run byte for byte" \
  test "$(cd "$d/A/replaced_1" && md5 main.log flags.txt model_00000004.bin state_00000004_00000.bin)" = "$before"
check "... and the new run's flags.txt is the new run's (-seed 7)" grep -qx -- '-seed 7' "$d/A/flags.txt"
./train_gpt2 "${RUN[@]}" -x 2 -n 2 -start_over 1 -o "$d/A" > "$d/A3.log" 2>&1
check "a second -start_over 1 moves the runs aside into replaced_2/, replaced_1/ untouched" \
  bash -c "test -f '$d/A/replaced_2/DONE_00000002' -a -f '$d/A/replaced_1/DONE_00000004' && grep -qx -- '-seed 7' '$d/A/replaced_2/flags.txt'"
expect_error "-start_over 1 with -y 1 is one error" "^error: -start_over 1 starts the run in -o over; -y 1 resumes it: give one of them$" \
  ./train_gpt2 "${RUN[@]}" -x 2 -start_over 1 -y 1 -o "$d/A"
expect_error "-start_over 1 without -o is one error" "^error: -start_over 1 starts the run in -o over, but -o is not set$" \
  ./train_gpt2 "${RUN[@]}" -x 2 -start_over 1
expect_error "-start_over 2 is out of range: one error naming the flag" "^error: -start_over" ./train_gpt2 "${RUN[@]}" -start_over 2 -o "$d/A"
mkdir -p "$d/notes"
echo "my notes" > "$d/notes/README.txt"
./train_gpt2 "${RUN[@]}" -x 2 -n 2 -o "$d/notes" > "$d/notes.log" 2>&1; rc=$?
check "a folder holding only other files is not a run: the run starts there (exit $rc) and leaves them" \
  bash -c "[ $rc -eq 0 ] && [ \"\$(cat '$d/notes/README.txt')\" = 'my notes' ]"

# a name that only looks like a marker (DONE_ plus a sign or 7 digits) is not a checkpoint
mkdir -p "$d/lookalike"
touch "$d/lookalike/DONE_-0000001" "$d/lookalike/DONE_0000001"
./train_gpt2 "${RUN[@]}" -x 2 -n 2 -o "$d/lookalike" > "$d/lookalike.log" 2>&1; rc=$?
check "files that only look like DONE_ markers are not a run: the run starts (exit $rc)" test "$rc" -eq 0 -a -f "$d/lookalike/DONE_00000002"

# --- -y 1 where there is no run ------------------------------------------------------------------
expect_error "-y 1 on a missing folder without -e: one error naming it" \
  "^error: $d/nosuch: -y 1: no such run folder \(nothing was created\); check -o, or give -e to start a run there$" \
  ./train_gpt2 -o "$d/nosuch" -y 1
check "... and nothing was created" test ! -e "$d/nosuch"
mkdir -p "$d/empty"
expect_error "-y 1 on a folder without a run and without -e: one error" \
  "^error: $d/empty: -y 1: this folder holds no run to resume \(no flags.txt, no complete checkpoint\) and no -e names a model to start one" \
  ./train_gpt2 -o "$d/empty" -y 1
check "... which stays empty" test -z "$(ls -A "$d/empty")"
./train_gpt2 "${RUN[@]}" -x 2 -n 2 -y 1 -o "$d/loop" > "$d/loop.log" 2>&1
check "-y 1 with -e on a missing folder starts the run (a restart loop's first launch)" \
  bash -c "grep -q '^-y 1: $d/loop holds no run yet: starting from scratch$' '$d/loop.log' && test -f '$d/loop/DONE_00000002'"

# --- -y 1 on a folder with flags.txt and no checkpoint ----------------------------------------------
mkdir -p "$d/F"
printf -- '-e %s\n-i %s\n-j %s\n-tok %s\n-b 2\n-t 32\n-x 3\n-n 3\n-v 3\n-m 1\n-s 0\n-seed 5\n' \
  "$TINY_BYTES" "$TSB_TRAIN" "$TSB_VAL" "$TSB_TOK" > "$d/F/flags.txt"
printf 's:0 tel:11.0\n' > "$d/F/main.log"
cp "$d/F/flags.txt" "$d/F.flags"
./train_gpt2 -o "$d/F" -y 1 > "$d/F.log" 2>&1; rc=$?
check "-y 1 on a flags-only folder starts that run from scratch (exit $rc), saying so" \
  grep -q "^-y 1: $d/F has no complete checkpoint: starting the run of its flags.txt from scratch$" "$d/F.log"
check "... with its flags: its -e and -seed 5, its -x 3" \
  bash -c "grep -q '^initialized $TINY_BYTES from scratch (seed 5)$' '$d/F.log' && test -f '$d/F/DONE_00000003'"
check "... and the earlier main.log and flags.txt moved aside, not truncated" \
  bash -c "[ \"\$(cat '$d/F/replaced_1/main.log')\" = 's:0 tel:11.0' ] && cmp -s '$d/F/replaced_1/flags.txt' '$d/F.flags'"
mkdir -p "$d/F2"
cp "$d/F.flags" "$d/F2/flags.txt"
./train_gpt2 -o "$d/F2" -y 1 -x 2 -n 2 > "$d/F2.log" 2>&1
check "... a flag given again wins, with its note" \
  bash -c "grep -q '^note: -x 2 replaces this run.s -x 3 ($d/F2/flags.txt)$' '$d/F2.log' && test -f '$d/F2/DONE_00000002'"

# --- Ctrl-C, SIGTERM -------------------------------------------------------------------------------
STOP=("${RUN[@]}" -x 60 -v 10 -n 20 -nk 2)
./train_gpt2 "${STOP[@]}" -o "$d/U" > "$d/U.log" 2>&1
# wait for a main.log record of step $2 in folder $1 (at most 60 s, looking every 20 ms: a byte-model step takes about 10)
await() { for _ in $(seq 1 3000); do grep -q "^s:$2 trl" "$1/main.log" 2>/dev/null && return 0; sleep 0.02; done; return 1; }
# a byte-model step takes about 4 ms, so the signal may (rarely) come after the run's end: then
# the run is tried again, at most 3 times
for attempt in 1 2 3; do
  rm -rf "$d/S"
  ./train_gpt2 "${STOP[@]}" -o "$d/S" > "$d/S.log" 2>"$d/S.err" &
  pid=$!
  await "$d/S" 25 && kill -INT "$pid"
  wait "$pid"; rc=$?
  [ "$rc" -ne 0 ] && break
done
k=$(sed -nE 's/^stopped by SIGINT \(Ctrl-C\) after step ([0-9]+) of 60; checkpoint .*/\1/p' "$d/S.log")
check "Ctrl-C: exit 130 after one more step at most, a line naming the step (${k:-none}) and the checkpoint" \
  bash -c "[ $rc -eq 130 ] && [ -n '$k' ] && [ '$k' -ge 26 ] && grep -q '^stopped by SIGINT (Ctrl-C) after step $k of 60; checkpoint $d/S/model_$(printf %08d "${k:-0}").bin$' '$d/S.log'"
check "... the checkpoint is complete (model, state, DONE)" \
  test -f "$d/S/DONE_$(printf %08d "${k:-0}")" -a -f "$d/S/state_$(printf %08d "${k:-0}")_00000.bin"
check "... the handler said a checkpoint follows, on stderr" grep -q "^stopping after this step: a checkpoint follows" "$d/S.err"
resume=$(sed -nE 's/^  to go on: (.*)$/\1/p' "$d/S.log")
check "... and printed the command that goes on: '$resume'" test "$resume" = "./train_gpt2 -o $d/S -y 1"
$resume > "$d/S2.log" 2>&1
check "that command resumes from step $k and ends with a model byte-identical to the uninterrupted run's" \
  bash -c "grep -q 'resumed from step $k ' '$d/S2.log' && cmp -s '$d/U/model_00000060.bin' '$d/S/model_00000060.bin'"
check "... and the same main.log, record for record" cmp -s "$d/U/main.log" "$d/S/main.log"
check "... and -nk 2 pruned the off-schedule checkpoint: the last two remain (40, 60)" \
  test "$(cd "$d/S" && ls DONE_* | tr '\n' ' ')" = "DONE_00000040 DONE_00000060 "
for attempt in 1 2 3; do   # as above: again if the signal came after the run's end
  rm -rf "$d/T"
  ./train_gpt2 "${RUN[@]}" -x 60 -n 0 -o "$d/T" > "$d/T.log" 2>&1 &
  pid=$!
  await "$d/T" 5 && kill -TERM "$pid"
  wait "$pid"; rc=$?
  [ "$rc" -ne 0 ] && break
done
check "SIGTERM, even with -n 0: exit 143 and a checkpoint of the steps done" \
  bash -c "[ $rc -eq 143 ] && grep -q '^stopped by SIGTERM after step [0-9]* of 60; checkpoint' '$d/T.log' && ls '$d/T' | grep -q '^DONE_'"
# a second Ctrl-C ends the run at once: slow steps; the second signal once the first was seen
./train_gpt2 "${SLOW[@]}" -x 1000 -n 0 -o "$d/Q" > "$d/Q.log" 2>"$d/Q.err" &
pid=$!
if await "$d/Q" 2; then
  kill -INT "$pid"
  for _ in $(seq 1 100); do grep -q '^stopping after this step' "$d/Q.err" && break; sleep 0.01; done
  kill -INT "$pid"
fi
wait "$pid"; rc=$?
check "a second Ctrl-C: the process ends at once by the signal (exit $rc), with no checkpoint and no stop line" \
  bash -c "[ $rc -eq 130 ] && ! grep -q '^stopped by' '$d/Q.log' && ! ls '$d/Q' | grep -q '^DONE_'"
./train_gpt2 "${RUN[@]}" -x 100000 -v 0 > "$d/noo.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do grep -q '^step *3/' "$d/noo.log" && break; sleep 0.1; done
kill -INT "$pid"; wait "$pid"; rc=$?
check "Ctrl-C without -o: exit 130, saying nothing was saved" \
  bash -c "[ $rc -eq 130 ] && grep -q '^stopped by SIGINT (Ctrl-C) after step [0-9]* of 100000; nothing was saved (no -o)$' '$d/noo.log'"

# --- kill -9 after a checkpoint ------------------------------------------------------------------------
# killed between the checkpoints of steps 20 and 40 (tried again, at most 3 times, if the kill
# came after the second)
for attempt in 1 2 3; do
  rm -rf "$d/K"
  ./train_gpt2 "${STOP[@]}" -o "$d/K" > "$d/K.log" 2>&1 &
  pid=$!
  await "$d/K" 22 && kill -9 "$pid"
  wait "$pid" 2>/dev/null
  [ ! -e "$d/K/DONE_00000040" ] && break
done
check "kill -9 left records past the last checkpoint (step 20) in main.log" grep -q "^s:2[1-9] trl" "$d/K/main.log"
./train_gpt2 -o "$d/K" -y 1 > "$d/K2.log" 2>&1
check "-y 1 after kill -9: resumed from step 20, a model byte-identical to the uninterrupted run's" \
  bash -c "grep -q 'resumed from step 20 ' '$d/K2.log' && cmp -s '$d/U/model_00000060.bin' '$d/K/model_00000060.bin'"
check "... main.log dropped the records of steps 20 and later before going on, and says so" \
  grep -Eq "^$d/K/main.log: resuming at step 20: kept the [0-9]+ records of earlier steps, dropped [0-9]+ of step 20 and later$" "$d/K2.log"
check "... so it equals the uninterrupted run's, with no step twice" cmp -s "$d/U/main.log" "$d/K/main.log"

# --- -b and -t are the run's on resume ------------------------------------------------------------------
expect_error "resuming with another -b names the flag and the run's value" \
  "^error: -b 4: this run's checkpoints were written with -b 2 \($d/K/flags.txt\); its state file holds the data order of B x T windows \(or rows\), so resume with -b 2 \(or leave -b out\)$" \
  ./train_gpt2 -o "$d/K" -y 1 -b 4
expect_error "resuming with another -t names the flag and the run's value" \
  "^error: -t 16: this run's checkpoints were written with -t 32 \($d/K/flags.txt\)" ./train_gpt2 -o "$d/K" -y 1 -t 16

# --- make train -------------------------------------------------------------------------------------------
recipe=$(make -n train TS_DIR=x 2>/dev/null | grep -- '-o out/shakespeare_prism')
check "make train checkpoints every 50 steps, keeps the last two and resumes with -y 1" \
  bash -c "echo \"\$1\" | grep -q -- '-n 50 -nk 2 -y 1 -o out/shakespeare_prism'" _ "$recipe"

finish
