#!/usr/bin/env bash
# test/test_attn_distance.sh: ./attn_distance end to end on tiny models (4 layers, C 64, maxT 64)
# written by train_gpt2.py with sharpened Q/K weights (test/attn_reference.py model):
#   - the table (per-layer and per-head rows), the CSV and the JSON are produced and well formed;
#   - every statistic of every head equals an independent Python computation from the model's
#     weights (test/attn_reference.py compare: tolerance 1e-5 relative, with a negative control);
#   - -e2 with the same model gives Delta = 0 exactly, and Prism vs uniform gives Delta_l equal to
#     the difference of the two models' own values (1e-6 relative: both are printed with 9 digits);
#   - the values do not depend on B (how sequences are grouped) or the thread count: the CSVs are
#     byte-identical;
#   - a layer of a kind without an attention matrix (lin) is reported as skipped, not a crash, and
#     is analysed from its normalized linear-attention weights with -lin 1;
#   - bad inputs are one error line each.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
PYTHON=${PYTHON:-/usr/bin/python3}
d=build/tmp_attn_distance
rm -rf "$d"; mkdir -p "$d"
VAL=dev/data/tinyshakespeare/tiny_shakespeare_val.bin
printf '# tiny Prism schedule: head sizes 64, 32, 16, 16\n1 2 4*2\n' > "$d/prism.txt"

$PYTHON test/attn_reference.py model "$d/prism.bin" --prism "$d/prism.txt" > "$d/model.log" 2>&1 &&
  $PYTHON test/attn_reference.py model "$d/uniform.bin" >> "$d/model.log" 2>&1
check "train_gpt2.py wrote the sharpened tiny models" test -s "$d/prism.bin" -a -s "$d/uniform.bin"

# --- table, CSV, JSON
./attn_distance -e "$d/prism.bin" -j "$VAL" -b 2 -n 4 -heads 1 -csv "$d/prism.csv" \
  -json "$d/prism.json" > "$d/prism.out" 2>&1
check "attn_distance exits 0 on the Prism model" test $? -eq 0
check "the table has its header line" grep -Eq '^layer heads x size kind +D +D_norm +sink +D_nosink +median +entropy +H/ln\(i\+1\)$' "$d/prism.out"
n_layers=$(grep -cE '^ +[0-3] +[124] x +(64|32|16) mha( +[0-9]+\.[0-9]{4}){7}$' "$d/prism.out")
check "4 layer rows with 7 values each and the schedule's heads (1x64 2x32 4x16 4x16) (got $n_layers)" test "$n_layers" -eq 4
n_heads=$(grep -cE '^ +head [0-3]( +[0-9]+\.[0-9]{4}){7}$' "$d/prism.out")
check "-heads 1 prints 1+2+4+4 = 11 head rows (got $n_heads)" test "$n_heads" -eq 11
check "the tool says where it wrote the CSV" grep -qx "wrote $d/prism.csv" "$d/prism.out"
check "the tool says where it wrote the JSON" grep -qx "wrote $d/prism.json" "$d/prism.out"
check "CSV header" test "$(head -1 "$d/prism.csv")" = \
  "model,layer,head,n_head,head_size,kind,D,D_norm,sink,D_nosink,median,entropy,entropy_norm,T,sequences,val,note"
check "CSV: 4 mean rows + 11 head rows, each with 17 fields and T 64, 8 sequences" \
  awk -F, 'NR > 1 { n++; if (NF != 17 || $14 != 64 || $15 != 8) bad++ } END { exit !(n == 15 && bad == 0) }' "$d/prism.csv"
check "JSON parses, with 4 layers of 7 statistics" $PYTHON -c "
import json, sys
j = json.load(open('$d/prism.json'))
L = j['models'][0]['layers']
sys.exit(not (len(L) == 4 and j['T'] == 64 and j['sequences'] == 8 and len(L[3]['heads']) == 4
              and len(L[0]['mean']) == 7 and 'delta' not in j))"
check "no .tmp file is left behind" test -z "$(ls "$d" | grep '\.tmp$')"

# --- the default T: the one the model was trained at (its run folder's flags.txt), else maxT
check "without flags.txt beside the model: T = maxT 64, with a note saying so" \
  grep -q "^note: attn_distance: no flags.txt beside $d/prism.bin: T = its maxT 64" "$d/prism.out"
mkdir -p "$d/run"
cp "$d/prism.bin" "$d/run/model_00000010.bin"
printf '# the flags of this run\n-b 4\n-t 32\n' > "$d/run/flags.txt"
./attn_distance -e "$d/run/model_00000010.bin" -j "$VAL" -b 2 -n 4 -csv "$d/run.csv" > "$d/run.out" 2>&1
check "a model trained at -t 32 (flags.txt): T 32 by default, said in one line" \
  bash -c "grep -q '^attn_distance: T 32, the -t $d/run/model_00000010.bin was trained at' '$d/run.out' && awk -F, 'NR == 2 { exit !(\$14 == 32) }' '$d/run.csv'"
./attn_distance -e "$d/run/model_00000010.bin" -j "$VAL" -b 2 -n 4 -t 64 > "$d/run64.out" 2>&1
check "-t 64 on a model trained at 32: a note that positions 32..63 were never trained" \
  grep -q "^note: attn_distance: -t 64 exceeds the T 32 .* positions 32..63 were never trained" "$d/run64.out"
printf -- '-t 32x\n' > "$d/run/flags.txt"
expect_error "a bad -t line in flags.txt: one line naming the file and line" \
  "^error: $d/run/flags.txt:1: -t: expected an integer 1\.\.1048576$" ./attn_distance -e "$d/run/model_00000010.bin" -j "$VAL" -b 2 -n 4
printf -- '-b 4\n-t\n' > "$d/run/flags.txt"
expect_error "a flags.txt line without a value: the trainer's reader, one line naming the file and line" \
  "^error: $d/run/flags.txt:2: expected \"flag value\", got '-t'$" ./attn_distance -e "$d/run/model_00000010.bin" -j "$VAL" -b 2 -n 4

# --- against Python, with a negative control
run_sub $PYTHON test/attn_reference.py compare "$d/prism.csv" "$d/prism.bin" "$VAL" 64 8 --control
./attn_distance -e "$d/uniform.bin" -j "$VAL" -b 4 -n 2 -csv "$d/uniform.csv" > "$d/uniform.out" 2>&1
run_sub $PYTHON test/attn_reference.py compare "$d/uniform.csv" "$d/uniform.bin" "$VAL" 64 8

# --- -e2: Delta
./attn_distance -e "$d/prism.bin" -e2 "$d/prism.bin" -j "$VAL" -b 2 -n 4 -json "$d/same.json" > "$d/same.out" 2>&1
check "-e2 with the same model: Delta of every statistic is exactly 0 in the JSON" $PYTHON -c "
import json, sys
j = json.load(open('$d/same.json'))
vals = [v for row in j['delta'] for v in row['delta'].values()]
sys.exit(not (len(vals) == 4 * 7 and all(v == 0 for v in vals)))"
zero_rows=$(sed -n '/^Delta =/,$p' "$d/same.out" | grep -cE '^ +[0-3] +[124] +[124]( +0\.0000){7}$')
check "-e2 with the same model: the Delta table has 4 rows of 0.0000 (got $zero_rows)" test "$zero_rows" -eq 4
./attn_distance -e "$d/prism.bin" -e2 "$d/uniform.bin" -j "$VAL" -b 2 -n 4 -csv "$d/pu.csv" -json "$d/pu.json" > "$d/pu.out" 2>&1
check "-e2 uniform: Delta D_l = D_l(prism) - D_l(uniform) of the single-model CSVs, for each layer and statistic (1e-6 rel)" $PYTHON -c "
import csv, json, sys
def means(path):
    return {int(r['layer']): r for r in csv.DictReader(open(path)) if r['head'] == 'mean'}
p, u = means('$d/prism.csv'), means('$d/uniform.csv')
j = json.load(open('$d/pu.json'))
bad = 0
for row in j['delta']:
    l = row['layer']
    for s, v in row['delta'].items():
        want = float(p[l][s]) - float(u[l][s])
        bad += abs(v - want) > 1e-6 * max(1.0, abs(float(p[l][s])))
nonzero = sum(abs(row['delta']['D']) > 1e-3 for row in j['delta'])
sys.exit(not (bad == 0 and len(j['delta']) == 4 and nonzero >= 1))"
check "-e2: the CSV holds both models (15 Prism rows + 4 x 5 uniform rows)" test "$(($(wc -l < "$d/pu.csv") - 1))" -eq 35

# --- determinism
OMP_NUM_THREADS=1 ./attn_distance -e "$d/prism.bin" -j "$VAL" -b 8 -n 1 -csv "$d/b8t1.csv" > /dev/null 2>&1
OMP_NUM_THREADS=2 ./attn_distance -e "$d/prism.bin" -j "$VAL" -b 1 -n 8 -csv "$d/b1t2.csv" > /dev/null 2>&1
check "identical CSV for B 2 x 4 windows (2 threads) and B 8 x 1 window on 1 thread" cmp -s "$d/prism.csv" "$d/b8t1.csv"
check "identical CSV for B 2 x 4 windows and B 1 x 8 windows (2 threads)" cmp -s "$d/prism.csv" "$d/b1t2.csv"
# Column 15 of the CSV is the sequence count, which differs by construction: compare without it,
# so that the control shows the statistics themselves see the ninth sequence.
check "negative control: 9 sequences instead of 8 change the CSV's statistics (the sequences column left out)" \
  bash -c "./attn_distance -e $d/prism.bin -j $VAL -b 1 -n 9 -csv $d/n9.csv > /dev/null 2>&1 &&
           ! cmp -s <(cut -d, -f15 --complement $d/prism.csv) <(cut -d, -f15 --complement $d/n9.csv)"

# --- a layer without an attention matrix: layer 1 of the Prism file relabelled 'lin' (header
# slot 18 + 3*1 = 21; linear attention has the same parameter shapes as mha)
$PYTHON -c "
import numpy as np
h = np.fromfile('$d/prism.bin', dtype='<i4')
assert h[1] == 103 and h[21] == 0
h[21] = 2
h.tofile('$d/lin.bin')"
./attn_distance -e "$d/lin.bin" -j "$VAL" -b 2 -n 1 -csv "$d/lin.csv" > "$d/lin.out" 2> "$d/lin.err"
rc=$?
check "kind lin: exit 0 (got $rc; the CPU forward runs linear attention)" test "$rc" -eq 0
check "kind lin: the table says layer 1 is skipped" grep -Eq '^ +1 +2 x +32 lin +skipped: kind lin forms no attention matrix' "$d/lin.out"
check "kind lin: the CSV has one row for layer 1, empty values and the note" \
  awk -F, '$2 == 1 { n++; if ($3 == "mean" && $7 == "" && $17 ~ /^skipped/) ok++ } END { exit !(n == 1 && ok == 1) }' "$d/lin.csv"
check "kind lin: the other layers are still reported" test "$(grep -c ',mean,' "$d/lin.csv")" -eq 4
./attn_distance -e "$d/lin.bin" -j "$VAL" -b 2 -n 1 -lin 1 -csv "$d/lin1.csv" > "$d/lin1.out" 2>&1
check "kind lin with -lin 1: layer 1 analysed from its normalized weights (7 values, D in [0, 63], noted)" \
  awk -F, '$2 == 1 && $3 == "mean" { n++; if ($7 >= 0 && $7 <= 63 && $9 >= 0 && $9 <= 1 && $17 ~ /^linear attention weights/) ok++ } END { exit !(n == 1 && ok == 1) }' "$d/lin1.csv"
check "kind lin with -lin 1: the table has 4 layer rows with values" \
  test "$(grep -cE '^ +[0-3] +[124] x +(64|32|16) (mha|lin)( +[0-9]+\.[0-9]{4}){7}$' "$d/lin1.out")" -eq 4

# --- errors: one line each
expect_error "no -e" '^error: -e: expected a model checkpoint' ./attn_distance -j "$VAL"
expect_error "unknown flag" '^error: -x: unknown flag' ./attn_distance -e "$d/prism.bin" -x 3
expect_error "flag without value" '^error: -csv: expected a value' ./attn_distance -e "$d/prism.bin" -csv
expect_error "bad integer" "^error: -n 'zero': expected an integer" ./attn_distance -e "$d/prism.bin" -n zero
expect_error "missing checkpoint" "^error: $d/none.bin: cannot open" ./attn_distance -e "$d/none.bin"
expect_error "T above maxT" "^error: -t 65: exceeds the maxT 64 of $d/prism.bin" ./attn_distance -e "$d/prism.bin" -t 65 -j "$VAL"
expect_error "more windows than the val data holds" "^error: -n 600: .* holds only 511 windows" \
  ./attn_distance -e "$d/prism.bin" -j "$VAL" -n 600
expect_error "missing val data" "^error: $d/none_val.bin: no file matches" ./attn_distance -e "$d/prism.bin" -j "$d/none_val.bin"
$PYTHON -c "
import train_gpt2 as tg
tg.write_model(tg.GPT(tg.parse_descriptor('L2C64H4T64'), seed=1), '$d/two_layers.bin')"
expect_error "-e2 with another depth" "^error: -e2 $d/two_layers.bin: 2 layers; -e $d/prism.bin has 4" \
  ./attn_distance -e "$d/prism.bin" -e2 "$d/two_layers.bin" -j "$VAL"
check "--help lists every flag" bash -c "./attn_distance --help | grep -cE '^  -(e|e2|j|b|t|n|heads|lin|csv|json) ' | grep -qx 10"
finish
