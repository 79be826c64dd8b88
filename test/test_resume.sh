#!/usr/bin/env bash
# test/test_resume.sh: checkpoints and -y 1 resume (doc/formats.md "Optimizer/DataLoader state").
#   - 10 steps straight vs 5 steps, checkpoint, resume for 5 more: identical step lines (loss,
#     grad norm, lr), val losses and a byte-identical final checkpoint, with shuffled data and
#     gradient accumulation (2 micro-steps);
#   - the DONE_ marker decides: a model file without DONE_ is ignored on resume;
#   - -y 1 on an empty directory starts from scratch;
#   - -nk/-nm retention; no .tmp file is left behind; main.log is appended on resume;
#   - `-o DIR -y 1` alone resumes with the run's flags (DIR/flags.txt) and ends byte-identical; a
#     flag given again wins with a note naming both values; a folder without flags.txt is a note;
#   - -k wsd: a resume in the decay is bit-exact, and a checkpoint before the decay continues into a
#     longer -x as that run would have (cosine's does not: the control);
#   - hostile state files (orders not permutations, another model's file), kill -9 during a
#     checkpoint write, and a write that fails (the file-size limit as a full disk).
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
PYTHON=${PYTHON:-/usr/bin/python3}   # make test passes its own
root=build/tmp_resume
rm -rf "$root"
mkdir -p "$root"
printf '1 2 4*2\n' > "$root/prism.txt"
TS=dev/data/tinyshakespeare
STEPS=(-b 2 -t 32 -d 128 -x 10 -l 1e-3 -u 2 -c 0.1 -v 5 -m 2 -s 0 -n 5)
COMMON=(-e "$TINY_BYTES" -prism "$root/prism.txt" -i "$TSB_TRAIN" -j "$TSB_VAL" -tok "$TSB_TOK" "${STEPS[@]}")
# GPT-2's vocabulary where a checkpoint write must last long enough to be killed during it (13 MB)
COMMON_GPT2=(-e tiny -prism "$root/prism.txt" -i "$TS/tiny_shakespeare_train.bin" -j "$TS/tiny_shakespeare_val.bin"
             "${STEPS[@]}")

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

# -rows 1 (independent rows, doc/formats.md "DataLoader semantics"): the state file records the row order and
# header[6], so the resume is bit-exact too; resuming it with -rows 0 is refused
./train_gpt2 "${COMMON[@]}" -rows 1 -o "$root/RA" > "$root/RA.log" 2>&1
mkdir -p "$root/RB"
cp "$root/RA/model_00000005.bin" "$root/RA/state_00000005_00000.bin" "$root/RA/DONE_00000005" "$root/RB/"
./train_gpt2 "${COMMON[@]}" -rows 1 -o "$root/RB" -y 1 > "$root/RB.log" 2>&1
r_a=$(steps "$root/RA.log" | tail -n 5)
r_b=$(steps "$root/RB.log")
check "-rows 1: steps 6-10 of the resumed run equal the uninterrupted run, final files byte-identical" \
  bash -c "[ -n '$r_b' ] && [ '$r_a' = '$r_b' ] && cmp -s $root/RA/model_00000010.bin $root/RB/model_00000010.bin && cmp -s $root/RA/state_00000010_00000.bin $root/RB/state_00000010_00000.bin"
check "-rows 1: other batches than -rows 0 (step 1 losses $(steps "$root/A.log" | head -n 1 | awk '{print $5}') and $(steps "$root/RA.log" | head -n 1 | awk '{print $5}'))" \
  test "$(steps "$root/A.log" | head -n 1)" != "$(steps "$root/RA.log" | head -n 1)"
h6=$(od -An -t d4 -j 24 -N 4 "$root/RA/state_00000005_00000.bin" | tr -d ' ')
h6a=$(od -An -t d4 -j 24 -N 4 "$root/A/state_00000005_00000.bin" | tr -d ' ')
check "state header[6]: 1 with -rows 1, 0 without ($h6, $h6a)" test "$h6/$h6a" = "1/0"
mkdir -p "$root/RC"
cp "$root/RA/model_00000005.bin" "$root/RA/state_00000005_00000.bin" "$root/RA/DONE_00000005" "$root/RC/"
expect_error "a -rows 1 state resumed with -rows 0: one line naming header[6]" \
  "state_00000005_00000.bin: header\[6\]: the loader was saved with -rows 1; this run uses -rows 0" \
  ./train_gpt2 "${COMMON[@]}" -rows 0 -o "$root/RC" -y 1

# -k wsd (doc/formats.md "Optimization semantics"): a resume in the decay is bit-exact; and before
# the decay the rate does not depend on -x, so a checkpoint of a -x 10 run taken there (-decay_frac
# 0.5: the decay starts at step 5, whose rate is still the peak) continues as a -x 20 run would have
# (what a search's rungs need); cosine's does not (its control)
WSD=(-k wsd -decay_frac 0.5 -q 0.1)   # -q 1 (the default) would decay to the peak: no decay
./train_gpt2 "${COMMON[@]}" "${WSD[@]}" -n 3 -o "$root/WA" > "$root/WA.log" 2>&1
mkdir -p "$root/WB"
cp "$root/WA/model_00000006.bin" "$root/WA/state_00000006_00000.bin" "$root/WA/DONE_00000006" "$root/WB/"
./train_gpt2 "${COMMON[@]}" "${WSD[@]}" -n 3 -o "$root/WB" -y 1 > "$root/WB.log" 2>&1
w_a=$(steps "$root/WA.log" | tail -n 4)
w_b=$(steps "$root/WB.log")
check "-k wsd: resumed at step 6, in the decay (from step 5): steps 7-10 and the final files equal the uninterrupted run" \
  bash -c "[ -n '$w_b' ] && [ '$w_a' = '$w_b' ] && cmp -s $root/WA/model_00000010.bin $root/WB/model_00000010.bin && cmp -s $root/WA/state_00000010_00000.bin $root/WB/state_00000010_00000.bin"
./train_gpt2 "${COMMON[@]}" "${WSD[@]}" -x 20 -o "$root/WL" > "$root/WL.log" 2>&1
mkdir -p "$root/WX"
cp "$root/WA/model_00000006.bin" "$root/WA/state_00000006_00000.bin" "$root/WA/DONE_00000006" "$root/WX/"
./train_gpt2 "${COMMON[@]}" "${WSD[@]}" -x 20 -o "$root/WX" -y 1 > "$root/WX.log" 2>&1
w_l=$(steps "$root/WL.log" | tail -n 14)
w_x=$(steps "$root/WX.log")
check "-k wsd: a -x 10 run's step-6 checkpoint (its updates 0-5 before the decay) resumed with -x 20 equals a -x 20 run: steps 7-20, final files" \
  bash -c "[ -n '$w_x' ] && [ '$w_l' = '$w_x' ] && cmp -s $root/WL/model_00000020.bin $root/WX/model_00000020.bin && cmp -s $root/WL/state_00000020_00000.bin $root/WX/state_00000020_00000.bin"
./train_gpt2 "${COMMON[@]}" -q 0.1 -n 3 -o "$root/CA" > "$root/CA.log" 2>&1
./train_gpt2 "${COMMON[@]}" -q 0.1 -x 20 -o "$root/CL" > "$root/CL.log" 2>&1
mkdir -p "$root/CX"
cp "$root/CA/model_00000006.bin" "$root/CA/state_00000006_00000.bin" "$root/CA/DONE_00000006" "$root/CX/"
./train_gpt2 "${COMMON[@]}" -q 0.1 -x 20 -o "$root/CX" -y 1 > "$root/CX.log" 2>&1
c_x=$(steps "$root/CX.log")
check "control, -k cosine: the same continuation differs from a -x 20 run (its rates at steps 3-5 depend on -x)" \
  bash -c "[ -n '$c_x' ] && [ -f $root/CX/model_00000020.bin ] && ! cmp -s $root/CL/model_00000020.bin $root/CX/model_00000020.bin"
expect_error "-decay_frac with another schedule: one line" "^error: -decay_frac 0.5: only -k wsd decays" \
  ./train_gpt2 "${COMMON[@]}" -decay_frac 0.5 -o "$root/CZ"

# -o DIR -y 1 alone: the run's flags come from DIR/flags.txt
check "the run folder holds its flags (-x 10, -d 128, -prism; no -o or -y)" \
  bash -c "grep -qx -- '-x 10' '$root/A/flags.txt' && grep -qx -- '-d 128' '$root/A/flags.txt' && grep -qx -- '-prism $root/prism.txt' '$root/A/flags.txt' && ! grep -q '^-[oy] ' '$root/A/flags.txt'"
mkdir -p "$root/FA"
cp "$root/A/model_00000005.bin" "$root/A/state_00000005_00000.bin" "$root/A/DONE_00000005" "$root/A/flags.txt" "$root/FA/"
./train_gpt2 -o "$root/FA" -y 1 > "$root/FA.log" 2>&1
check "-o DIR -y 1 alone resumes from step 5 with the run's flags" \
  bash -c "grep -q 'resumed from step 5' '$root/FA.log' && grep -q '^resuming with the flags of $root/FA/flags.txt$' '$root/FA.log'"
n_f=$(steps "$root/FA.log")
check "... and steps 6-10 and the final model equal the uninterrupted run" \
  bash -c "[ \"\$1\" = \"\$2\" ] && cmp -s '$root/A/model_00000010.bin' '$root/FA/model_00000010.bin'" _ "$n_a" "$n_f"
rm -f "$root/FA/"*00000010*
./train_gpt2 -o "$root/FA" -y 1 -x 12 > "$root/FA2.log" 2>&1
check "a flag given again on resume wins, with one note naming both values" \
  bash -c "[ \"\$(grep -c '^note: -x 12 replaces this run.s -x 10 ($root/FA/flags.txt)$' '$root/FA2.log')\" = 1 ] && test -f '$root/FA/DONE_00000012'"
check "the folder's flags.txt now holds the new value (-x 12)" grep -qx -- '-x 12' "$root/FA/flags.txt"
# -data_seed: another data order (the same init), resumed from its folder alone, bit-exact
./train_gpt2 "${COMMON[@]}" -data_seed 7 -o "$root/D7" > "$root/D7.log" 2>&1
./train_gpt2 "${COMMON[@]}" -data_seed 42 -n 0 > "$root/D42.log" 2>&1
check "-data_seed 42 is the default order (the step lines equal the run without it)" \
  test -n "$(steps "$root/D42.log")" -a "$(steps "$root/D42.log")" = "$(steps "$root/A.log")"
check "-data_seed 7: another data order from step 1 (another step-1 loss)" \
  test -n "$(steps "$root/D7.log" | head -n 1)" -a "$(steps "$root/D7.log" | head -n 1)" != "$(steps "$root/A.log" | head -n 1)"
mkdir -p "$root/D7R"
cp "$root/D7/model_00000005.bin" "$root/D7/state_00000005_00000.bin" "$root/D7/DONE_00000005" "$root/D7/flags.txt" "$root/D7R/"
./train_gpt2 -o "$root/D7R" -y 1 > "$root/D7R.log" 2>&1
check "-data_seed 7 resumed from its folder alone: steps 6-10 and the final model equal the straight run" \
  bash -c "[ \"\$1\" = \"\$2\" ] && [ -n \"\$1\" ] && cmp -s '$root/D7/model_00000010.bin' '$root/D7R/model_00000010.bin'" _ \
  "$(steps "$root/D7.log" | tail -n 5)" "$(steps "$root/D7R.log")"
mkdir -p "$root/FG"
cp "$root/A/model_00000005.bin" "$root/A/state_00000005_00000.bin" "$root/A/DONE_00000005" "$root/FG/"
./train_gpt2 "${COMMON[@]}" -o "$root/FG" -y 1 > "$root/FG.log" 2>&1
check "a folder without flags.txt resumes with the command line's flags, and says so" \
  bash -c "grep -q 'flags.txt not found: resuming with the flags of this command line only' '$root/FG.log' && test -f '$root/FG/DONE_00000010'"
printf -- '-x 10\n-nosuch 3\n' > "$root/FG/flags.txt"
expect_error "an unknown flag in flags.txt names the file and line" "^error: $root/FG/flags.txt:2: -nosuch: not a flag of this trainer" \
  ./train_gpt2 -o "$root/FG" -y 1
printf -- '-x ten\n' > "$root/FG/flags.txt"
expect_error "a bad value in flags.txt names the file, the line and the flag" "^error: $root/FG/flags.txt:1: -x 'ten': expected an integer" ./train_gpt2 -o "$root/FG" -y 1
printf -- '# comment\n\n-x10\n' > "$root/FG/flags.txt"
expect_error "a flags.txt line without a space names the file and line (comments and blank lines counted)" \
  "^error: $root/FG/flags.txt:3: expected \"flag value\", got '-x10'$" ./train_gpt2 -o "$root/FG" -y 1
"$PYTHON" -c "import sys; open(sys.argv[1], 'w').write('-i ' + 'a' * 1200 + '\n-x 10\n')" "$root/FG/flags.txt"
expect_error "a flags.txt line longer than the reader's buffer names the file and line" \
  "^error: $root/FG/flags.txt:1: line longer than 1098 characters$" ./train_gpt2 -o "$root/FG" -y 1

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

# A state file steers the loader: its orders must be permutations, its size exact. Each corrupted
# copy of the step-5 state must stop the resume with one line naming the state file and the field,
# before any training (a sample order entry of -5 used to seek into the shard's header and train
# on it). patch_state FILE FIELD INDEX VALUE: FIELD is shard (the shard order) or sample.
patch_state() {
  "$PYTHON" - "$@" <<'PY'
import os, struct, sys
path, field, idx, val = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
model = os.path.join(os.path.dirname(path), "model_00000005.bin")
n = (os.path.getsize(model) - 1024) // 4          # fp32 parameters = optimizer values
b = bytearray(open(path, "rb").read())
off = 1024 + 2 * 4 * n                            # m, v; then the loader state
nf = struct.unpack_from("<Q", b, off)[0]
off = off + 8 if field == "shard" else off + 8 + 4 * nf + 8
struct.pack_into("<i", b, off + 4 * idx, val)
open(path, "wb").write(bytes(b))
PY
}
corrupt() {  # corrupt NAME FIELD INDEX VALUE: a resume directory with the patched state
  mkdir -p "$root/$1"
  cp "$root/A/model_00000005.bin" "$root/A/state_00000005_00000.bin" "$root/A/DONE_00000005" "$root/$1/"
  patch_state "$root/$1/state_00000005_00000.bin" "$2" "$3" "$4"
}
st=state_00000005_00000.bin
corrupt S1 sample 0 -5
expect_error "state: a negative sample order entry" "$st: loader sample order entry 0 = -5: expected a permutation" ./train_gpt2 "${COMMON[@]}" -o "$root/S1" -y 1
corrupt S2 sample 3 1000000
expect_error "state: a sample order entry past the shard (blames the state file, not the shard)" "$st: loader sample order entry 3 = 1000000: expected a permutation" ./train_gpt2 "${COMMON[@]}" -o "$root/S2" -y 1
first=$("$PYTHON" -c "import struct,os,sys; p='$root/A/$st'; n=(os.path.getsize('$root/A/model_00000005.bin')-1024)//4; b=open(p,'rb').read(); o=1024+8*n; nf=struct.unpack_from('<Q',b,o)[0]; print(struct.unpack_from('<i',b,o+8+4*nf+8)[0])")
corrupt S3 sample 1 "$first"
expect_error "state: a repeated sample order entry" "$st: loader sample order entry 1 = $first: expected a permutation" ./train_gpt2 "${COMMON[@]}" -o "$root/S3" -y 1
corrupt S4 shard 0 3
expect_error "state: a shard order entry outside the pattern's shards" "$st: loader shard order entry 0 = 3: expected a permutation of 0..0" ./train_gpt2 "${COMMON[@]}" -o "$root/S4" -y 1
check "no corrupted resume wrote a step" test -z "$(ls "$root"/S?/DONE_00000006 "$root"/S?/model_00000010.bin 2>/dev/null)"
# a state file of another model: its size is not this model's, and the error says so instead of
# reading the loader state at a wrong offset
OTHER=("${COMMON[@]}")
OTHER[1]=L4C128H4T64V256   # width 128: about 3 times the parameters
./train_gpt2 "${OTHER[@]}" -x 5 -o "$root/F" > "$root/F.log" 2>&1
mkdir -p "$root/G"
cp "$root/A/model_00000005.bin" "$root/A/DONE_00000005" "$root/G/"
cp "$root/F/state_00000005_00000.bin" "$root/G/"
# kill -9 in the middle of a checkpoint write: the resume starts from the newest complete
# checkpoint and ends byte-identical to a run never interrupted
KILLX=(-x 6 -n 1 -v 6)
./train_gpt2 "${COMMON_GPT2[@]}" "${KILLX[@]}" -o "$root/R" > "$root/R.log" 2>&1
./train_gpt2 "${COMMON_GPT2[@]}" "${KILLX[@]}" -o "$root/K" > "$root/K.log" 2>&1 &
pid=$!
for _ in $(seq 1 3000); do   # up to 30 s: kill as soon as a checkpoint after the first is being written
  [ -e "$root/K/DONE_00000001" ] && [ -n "$(find "$root/K" -name '*.tmp' 2>/dev/null)" ] && break
  sleep 0.01
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
check "kill -9 landed before the run finished" test ! -e "$root/K/DONE_00000006"
./train_gpt2 "${COMMON_GPT2[@]}" "${KILLX[@]}" -o "$root/K" -y 1 > "$root/K2.log" 2>&1
resumed=$(grep -o 'resumed from step [0-9]*' "$root/K2.log")
check "after kill -9 the run resumed from a complete checkpoint ($resumed) and finished" test -n "$resumed" -a -f "$root/K/DONE_00000006"
check "... its final model is byte-identical to the uninterrupted run's" cmp -s "$root/R/model_00000006.bin" "$root/K/model_00000006.bin"
check "... and so is its state file" cmp -s "$root/R/state_00000006_00000.bin" "$root/K/state_00000006_00000.bin"
check "... and no .tmp is left" test -z "$(find "$root/K" -name '*.tmp')"

# a checkpoint write that fails (here the file-size limit, as a full disk would) is one error line
# naming the file, and leaves neither a .tmp nor a file under the final name
mkdir -p "$root/H"
UNIFORM=("${COMMON[@]:0:2}" "${COMMON[@]:4}")   # without -prism: no schedule warnings
full_run() { ulimit -f 200; trap '' XFSZ; ./train_gpt2 "${UNIFORM[@]}" -x 2 -v 2 -n 2 -o "$root/H"; }
expect_error "a failed checkpoint write" "model_00000002.bin: write failed: File too large" full_run
check "the failed write left no .tmp and no model file" test -z "$(ls "$root/H" | grep -Ev '^(main.log|flags.txt)$')"
expect_error "state: another model's state file is named by its size" "$st: [0-9]+ bytes; the header, [0-9]+ optimizer values of this model and the loader state take" ./train_gpt2 "${COMMON[@]}" -o "$root/G" -y 1
finish
