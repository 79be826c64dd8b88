#!/usr/bin/env bash
# test/test_sd_claims.sh: the S-D claims driver (sd_attention/sd_claims.py):
#   - --dry-run: every command of the four arms x two seeds (flags of each arm, the recipe's
#     independent rows and the LayerNorm-free arms' input scale, seed S for the init and the data
#     order, K = 1 .. L-1 linearizations, each layer's attention made uniform, the shrink for S-D
#     arms only), nothing written;
#   - end to end on the tiny size (TinyShakespeare, 2 steps, seeds 1 and 2, one thread):
#     claims.md and claims.json, then every number of claims.json checked against the runs' own
#     files (main.log, sd_spectrum JSON, sd_surgery reports), the table's mean and standard
#     deviation against those numbers (the grad-norm maximum and blow-up steps from main.log),
#     and every "agrees" recomputed from them; the uniform-attention cost of each layer, and the
#     attention-used gate of the routing claims on synthetic numbers;
#   - --bin: the trainings run that trainer (the BLAS build), the analyses the default programs;
#   - a second start runs nothing; --report-only reports the finished seeds; other settings in
#     the same --out (steps, trainer) are refused;
#   - bad input is one line and exit 1.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
PYTHON=${PYTHON:-/usr/bin/python3}
d=build/tmp_sd_claims
rm -rf "$d"; mkdir -p "$d"
# count LINES_MATCHING_REGEX TEXT: how many lines of TEXT match
count() { grep -c -- "$1" <<< "$2"; }

# ------------------------------------------------------------------------------------------------
# --dry-run
dry=$("$PYTHON" sd_attention/sd_claims.py --sizes tiny --data shakespeare --steps 7 --seeds 1,2 --out "$d/dry" --dry-run 2>/dev/null)
check "dry-run: 8 trainings of L4C128H4T128 for 7 steps, one per arm and seed, lr 1e-3 after a warmup of 7 / 5 steps" \
  test "$(count '^OMP_NUM_THREADS=2 ./train_gpt2 -e L4C128H4T128 .* -x 7 -l 0.001 -u 1 .* -n 1 ' "$dry")" -eq 8
check "dry-run: ten checkpoints over training (7 steps: every step, -v 1 -n 1)" \
  test "$(count ' -v 1 -m 16 -s 0 -n 1 ' "$dry")" -eq 8
check "dry-run: seed 2 inits with -seed 2 and reads the data order -data_seed 2, in seed2/" \
  test "$(count "-seed 2 -data_seed 2 .* -o $d/dry/tiny/seed2/" "$dry")" -eq 4
check "dry-run: the arms' flags (mha_noln and sd_noln -ln 0 at input scale 35.36, U at the default 0.02; sd_scalar adds -sd_scalar_d 1; mha unscaled); every arm -rows 1" \
  test "$(count 'mha_noln.table.txt -ln 0 -emb_scale 35.36 -rows 1 -seed' "$dry")$(count 'sd_noln.table.txt -ln 0 -emb_scale 35.36 -rows 1 -seed' "$dry")$(count 'sd_scalar.table.txt -ln 0 -sd_scalar_d 1 -emb_scale 35.36 -rows 1 -seed' "$dry")$(count 'mha.table.txt -rows 1 -seed' "$dry")$(count 'sd_init_u' "$dry")" = 22220
check "dry-run: each of the 4 layers' attention made uniform, for 4 arms x 2 seeds, the input's loss not re-evaluated" \
  test "$(count '-op uniform -layer [0123] .* -eval_before 0 > ' "$dry")" -eq 32
dry1=$("$PYTHON" sd_attention/sd_claims.py --sizes tiny --data shakespeare --steps 7 --seeds 1 --emb-scale 1 --out "$d/dry" --dry-run 2>/dev/null)
check "dry-run --emb-scale 1: no -emb_scale flag" test "$(count -- '-emb_scale' "$dry1")" -eq 0
expect_error "--emb-scale 0" "^error: --emb-scale 0.0: expected 0 < F <= 10000" \
  "$PYTHON" sd_attention/sd_claims.py --sizes tiny --emb-scale 0 --steps 1 --out "$d/dry" --dry-run
check "dry-run: the tables (4 heads x 4 layers; :sd for the S-D arms)" \
  test "$(count "^printf '4\*4.n' > $d/dry/tiny/seed1/mha.table.txt" "$dry")$(count "^printf '4:sd\*4.n' > $d/dry/tiny/seed1/sd_scalar.table.txt" "$dry")" = 11
check "dry-run: linearize K = 1, 2, 3 for each of the 4 arms x 2 seeds" \
  test "$(count '-op linearize -k [123] ' "$dry")" -eq 24
check "dry-run: shrink for the S-D arms only (2 arms x 2 seeds)" \
  test "$(count '-op shrink -rank90 1 -round8 1' "$dry")/$(count 'mha.shrink' "$dry")" = 4/0
check "dry-run: a spectrum per arm and seed, and of the S-D arms' 6 earlier checkpoints (8 + 2 x 2 x 6)" \
  test "$(count '^OMP_NUM_THREADS=2 ./sd_spectrum ' "$dry")/$(count 'sd_noln/model_00000003.bin -json .*sd_noln.spectrum_3.json' "$dry")" = 32/2
dry=$("$PYTHON" sd_attention/sd_claims.py --sizes bytes --seeds 1 --out "$d/dry" --dry-run 2>/dev/null)
check "dry-run --sizes bytes: L4C128H4T256V256 on the prose bytes, 1920 steps of 16 x 256, checkpoints every 192" \
  test "$(count "^OMP_NUM_THREADS=2 ./train_gpt2 -e L4C128H4T256V256 .* -i 'dev/data/prose_bytes/prose_bytes_train_\*.bin' .* -tok bytes_tokenizer.bin -b 16 -t 256 -x 1920 -l 0.001 -u 100 .* -v 192 -m 16 -s 0 -n 192 " "$dry")" -eq 4
expect_error "--sizes bytes with --data shakespeare" "^error: --sizes bytes with --data shakespeare: the bytes size reads prose as bytes" \
  "$PYTHON" sd_attention/sd_claims.py --sizes bytes --data shakespeare --out "$d/dry" --dry-run
check "dry-run: nothing written" test ! -e "$d/dry"
dry=$("$PYTHON" sd_attention/sd_claims.py --sizes tiny --data shakespeare --steps 7 --seeds 1 --bin build/blas/train_gpt2 --out "$d/dry" --dry-run 2>/dev/null)
check "dry-run --bin build/blas/train_gpt2: the 4 trainings run that trainer, the analyses the default builds" \
  test "$(count '^OMP_NUM_THREADS=2 build/blas/train_gpt2 -e L4C128H4T128 ' "$dry")/$(count ' ./train_gpt2 ' "$dry")/$(count '^OMP_NUM_THREADS=2 ./sd_spectrum ' "$dry")" = 4/0/16

# ------------------------------------------------------------------------------------------------
# end to end: tiny, 2 steps, seeds 1 and 2
o=$d/run
RUN=("$PYTHON" sd_attention/sd_claims.py --sizes tiny --data shakespeare --steps 2 --seeds 1,2 --threads 1 --out "$o")
"${RUN[@]}" > "$d/run.out" 2>&1; rc=$?
check "tiny, 2 steps, seeds 1, 2: exit 0, claims.md and claims.json written (exit $rc)" \
  bash -c "[ $rc -eq 0 ] && [ -s $o/claims.md ] && [ -s $o/claims.json ]"
[ "$rc" -eq 0 ] || tail -n 5 "$d/run.out"
check "claims.md: one row per claim S2, S3/S9, S4, S6, S8, S11" \
  bash -c "for c in S2 'S3/S9' S4 S6 S8 S11; do grep -q \"^| \$c | \" $o/claims.md || exit 1; done"
check "claims.md: the heading names the seeds, and the four arms' rows give mean +- sd" \
  test "$(count '^## tiny: L4C128H4T128, 2 steps of B 4 x T 64, seeds 1, 2$' "$(cat "$o/claims.md")")$(grep -cE '^\| (mha|mha_noln|sd_noln|sd_scalar) \| [0-9.]+ ± [0-9.]+ \|' "$o/claims.md")" = 14
check "the surgered checkpoints are removed, the 24 linearize and 32 uniform reports kept" \
  test "$(ls "$o"/tiny/seed*/*.lin*.bin "$o"/tiny/seed*/*.uniform*.bin "$o"/tiny/seed*/*.shrink.bin 2>/dev/null | wc -l)/$(ls "$o"/tiny/seed*/*.lin*.report.json | wc -l)/$(ls "$o"/tiny/seed*/*.uniform*.report.json | wc -l)" = 0/24/32
cat > "$d/check.py" <<'EOF'
import json, math, os, re, statistics, sys
o = sys.argv[1]
c = json.load(open(os.path.join(o, "claims.json")))
t = c["sizes"]["tiny"]
bad = []


def eq(what, a, b, tol=1e-9):
    if not (abs(a - b) <= tol):
        bad.append(f"{what}: {a} != {b}")


if t["seeds"] != [1, 2]:
    bad.append(f"seeds {t['seeds']}, expected [1, 2]")
for seed in ("1", "2"):
    for arm in ("mha", "mha_noln", "sd_noln", "sd_scalar"):
        r, b, w = t["runs"][seed][arm], os.path.join(o, "tiny", "seed" + seed, arm), f"seed {seed} {arm}"
        vals = [float(l.split("tel:")[1]) for l in open(os.path.join(b, "main.log")) if " tel:" in l]
        eq(f"{w} val", r["val"], vals[-1])
        norms = [float(l.split("norm:")[1]) for l in open(os.path.join(b, "main.log")) if " norm:" in l]
        eq(f"{w} max grad norm", r["norm_max"], max(v for v in norms if math.isfinite(v)))
        eq(f"{w} blow-up steps", r["blowup_steps"], sum(1 for v in norms if not math.isfinite(v) or v > 100))
        eq(f"{w} steps", r["steps"], 2)
        for k, x in enumerate(json.load(open(b + ".spectrum.json"))["layers"]):
            eq(f"{w} erank layer {k}", r["erank"][k], x["erank_mean"])
        before = json.load(open(b + ".lin1.report.json"))["val"]["ppl_before"]
        eq(f"{w} ppl", r["ppl"], before)
        change = {k: json.load(open(f"{b}.lin{k}.report.json"))["val"]["ppl_after"] / before - 1.0
                  for k in (1, 2, 3)}
        for k, v in change.items():
            eq(f"{w} linearize K={k}", r["linearize_ppl_change"][str(k)], v)
        eq(f"{w} linearizable", r["linearizable"], max([k for k, v in change.items() if v < 0.05], default=0))
        before_loss = json.load(open(b + ".lin1.report.json"))["val"]["loss_before"]
        for l in range(4):
            eq(f"{w} uniform cost layer {l}", r["uniform_cost"][l],
               json.load(open(f"{b}.uniform{l}.report.json"))["val"]["loss_after"] - before_loss)
        if arm.startswith("sd"):
            p0, p1 = json.load(open(b + ".shrink.report.json"))["attention_params"]
            eq(f"{w} shrink cut", r["shrink"]["cut"], 1.0 - p1 / p0)
            if not p1 < p0:
                bad.append(f"{w}: shrink did not cut ({p0} -> {p1})")
        elif "shrink" in r:
            bad.append(f"{w}: a shrink on a standard model")
md = open(os.path.join(o, "claims.md")).read()
for arm in ("mha", "sd_noln"):
    v = [t["runs"][k][arm]["val"] for k in ("1", "2")]
    row = re.search(rf"^\| {arm} \| ([0-9.]+) ± ([0-9.]+) \|", md, re.M)
    if not row:
        bad.append(f"{arm}: no row in claims.md")
        continue
    eq(f"{arm} mean val in claims.md", float(row.group(1)), statistics.fmean(v), 6e-5)
    eq(f"{arm} sd of val in claims.md", float(row.group(2)), statistics.stdev(v), 6e-5)
agrees = {x["claim"]: x["agrees"] for x in c["claims"]}
nulls = json.load(open(os.path.join(o, "tiny", "nulls.json")))
for seed in ("1", "2"):
    m = t["runs"][seed]
    sd, mha = m["sd_noln"], m["mha_noln"]
    for k, x in enumerate(json.load(open(os.path.join(o, "tiny", "seed" + seed, "sd_noln.spectrum.json")))["layers"]):
        eq(f"seed {seed} sd_noln n90 layer {k}", sd["n90"][k], x["n90_mean"])
    def stable(x):  # a finite val loss, blow-ups on at most 1 % of the steps
        return math.isfinite(x["val"]) and x["blowup_steps"] <= 0.01 * x["steps"]
    want = {"S2": stable(sd) and sd["frac_unstable"] == 0,
            "S3/S9": sd["n90"][0] <= nulls["k2"][1] < sd["n90"][-1],
            "S4": sd["linearizable"] > mha["linearizable"],
            "S11": stable(m["mha_noln"])}
    for k, v in want.items():
        if agrees[k]["tiny"][seed] != v:
            bad.append(f"{k} seed {seed}: agrees {agrees[k]['tiny'][seed]}, expected {v} from the numbers")
for k in ("S6", "S8"):
    if agrees[k] is not None:
        bad.append(f"{k}: agrees {agrees[k]}, expected null (no yes/no rule)")
# the gate: 2 steps leave every arm above the bigram floor, so no claim is testable and no cell
# of the agrees column is a verdict; the floors are scripts/floors.py's on the same windows
from scripts import floors as fl
f = fl.floors("dev/data/tinyshakespeare/tiny_shakespeare_train.bin", "dev/data/tinyshakespeare/tiny_shakespeare_val.bin",
              4, 64, 16, "gpt2_tokenizer.bin")
for k in ("unigram", "bigram", "targets", "bytes"):
    eq(f"floors {k}", t["floors"][k], f[k])
for x in c["claims"]:
    if x["testable"] != {"tiny": False}:
        bad.append(f"{x['claim']}: testable {x['testable']}, expected not (every run above the bigram floor)")
cells = [l.split(" | ")[-1] for l in md.splitlines() if re.match(r"^\| S[0-9]", l)]
if len(cells) != 6 or not all(cl.startswith("not testable at this budget (val ") for cl in cells):
    bad.append(f"claims.md agrees cells: {cells}")
for arm in ("mha", "sd_noln"):
    v = t["runs"]["1"][arm]
    eq(f"{arm} bits per byte", v["bpb"], fl.bits_per_byte(v["val"], f))
if len(nulls["k1"]) != 2 or not nulls["k1"][0] <= nulls["k1"][1] or nulls["d"] != 32:
    bad.append(f"nulls.json: {nulls}")
ot = t["runs"]["1"]["sd_noln"]["over_training"]
if sorted(ot) != ["1", "2"] or len(ot["1"]["n90"]) != 4:
    bad.append(f"sd_noln over_training: {sorted(ot)}")
print("\n".join(bad) if bad else "consistent")
EOF
"$PYTHON" - "$o" < "$d/check.py" > "$d/check" 2>&1  # from stdin: the root (the cwd) is on sys.path
check "claims.json: val, erank, n90, perplexities, linearizable layers, shrink cut of each seed equal its files; claims.md's mean and sd; every 'agrees' follows (S4 against mha_noln, S3/S9 from n90 and the two-plane null); the floors are floors.py's; no cell is a verdict" \
  grep -qx consistent "$d/check"
[ "$(cat "$d/check")" = consistent ] || head -n 5 "$d/check"
# the blow-up count on a synthetic main.log: -nan and 1e5 are blow-ups, 2.0 and 100.0 are not
mkdir -p "$d/norms"
printf 's:0 tel:10.0\ns:0 trl:9 lr:0.001 norm:2.0\ns:1 trl:9 lr:0.001 norm:-nan\ns:2 trl:9 lr:0.001 norm:100000.0\ns:3 trl:9 lr:0.001 norm:100.0\ns:4 tel:8.0\n' > "$d/norms/main.log"
got=$("$PYTHON" -c "import sys; from sd_attention import sd_claims as c; m, n, k = c.grad_norms(sys.argv[1]); print(m, n, k, c.stable({'val': 8.0, 'blowup_steps': n, 'steps': k}), c.stable({'val': 8.0, 'blowup_steps': 1, 'steps': 100}), c.stable({'val': float('nan'), 'blowup_steps': 0, 'steps': 100}))" "$d/norms" 2>&1)
check "grad_norms: max finite 1e5, 2 blow-ups (-nan, 1e5) of 4 steps: not stable; 1 of 100 is; a NaN val is not ($got)" \
  test "$got" = "100000.0 2 4 False True False"
check "claims.md: the S2 and S11 rows give the blow-up steps per seed (of 2)" \
  bash -c "grep -qE '^\| S2 \| .*grad-norm blow-up steps [0-9]+/2 [0-9]+/2 \(mha_noln: [0-9]+/2 [0-9]+/2\)' $o/claims.md && grep -qE '^\| S11 \| .*grad-norm blow-up steps [0-9]+/2 [0-9]+/2 \|' $o/claims.md"
check "claims.md: the S8 row gives the scalar-D cost in nats, perplexity and percent" \
  grep -qE '^\| S8 \| .* tiny: val loss [+-][0-9.]+ ± [0-9.]+ nats \(ppl [+-][0-9.]+ ± [0-9.]+, [+-][0-9.]+ ± [0-9.]+%\) vs full D' "$o/claims.md"
"${RUN[@]}" > "$d/run2.out" 2>&1; rc=$?
check "a second start runs nothing and writes the claims again (exit $rc)" \
  test "$rc/$(grep -c '\.log [0-9]* s$\|\.txt [0-9]* s$' "$d/run2.out")/$(grep -c "^wrote $o/claims.md" "$d/run2.out")" = 0/0/1
check "... where the first start ran 80 steps (4 arms x 2 seeds x (train, spectrum, 3 linearizations, 4 uniform layers), 4 shrinks, 4 step-1 spectra)" \
  test "$(grep -c '\.log [0-9]* s$\|\.txt [0-9]* s$' "$d/run.out")" -eq 80
"$PYTHON" sd_attention/sd_claims.py --sizes tiny --data shakespeare --steps 2 --seeds 1,2,3 --out "$o" --report-only > "$d/ro.out" 2>&1; rc=$?
check "--report-only with seeds 1,2,3: reports the finished seeds 1, 2 and runs nothing (exit $rc)" \
  test "$rc/$(grep -c 'seeds 1, 2$' "$d/ro.out")/$(ls -d "$o"/tiny/seed3 2>/dev/null | wc -l)" = 0/1/0
# the attention-used gate, on synthetic numbers below the bigram floor: a routing claim is not
# testable while some run's costliest uniform layer costs under 0.1 nats; other claims are
gate=$("$PYTHON" -c "
from sd_attention import sd_claims as c
f = {'bigram': 3.0, 'unigram': 4.0}
used = {1: {'sd_noln': {'val': 2.0, 'uniform_cost': [0.01, 0.4]}}, 2: {'sd_noln': {'val': 2.1, 'uniform_cost': [0.02, 0.3]}}}
unused = {1: {'sd_noln': {'val': 2.0, 'uniform_cost': [0.01, 0.4]}}, 2: {'sd_noln': {'val': 2.1, 'uniform_cost': [0.02, 0.05]}}}
print(c.gate(used, ['sd_noln'], f, True)[0], c.gate(unused, ['sd_noln'], f, False)[0], c.gate(unused, ['sd_noln'], f, True))
" 2>&1)
check "gate: routing claims need a layer costing >= 0.1 nats in every seed; other claims do not ($gate)" \
  test "$gate" = "True True (False, 'not testable: attention unused (the costliest layer made uniform: sd_noln seed 2 +0.050 nats; a verdict needs 0.1)')"
expect_error "--report-only on a size with no finished seed" "^error: $o/small: no finished seed of 1,2" \
  "$PYTHON" sd_attention/sd_claims.py --sizes small --data shakespeare --steps 2 --seeds 1,2 --out "$o" --report-only
expect_error "other settings in the same --out are refused" \
  "^error: $o/settings.json: this directory holds a run with other settings \(steps differ" \
  "$PYTHON" sd_attention/sd_claims.py --sizes tiny --data shakespeare --steps 4 --seeds 1,2 --out "$o"
expect_error "another trainer in the same --out is refused" \
  "^error: $o/settings.json: this directory holds a run with other settings \(trainer differ" \
  "$PYTHON" sd_attention/sd_claims.py --sizes tiny --data shakespeare --steps 2 --seeds 1,2 --bin build/blas/train_gpt2 --out "$o"

# ------------------------------------------------------------------------------------------------
# bad input (each with --steps 1, so that a check that failed to refuse runs for seconds only)
expect_error "an unknown size" "^error: --sizes tiny,huge: expected a comma list of tiny, small" \
  "$PYTHON" sd_attention/sd_claims.py --sizes tiny,huge --steps 1 --out "$d/e"
expect_error "--steps 0" "^error: --steps, --threads: expected positive integers" \
  "$PYTHON" sd_attention/sd_claims.py --steps 0 --out "$d/e"
expect_error "a seed given twice" "^error: --seeds '1,1': expected distinct non-negative integers" \
  "$PYTHON" sd_attention/sd_claims.py --seeds 1,1 --steps 1 --out "$d/e"
expect_error "a seed that is not a number" "^error: --seeds '1,x': expected distinct non-negative integers" \
  "$PYTHON" sd_attention/sd_claims.py --seeds 1,x --steps 1 --out "$d/e"
expect_error "an unknown data set is one line" "^error: argument --data: invalid choice: 'nowhere'" \
  "$PYTHON" sd_attention/sd_claims.py --data nowhere --steps 1 --out "$d/e"
expect_error "--arms with an unknown arm" "^error: --arms sd_noln,gpt: expected a comma list of distinct arms of sd_noln, mha_noln, mha, sd_scalar" \
  "$PYTHON" sd_attention/sd_claims.py --arms sd_noln,gpt --steps 1 --out "$d/e"
expect_error "--arms with an arm twice" "^error: --arms mha,mha: expected a comma list of distinct arms" \
  "$PYTHON" sd_attention/sd_claims.py --arms mha,mha --steps 1 --out "$d/e"
expect_error "an unknown flag is one line" "^error: unrecognized arguments: --seed 2" \
  "$PYTHON" sd_attention/sd_claims.py --seed 2 --steps 1 --out "$d/e"
expect_error "a --bin that is not a program: one line" \
  "^error: build/none/train_gpt2: no such program \(--bin names a built trainer\)" \
  "$PYTHON" sd_attention/sd_claims.py --bin build/none/train_gpt2 --data shakespeare --steps 1 --out "$d/e"
expect_error "--build takes 0 or 1" "^error: argument --build: invalid choice: 2" \
  "$PYTHON" sd_attention/sd_claims.py --build 2 --steps 1 --out "$d/e"
check "the refused runs created nothing" test ! -e "$d/e"

finish
