#!/usr/bin/env bash
# test/test_surgery.sh: ./sd_surgery end to end (doc/sd_tools.md "Surgery"; doc/sd_tools.md) on a model
# written by train_gpt2.py (table 4:sd 4:sd 4:sdlin 4, -ln 0, random theta so that D is far from
# scalar, the output projections and wte scaled up so that attention visibly matters to the loss):
#   linearize  the body is byte-identical (only the kinds change), the kinds are right, the loss
#              moves (negative control), and the "after" loss equals an independent evaluation of
#              the written checkpoint by ./train_gpt2 -x 0 (same C forward: to its 6 printed
#              decimals) and by train_gpt2.py (PyTorch: 1e-4); the schedule file parses back to
#              the checkpoint's table
#   scalar_d   every S-D head's mean softplus(theta) kept (rel. 1e-6), D spread 0, the scalar flag
#              set; -keep_layout 1 gives the same loss in the vector layout
#   shrink     -planes d/2 is exact (loss unchanged bit for bit, parameters identical); -rank90 and
#              -planes 2 -round8 1 write valid smaller checkpoints whose loss ./train_gpt2 and
#              train_gpt2.py reproduce
#   errors     one line each
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
PYTHON=${PYTHON:-/usr/bin/python3}
# Tiny models: OpenMP start-up and contention on a shared machine cost more than they save, and
# the CPU forward is bit-identical for any thread count (llmc/cpu/kernels.h).
export OMP_NUM_THREADS=1
d=build/tmp_surgery
rm -rf "$d"; mkdir -p "$d"
TS=dev/data/tinyshakespeare
VAL=$TS/tiny_shakespeare_val.bin
M=$d/sd.bin
S=$d/std.bin
"$PYTHON" - "$M" "$S" <<'PY'
import sys, torch
import train_gpt2 as tg
table = tg.parse_schedule("table", 64, 4, text="4:sd*2 4:sdlin 4")
cfg = tg.GPTConfig(n_layer=4, n_embd=64, n_head=4, block_size=64, layers=table,
                   flags=tg.FLAG_NO_LN, sd_init_s=0.3)
model = tg.GPT(cfg, seed=5)
g = torch.Generator().manual_seed(11)
with torch.no_grad():
    for b in model.blocks:
        if b.attn.sd:
            b.attn.sd_theta.normal_(0.0, 0.7, generator=g)
        b.attn.qkv_w.mul_(40.0)   # peaked attention: softmax and ELU+1 differ
        b.attn.proj_w.mul_(10.0)
    model.wte.mul_(5.0)           # logits of O(1): the loss sees what attention does
tg.write_model(model, sys.argv[1])
tg.write_model(tg.GPT(tg.parse_descriptor("tiny"), seed=1), sys.argv[2])
PY
check "train_gpt2.py wrote the S-D fixture and a standard model" test -f "$M" -a -f "$S"
EV=(-j "$VAL" -m 2 -b 2 -t 32)

hdr() { od -An -t d4 -j $((4 * $2)) -N 4 "$1" | tr -d ' '; }        # header[$2] of file $1
after_loss() { "$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['val']['loss_after'])" "$1"; }
before_loss() { "$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['val']['loss_before'])" "$1"; }
trainer_loss() { ./train_gpt2 -e "$1" -x 0 -j "$VAL" -m 2 -b 2 -t 32 -s 0 2>&1 | awk '/^val loss/ {print $3}'; }

# ---- linearize
./sd_surgery -e "$M" -o "$d/lin.bin" -op linearize -k 4 "${EV[@]}" > "$d/lin.txt" 2>&1
rc=$?
check "linearize -k 4: exit 0 (got $rc), wrote the checkpoint, schedule and report" \
  test "$rc" -eq 0 -a -f "$d/lin.bin" -a -f "$d/lin.schedule.txt" -a -f "$d/lin.report.json"
check "linearize: the parameters are byte-identical (only the table changes)" \
  cmp -s <(tail -c +1025 "$M") <(tail -c +1025 "$d/lin.bin")
check "linearize: kinds sd sd sdlin mha -> sdlin sdlin sdlin lin (header[18+3l])" \
  test "$(hdr "$d/lin.bin" 18)$(hdr "$d/lin.bin" 21)$(hdr "$d/lin.bin" 24)$(hdr "$d/lin.bin" 27)" = "3332"
la=$(after_loss "$d/lin.report.json"); tl=$(trainer_loss "$d/lin.bin")
check "linearize: after-loss $la equals ./train_gpt2 -x 0 on the written file ($tl)" near "$la" "$tl" 1.5e-6
lb=$(before_loss "$d/lin.report.json"); tb=$(trainer_loss "$M")
check "the before-loss $lb equals ./train_gpt2 on the input ($tb)" near "$lb" "$tb" 1.5e-6
check "negative control: linearize changes the loss ($lb -> $la)" far "$lb" "$la" 1e-3
# the evaluation's T without -t: the trained T from the run folder's flags.txt, else maxT (a note)
mkdir -p "$d/run"
cp "$M" "$d/run/model_00000005.bin"
printf -- '-t 32\n' > "$d/run/flags.txt"
./sd_surgery -e "$d/run/model_00000005.bin" -o "$d/run_lin.bin" -op linearize -k 1 -j "$VAL" -m 2 -b 2 > "$d/run_lin.txt" 2>&1
check "without -t, a model from a run folder is evaluated at its trained T 32 (flags.txt), said in one line" \
  bash -c "grep -q '^sd_surgery: T 32, the -t $d/run/model_00000005.bin was trained at' '$d/run_lin.txt' && grep -q 'of 2 x 32' '$d/run_lin.txt'"
./sd_surgery -e "$M" -o "$d/nolog_lin.bin" -op linearize -k 1 -j "$VAL" -m 2 -b 2 > "$d/nolog_lin.txt" 2>&1
check "a model without flags.txt: maxT, with a note" grep -q "^note: sd_surgery: no flags.txt beside $M: T = its maxT" "$d/nolog_lin.txt"
# ---- scalar_d
./sd_surgery -e "$M" -o "$d/sc.bin" -op scalar_d "${EV[@]}" > "$d/sc.txt" 2>&1
./sd_surgery -e "$M" -o "$d/sck.bin" -op scalar_d -keep_layout 1 "${EV[@]}" > "$d/sck.txt" 2>&1
check "scalar_d: the scalar-D flag (2) is set in header[9] = $(hdr "$d/sc.bin" 9) (with no-LN 1)" test "$(hdr "$d/sc.bin" 9)" = 3
check "scalar_d -keep_layout 1: the vector layout kept (header[9] = 1)" test "$(hdr "$d/sck.bin" 9)" = 1
./sd_spectrum "$M" -json "$d/in.json" > /dev/null
./sd_spectrum "$d/sc.bin" -json "$d/sc.json" > /dev/null
./sd_spectrum "$d/sck.bin" -json "$d/sck.json" > /dev/null
"$PYTHON" - "$d/in.json" "$d/sc.json" "$d/sck.json" > "$d/sc.check" 2>&1 <<'EOF'
import json, sys
a, b, c = (json.load(open(p))["layers"] for p in sys.argv[1:])
for la, lb, lc in zip(a, b, c):
    if la["family"] != "S":
        continue
    for ha, hb, hc in zip(la["heads"], lb["heads"], lc["heads"]):
        assert ha["d_spread"] > 1e-4, "the input's D must be spread for this test to mean anything"
        assert hb["d_spread"] == 0 and hc["d_spread"] < 1e-6, (hb["d_spread"], hc["d_spread"])
        for h in (hb, hc):
            assert abs(h["d_mean"] - ha["d_mean"]) <= 1e-6 * ha["d_mean"], (h["d_mean"], ha["d_mean"])
print("ok")
EOF
check "scalar_d: every S-D head keeps its mean softplus(theta) (rel. 1e-6) and has D spread 0" \
  grep -qx ok "$d/sc.check"
sa=$(after_loss "$d/sc.report.json"); ska=$(after_loss "$d/sck.report.json"); ts=$(trainer_loss "$d/sc.bin")
check "scalar_d: both layouts give the same loss ($sa, $ska)" near "$sa" "$ska" 1e-6
check "scalar_d: ./train_gpt2 reproduces it ($ts)" near "$sa" "$ts" 1.5e-6

# ---- shrink
./sd_surgery -e "$M" -o "$d/full.bin" -op shrink -planes 8 "${EV[@]}" > "$d/full.txt" 2>&1
fb=$(before_loss "$d/full.report.json"); fa=$(after_loss "$d/full.report.json")
# The parameters and the table are unchanged, so the same C forward gives the same loss bit for bit.
check "shrink -planes 8 (= d/2): loss unchanged, equal to the report's 7 decimals ($fb -> $fa)" test -n "$fb" -a "$fb" = "$fa"
check "shrink -planes 8: the parameters are identical" cmp -s <(tail -c +1025 "$M") <(tail -c +1025 "$d/full.bin")
./sd_surgery -e "$M" -o "$d/r90.bin" -op shrink -rank90 1 "${EV[@]}" > "$d/r90.txt" 2>&1
ra=$(after_loss "$d/r90.report.json"); tr=$(trainer_loss "$d/r90.bin")
check "shrink -rank90 1: a valid checkpoint; ./train_gpt2 reproduces its loss ($ra, $tr)" near "$ra" "$tr" 1.5e-6
./sd_surgery -e "$M" -o "$d/p2.bin" -op shrink -planes 2 -round8 1 "${EV[@]}" > "$d/p2.txt" 2>&1
check "shrink -planes 2 -round8 1: head size 8 in layers 0-1, sdlin and mha untouched" \
  bash -c "grep -qx '4x8:sd\*2' '$d/p2.schedule.txt' && grep -qx '4x16:sdlin' '$d/p2.schedule.txt'"
pa=$(after_loss "$d/p2.report.json"); tp=$(trainer_loss "$d/p2.bin")
check "shrink -planes 2: ./train_gpt2 reproduces the after-loss $pa ($tp)" near "$pa" "$tp" 1.5e-6
check "shrink: the report counts fewer attention parameters" \
  "$PYTHON" -c "import json,sys; a,b=json.load(open('$d/p2.report.json'))['attention_params']; sys.exit(not b < a)"

# ---- PyTorch: the written checkpoints' losses, the schedule files, the report
"$PYTHON" - "$d" "$VAL" > "$d/py.check" 2>&1 <<'PY'
import json, math, sys
import train_gpt2 as tg
d, val = sys.argv[1:]
for stem in ("lin", "p2"):
    m = tg.load_model(f"{d}/{stem}.bin")
    table = tg.parse_schedule(f"{d}/{stem}.schedule.txt", m.config.n_embd, m.config.n_layer,
                              unchecked=True)
    assert tuple(table) == m.config.layers, (stem, table, m.config.layers)
    r = json.load(open(f"{d}/{stem}.report.json"))
    v = r["val"]
    assert abs(v["ppl_after"] - math.exp(v["loss_after"])) < 1e-6 * v["ppl_after"]
    loss = tg.eval_loss(m, val, 2, 32, 2)
    print(f"{stem} torch {loss:.7f} c {v['loss_after']:.7f}")
    assert abs(loss - v["loss_after"]) < 1e-4, stem
print("ok")
PY
check "train_gpt2.py (PyTorch) reproduces the after-losses of linearize and shrink to 1e-4 and \
the schedule files parse back to the checkpoints' tables: $(grep torch "$d/py.check" | tr '\n' ' ')" \
  grep -qx ok "$d/py.check"

# ---- errors and help
expect_error "unknown op" "^error: -op 'fold': expected linearize, scalar_d, shrink or uniform" ./sd_surgery -e "$M" -o "$d/x.bin" -op fold
expect_error "linearize without -k" "^error: -k: -op linearize needs" ./sd_surgery -e "$M" -o "$d/x.bin" -op linearize
expect_error "-k beyond the layers" "^error: -k 5: the model has 4 layers" ./sd_surgery -e "$M" -o "$d/x.bin" -op linearize -k 5
expect_error "a flag of another op" "^error: -planes: applies to -op shrink only" ./sd_surgery -e "$M" -o "$d/x.bin" -op linearize -k 1 -planes 2
expect_error "shrink with both -planes and -rank90" "^error: -planes/-rank90: " ./sd_surgery -e "$M" -o "$d/x.bin" -op shrink -planes 2 -rank90 1
expect_error "shrink without sd layers" "no sd layers to shrink" ./sd_surgery -e "$d/lin.bin" -o "$d/x.bin" -op shrink -planes 2
expect_error "scalar_d without S-D layers" "no S-D layers" ./sd_surgery -e "$S" -o "$d/x.bin" -op scalar_d
# a bad -j is found before any output exists: no out.bin, out.schedule.txt or report under their
# names (they used to be written first), and no .tmp left
printf 'not a shard' > "$d/bad_val.bin"
expect_error "a bad val shard" "bad_val.bin" ./sd_surgery -e "$M" -o "$d/badj.bin" -op linearize -k 1 -j "$d/bad_val.bin"
check "a bad val shard leaves no output" test -z "$(ls "$d"/badj.* 2>/dev/null)"
expect_error "no val shard matches -j" "no file matches" ./sd_surgery -e "$M" -o "$d/badj.bin" -op linearize -k 1 -j "$d/none_*.bin"
check "a missing val shard leaves no output" test -z "$(ls "$d"/badj.* 2>/dev/null)"
expect_error "-o missing" "^error: -o: expected" ./sd_surgery -e "$M" -op scalar_d
expect_error "-o without .bin" "^error: -o: expected a name ending in .bin" ./sd_surgery -e "$M" -o "$d/x" -op scalar_d
expect_error "-o equal to -e" "^error: -o: the output must differ" ./sd_surgery -e "$M" -o "$M" -op scalar_d
./sd_surgery -e "$M" -o "$d/nb.bin" -op linearize -k 1 -eval_before 0 "${EV[@]}" > "$d/nb.log" 2>&1
./sd_surgery -e "$M" -o "$d/wb.bin" -op linearize -k 1 "${EV[@]}" > "$d/wb.log" 2>&1
check "-eval_before 0: the same after-loss, no before-loss (null in the report, not printed)" \
  "$PYTHON" -c "import json, sys; a = json.load(open('$d/nb.report.json'))['val']; b = json.load(open('$d/wb.report.json'))['val']
sys.exit(not (a['loss_after'] == b['loss_after'] and a['loss_before'] is None and a['ppl_change'] is None
              and isinstance(b['loss_before'], float)))"
check "-eval_before 0 prints the after-loss only" grep -q "^val loss after .*(-eval_before 0)" "$d/nb.log"
expect_error "-eval_before out of range" "^error: -eval_before '2': expected an integer in \[0, 1\]" ./sd_surgery -e "$M" -o "$d/x.bin" -op scalar_d -j "$VAL" -eval_before 2
expect_error "-m 0 (no val batch: a NaN loss)" "^error: -m 0: expected -1 \(the whole val data\) or a positive number" ./sd_surgery -e "$M" -o "$d/x.bin" -op scalar_d -j "$VAL" -m 0
expect_error "-t beyond maxT" "^error: -t 65: exceeds the model's maxT 64" ./sd_surgery -e "$M" -o "$d/x.bin" -op scalar_d -j "$VAL" -t 65
expect_error "bad val pattern" "no file matches" ./sd_surgery -e "$M" -o "$d/x.bin" -op scalar_d -j "$d/none_*.bin" -t 32
expect_error "bad integer" "^error: -k 'two': expected an integer" ./sd_surgery -e "$M" -o "$d/x.bin" -op linearize -k two
help=$(./sd_surgery --help)
ok=1
for f in -e -o -op -k -lin_prescale -keep_layout -planes -rank90 -round8 -j -m -b -t; do
  printf '%s\n' "$help" | grep -q -- "^  $f " || ok=0
done
check "--help lists every flag" test $ok -eq 1
finish
