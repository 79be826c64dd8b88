#!/usr/bin/env bash
# test/test_spectrum.sh: ./sd_spectrum end to end (doc/sd_tools.md). On a model trained for a few
# steps by ./train_gpt2 with the mixed table 4:sd 4:sdlin 4:lin 4 and -ln 0, on a uniform llm.c
# model (v3) and on a Prism model (wide heads, 2d > C) written by train_gpt2.py: the table, the
# CSV, the JSON and the cascade PNG; S-D heads stable (alpha < 0) and their D spread > 0 after
# training; the plot script on CSV input; one-line errors. The numbers themselves are checked
# against numpy by test/test_spectrum_numpy.py and on constructed heads by build/test_spectrum.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
PYTHON=${PYTHON:-/usr/bin/python3}
# Tiny models: OpenMP start-up and contention on a shared machine cost more than they save, and
# the CPU forward is bit-identical for any thread count (llmc/cpu/kernels.h).
export OMP_NUM_THREADS=1
export PYTHON
d=build/tmp_spectrum
rm -rf "$d"; mkdir -p "$d"
TS=dev/data/tinyshakespeare
printf '4:sd 4:sdlin 4:lin 4\n' > "$d/mixed.txt"
./train_gpt2 -e tiny -prism "$d/mixed.txt" -ln 0 -i "$TS/tiny_shakespeare_train.bin" \
  -j "$TS/tiny_shakespeare_val.bin" -b 2 -t 32 -x 5 -l 3e-3 -v 5 -m 1 -s 0 -n 5 -o "$d/mixed" \
  > "$d/train.log" 2>&1
M=$d/mixed/model_00000005.bin
check "./train_gpt2 wrote the mixed -ln 0 checkpoint" test -f "$M"
"$PYTHON" - "$d" <<'EOF'
import sys
import train_gpt2 as tg
d = sys.argv[1]
tg.write_model(tg.GPT(tg.parse_descriptor("tiny"), seed=1), f"{d}/uniform.bin")
cfg = tg.parse_descriptor("tiny")
table = tg.parse_schedule("prism", 64, 4, text="1 2 4 4")
tg.write_model(tg.GPT(tg.GPTConfig(n_layer=4, n_embd=64, n_head=4, block_size=64, layers=table),
                      seed=2), f"{d}/prism.bin")
EOF
check "train_gpt2.py wrote a uniform (v3) and a Prism (1 2 4 4, v103) model" \
  bash -c "od -An -t d4 -j 4 -N 4 '$d/uniform.bin' | grep -qw 3 && od -An -t d4 -j 4 -N 4 '$d/prism.bin' | grep -qw 103"

./sd_spectrum "$M" -heads 1 -csv "$d/m.csv" -json "$d/m.json" -png "$d/m.png" > "$d/m.txt" 2> "$d/m.err"
rc=$?
check "sd_spectrum on the mixed model: exit 0 (got $rc), nothing on stderr" \
  test "$rc" -eq 0 -a ! -s "$d/m.err"
check "the table has the 4 layer rows with their kinds" \
  bash -c "grep -Ec '^ +[0-3] +4 x +16 (sd|sdlin|lin|mha) ' '$d/m.txt' | grep -qx 4"
check "-heads 1 adds 16 head rows" bash -c "grep -c '^ *head [0-3] ' '$d/m.txt' | grep -qx 16"
check "the CSV has a header and 16 head rows" bash -c "test \$(wc -l < '$d/m.csv') -eq 17"
check "the PNG is a PNG (magic bytes) of more than 10 kB" \
  bash -c "head -c 8 '$d/m.png' | od -An -tx1 | grep -q '89 50 4e 47 0d 0a 1a 0a' && test \$(stat -c %s '$d/m.png') -gt 10000"
check "the plot's temporary data file is gone" test ! -e "$d/m.png.data.json"
"$PYTHON" - "$d/m.json" > "$d/m.check" 2>&1 <<'EOF'
import json, sys
data = json.load(open(sys.argv[1]))
L = data["layers"]
assert [l["kind"] for l in L] == ["sd", "sdlin", "lin", "mha"], [l["kind"] for l in L]
assert [l["family"] for l in L] == ["S", "S", "R", "R"]
assert [l["capacity"] for l in L] == [16, 16, 32, 32]
sd = [h for l in L[:2] for h in l["heads"]]
assert all(h["alpha"] < 0 and not h["unstable"] for h in sd), "S-D heads must be stable"
assert all(h["d_spread"] > 0 for h in sd), "training spreads D"
assert all(l["d_spread_mean"] is None for l in L[2:]), "no D in standard layers"
assert all(abs(h["rho_R"] + h["rho_F"] - 1) < 1e-9 for l in L for h in l["heads"])
assert data["config"]["use_ln"] == 0 and data["config"]["sd_d_sign"] == -1
print("ok")
EOF
check "JSON: kinds, families, capacities; S-D heads alpha(L) < 0 and D spread > 0; shares sum to 1" \
  grep -qx ok "$d/m.check"

./sd_spectrum "$d/uniform.bin" -json "$d/u.json" > "$d/u.txt" 2>&1
check "a uniform llm.c model (v3): 4 mha layers, capacity 2d = 32" \
  "$PYTHON" -c "import json,sys; L=json.load(open('$d/u.json'))['layers']; sys.exit(not ([l['kind'] for l in L]==['mha']*4 and all(l['capacity']==32 for l in L)))"
./sd_spectrum "$d/prism.bin" -json "$d/p.json" > "$d/p.txt" 2>&1
check "a Prism model: capacity min(2d, C) = 64, 64, 32, 32; rank reaches it for random weights" \
  "$PYTHON" -c "import json,sys; L=json.load(open('$d/p.json'))['layers']; sys.exit(not ([l['capacity'] for l in L]==[64,64,32,32] and all(h['rank']==l['capacity'] for l in L for h in l['heads'])))"
check "the plot script also reads the CSV" "$PYTHON" sd_attention/plot_cascade.py "$d/m.csv" "$d/c.png"
check "-png alone (no -json) works" bash -c "./sd_spectrum '$d/uniform.bin' -png '$d/u.png' > /dev/null && test -s '$d/u.png'"

help=$(./sd_spectrum --help)
ok=1
for f in -e -heads -csv -json -png -eps; do printf '%s\n' "$help" | grep -q -- "^  $f " || ok=0; done
check "--help lists every flag" test $ok -eq 1
expect_error "missing checkpoint" "^error: .*nothing.bin: cannot open" ./sd_spectrum "$d/nothing.bin"
expect_error "unknown flag" "^error: -foo: unknown flag" ./sd_spectrum "$M" -foo 1
expect_error "bad -eps" "^error: -eps 'x': expected a number" ./sd_spectrum "$M" -eps x
expect_error "no model" "^error: model: expected a checkpoint" ./sd_spectrum -heads 1
expect_error "-png with a missing Python" "^error: -png: .*failed.*no output written" \
  env PYTHON=/nonexistent/python ./sd_spectrum "$M" -csv "$d/x.csv" -json "$d/x.json" -png "$d/x.png"
check "a failed plot leaves no CSV, JSON, PNG or .tmp" \
  bash -c "! ls '$d'/x.* 2>/dev/null | grep -q ."
mkdir -p "$d/adir"
for flag in -csv -json -png; do
  expect_error "$flag into a missing directory, before the analysis" "^error: $flag $d/nodir/x: directory $d/nodir does not exist" \
    ./sd_spectrum "$M" $flag "$d/nodir/x"
  expect_error "$flag naming a directory" "^error: $flag $d/adir: is a directory" ./sd_spectrum "$M" $flag "$d/adir"
done
check "nothing was written for the refused outputs" bash -c "! ls '$d'/nodir '$d'/adir/* 2>/dev/null | grep -q ."
printf '{}' > "$d/empty.json"
expect_error "plot script on a JSON without layers" "^error: .*empty.json: no 'layers' key" \
  "$PYTHON" sd_attention/plot_cascade.py "$d/empty.json" "$d/x.png"
finish
