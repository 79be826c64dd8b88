#!/usr/bin/env bash
# test/test_resume.sh: checkpoints and -y 1 resume (doc/formats.md 8).
#   - 10 steps straight vs 5 steps, checkpoint, resume for 5 more: identical step lines (loss,
#     grad norm, lr), val losses and a byte-identical final checkpoint, with shuffled data and
#     gradient accumulation (2 micro-steps);
#   - the DONE_ marker decides: a model file without DONE_ is ignored on resume;
#   - -y 1 on an empty directory starts from scratch;
#   - -nk/-nm retention; no .tmp file is left behind; main.log is appended on resume.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
root=build/tmp_resume
rm -rf "$root"
mkdir -p "$root"
printf '1 2 4*2\n' > "$root/prism.txt"
TS=dev/data/tinyshakespeare
COMMON=(-e tiny -prism "$root/prism.txt" -i "$TS/tiny_shakespeare_train.bin" -j "$TS/tiny_shakespeare_val.bin"
        -b 2 -t 32 -d 128 -x 10 -l 1e-3 -u 2 -c 0.1 -v 5 -m 2 -s 0 -n 5)

# step lines without the timing fields (ms, tok/s, eta)
steps() { grep -E '^step ' "$1" | sed -E 's/\| [0-9.]+ ms .*$//'; }

./train_gpt2 "${COMMON[@]}" -o "$root/A" > "$root/A.log" 2>&1
check "uninterrupted 10-step run succeeded" test -f "$root/A/DONE_00000010"
check "checkpoint files at step 5: model, state, DONE" test -f "$root/A/model_00000005.bin" -a -f "$root/A/state_00000005_00000.bin" -a -f "$root/A/DONE_00000005"
check "no .tmp file left behind" test -z "$(find "$root/A" -name '*.tmp')"

mkdir -p "$root/B"
cp "$root/A/model_00000005.bin" "$root/A/state_00000005_00000.bin" "$root/A/DONE_00000005" "$root/B/"
head -c 5000 "$root/A/model_00000010.bin" > "$root/B/model_00000008.bin"   # incomplete: no DONE_
printf 's:0 tel:0.0\n' > "$root/B/main.log"
./train_gpt2 "${COMMON[@]}" -o "$root/B" -y 1 > "$root/B.log" 2>&1
check "resumed run succeeded" test -f "$root/B/DONE_00000010"
check "resume picked step 5 (the newest with a DONE_ marker)" grep -q "resumed from step 5" "$root/B.log"
n_a=$(steps "$root/A.log" | tail -n 5)
n_b=$(steps "$root/B.log")
check "the resumed run printed 5 step lines" test "$(printf '%s\n' "$n_b" | grep -c '^step')" -eq 5
check "steps 6-10 of the resumed run equal the uninterrupted run (loss, norm, lr)" test "$n_a" = "$n_b"
[ "$n_a" = "$n_b" ] || diff <(echo "$n_a") <(echo "$n_b") | head -10
va=$(grep '^val loss' "$root/A.log" | tail -n 1)
vb=$(grep '^val loss' "$root/B.log" | tail -n 1)
check "final val loss equal ($va | $vb)" test "$va" = "$vb"
check "final checkpoints byte-identical" cmp -s "$root/A/model_00000010.bin" "$root/B/model_00000010.bin"
check "final state files byte-identical" cmp -s "$root/A/state_00000010_00000.bin" "$root/B/state_00000010_00000.bin"
check "main.log appended on resume (old first line kept)" test "$(head -n 1 "$root/B/main.log")" = "s:0 tel:0.0"
check "main.log has the resumed train lines s:5..s:9" test "$(grep -c ' trl:' "$root/B/main.log")" -eq 5

./train_gpt2 "${COMMON[@]}" -x 2 -n 1 -o "$root/C" -y 1 > "$root/C.log" 2>&1
check "-y 1 on an empty directory starts from scratch" grep -q "starting from scratch" "$root/C.log"

./train_gpt2 "${COMMON[@]}" -x 8 -n 2 -nk 2 -nm 4 -v 0 -o "$root/D" > "$root/D.log" 2>&1
kept=$(cd "$root/D" && ls DONE_* | tr '\n' ' ')
check "-n 2 -nk 2 -nm 4 keeps 4 (major), 6, 8 and drops 2: $kept" test "$kept" = "DONE_00000004 DONE_00000006 DONE_00000008 "
check "-nk removed the model and state files of step 2" test ! -e "$root/D/model_00000002.bin" -a ! -e "$root/D/state_00000002_00000.bin"

# a truncated state file is one clear error, not a silent bad resume
mkdir -p "$root/E"
cp "$root/A/model_00000005.bin" "$root/A/DONE_00000005" "$root/E/"
head -c 3000 "$root/A/state_00000005_00000.bin" > "$root/E/state_00000005_00000.bin"
expect_error "truncated state file" "state_00000005_00000.bin.*(truncated|bytes)" ./train_gpt2 "${COMMON[@]}" -o "$root/E" -y 1
finish
