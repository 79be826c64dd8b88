#!/usr/bin/env bash
# test/test_stream.sh: the residual-stream diagnostic (doc/sd_attention.md "The residual stream"):
#   - ./train_gpt2 logs "s:<step> rms0:r0 ... rmsL:rL" at every val step (L + 1 values: the stream
#     entering each block, then ln_f's input) and prints it for -ln 0 models only;
#   - scripts/stream_rms.py on the final checkpoint (the PyTorch reference model, the same val
#     windows) gives the trainer's last record within the record's 4 significant digits;
#   - the record grows where it must: an S-D model without LayerNorm at lr 1e-2 has a larger
#     stream after 8 steps than at step 0, in its last layer first;
#   - plot_logs and ab_stats (ab_report's main.log reader) read a main.log with the records; bad
#     input is one line.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
PYTHON=${PYTHON:-/usr/bin/python3}
d=build/tmp_stream
rm -rf "$d"; mkdir -p "$d"
TS=dev/data/tinyshakespeare
printf '2:sd*3\n' > "$d/sd.txt"
./train_gpt2 -e L3C64H2T64 -prism "$d/sd.txt" -ln 0 -i "$TS/tiny_shakespeare_train.bin" -j "$TS/tiny_shakespeare_val.bin" \
  -b 2 -t 32 -x 8 -l 1e-2 -v 4 -m 3 -s 0 -n 8 -o "$d/run" > "$d/run.out" 2>&1; rc=$?
check "train -ln 0 S-D, 8 steps: exit 0 (exit $rc)" test "$rc" -eq 0
check "main.log: an rms record of 4 values (3 blocks + ln_f) at steps 0, 4, 8" \
  test "$(grep -cE '^s:(0|4|8) rms0:[0-9.e+-]+ rms1:[0-9.e+-]+ rms2:[0-9.e+-]+ rms3:[0-9.e+-]+$' "$d/run/main.log")" -eq 3
check "stdout: the stream printed at each val step of a -ln 0 model" \
  test "$(grep -c '^stream rms (block inputs, then ln_f.s): ' "$d/run.out")" -eq 3
rec() { grep "^s:$1 rms0:" "$d/run/main.log" | sed -E 's/^s:[0-9]+ //; s/rms[0-9]+://g; s/ /,/g'; }
last=$(rec 8)
first=$(rec 0)
check "the stream entering ln_f grew over 8 steps at lr 1e-2 ($first -> $last)" \
  awk -v a="${first##*,}" -v b="${last##*,}" 'BEGIN { exit !(b > a) }'
"$PYTHON" scripts/stream_rms.py "$d/run/model_00000008.bin" -j "$TS/tiny_shakespeare_val.bin" -b 2 -t 32 -m 3 \
  --json "$d/ckpt.json" > "$d/ckpt.out" 2>&1; rc=$?
got=$("$PYTHON" -c "import json,sys; print(','.join('%.6g' % v for v in json.load(open(sys.argv[1]))['rms']))" "$d/ckpt.json" 2>&1)
check "stream_rms.py on the final checkpoint = the trainer's step-8 record to 4 digits ($got vs $last)" \
  "$PYTHON" -c "import sys; a=[float(x) for x in sys.argv[1].split(',')]; b=[float(x) for x in sys.argv[2].split(',')]; sys.exit(not (len(a)==len(b)==4 and all(abs(x-y) <= 6e-4*abs(y) for x, y in zip(a, b))))" "$got" "$last"
"$PYTHON" scripts/stream_rms.py --log "$d/run" > "$d/log.out" 2>&1
check "stream_rms.py --log: one row per val step (0, 4, 8) and a column per block and ln_f" \
  bash -c "grep -q '^| step | block 0 | block 1 | block 2 | ln_f |$' $d/log.out && [ \$(grep -cE '^\| (0|4|8) \| ' $d/log.out) -eq 3 ]"
"$PYTHON" scripts/plot_logs.py "$d/run" -o "$d/loss.png" > "$d/plot.out" 2>&1; rc=$?
check "plot_logs reads a main.log with rms records (exit $rc)" test "$rc" -eq 0
got=$("$PYTHON" -c "import sys; from scripts.ab_stats import final_val_loss; v, n = final_val_loss(sys.argv[1]); print(f'{v:.6f} {n}')" "$d/run/main.log" 2>&1)
want=$(sed -nE 's/^s:8 tel:([0-9.]+)$/\1/p' "$d/run/main.log")
check "ab_stats.final_val_loss (ab_report's reader) reads a main.log with rms records: step 8's val loss $want ($got)" \
  bash -c "[ -n \"\$1\" ] && [ \"\$2\" = \"\$(printf '%.6f 8' \"\$1\")\" ]" _ "$want" "$got"
./train_gpt2 -e L2C64H2T64 -i "$TS/tiny_shakespeare_train.bin" -j "$TS/tiny_shakespeare_val.bin" \
  -b 2 -t 32 -x 2 -v 2 -m 1 -s 0 -n 0 -o "$d/ln" > "$d/ln.out" 2>&1
check "a model with LayerNorm logs the record too, and prints no stream line" \
  test "$(grep -c ' rms0:' "$d/ln/main.log")/$(grep -c '^stream rms' "$d/ln.out")" = 2/0
expect_error "stream_rms.py --log on a run without records" "^error: $d/ln_none: main.log has no rms records" \
  bash -c "mkdir -p $d/ln_none && grep -v ' rms0:' $d/ln/main.log > $d/ln_none/main.log && $PYTHON scripts/stream_rms.py --log $d/ln_none"
expect_error "stream_rms.py: no val glob" "^error: expected CKPT -j VAL_GLOB" \
  "$PYTHON" scripts/stream_rms.py "$d/run/model_00000008.bin"
expect_error "stream_rms.py: a glob that matches nothing" "^error: $d/none\*.bin: no val shard matches" \
  "$PYTHON" scripts/stream_rms.py "$d/run/model_00000008.bin" -j "$d/none*.bin"
printf 's:0 rms0:1.0 rms1:x\n' > "$d/bad.log"
expect_error "plot_logs: a malformed rms value names the line" "^error: $d/bad.log:1: rms1: expected a number, got 'x'" \
  "$PYTHON" scripts/plot_logs.py "$d/bad.log" -o "$d/bad.png"
finish
