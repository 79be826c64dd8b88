#!/usr/bin/env bash
# test/test_sd_claims.sh: the S-D claims driver (scripts/sd_claims.py):
#   - --dry-run: every command of the four arms (flags of each arm, K = 1 .. L-1 linearizations,
#     the shrink for S-D arms only) and nothing written;
#   - end to end on the tiny size (TinyShakespeare, 3 steps, one thread): claims.md and
#     claims.json, then every number of claims.json checked against the runs' own files (main.log,
#     sd_spectrum JSON, sd_surgery reports) and every "agrees" recomputed from those numbers;
#   - a second start runs nothing; other settings in the same --out are refused;
#   - bad input is one line and exit 1.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
PYTHON=${PYTHON:-/usr/bin/python3}
d=build/tmp_sd_claims
rm -rf "$d"; mkdir -p "$d"

# ------------------------------------------------------------------------------------------------
# --dry-run
dry=$("$PYTHON" scripts/sd_claims.py --sizes tiny --data shakespeare --steps 7 --out "$d/dry" --dry-run 2>/dev/null)
check "dry-run: 4 trainings of L4C128H4T128 for 7 steps, one per arm" \
  bash -c "[ \$(grep -c '^OMP_NUM_THREADS=2 ./train_gpt2 -e L4C128H4T128 .* -x 7 .* -n 7 ' <<< \"\$1\") -eq 4 ]" _ "$dry"
check "dry-run: the arms' flags (mha_noln -ln 0; sd_noln -ln 0 -sd_init_u 1; sd_scalar adds -sd_scalar_d 1)" \
  bash -c "grep -q 'mha_noln.table.txt -ln 0 -seed' <<< \"\$1\" && grep -q 'sd_noln.table.txt -ln 0 -sd_init_u 1 -seed' <<< \"\$1\" && grep -q 'sd_scalar.table.txt -ln 0 -sd_init_u 1 -sd_scalar_d 1 -seed' <<< \"\$1\"" _ "$dry"
check "dry-run: the tables (4 heads x 4 layers; :sd for the S-D arms)" \
  bash -c "grep -q \"^printf '4\*4\\\\\\\\n' > $d/dry/tiny/mha.table.txt\" <<< \"\$1\" && grep -q \"^printf '4:sd\*4\\\\\\\\n' > $d/dry/tiny/sd_scalar.table.txt\" <<< \"\$1\"" _ "$dry"
check "dry-run: linearize K = 1, 2, 3 for each of the 4 arms; shrink for the 2 S-D arms only" \
  bash -c "[ \$(grep -c -- '-op linearize -k [123] ' <<< \"\$1\") -eq 12 ] && [ \$(grep -c -- '-op shrink -rank90 1 -round8 1' <<< \"\$1\") -eq 2 ] && ! grep -q 'mha.shrink' <<< \"\$1\"" _ "$dry"
check "dry-run: a spectrum per arm" bash -c "[ \$(grep -c '^OMP_NUM_THREADS=2 ./sd_spectrum ' <<< \"\$1\") -eq 4 ]" _ "$dry"
check "dry-run: nothing written" test ! -e "$d/dry"

# ------------------------------------------------------------------------------------------------
# end to end: tiny, 3 steps
o=$d/run
RUN=("$PYTHON" scripts/sd_claims.py --sizes tiny --data shakespeare --steps 3 --threads 1 --out "$o")
"${RUN[@]}" > "$d/run.out" 2>&1; rc=$?
check "tiny, 3 steps: exit 0, claims.md and claims.json written (exit $rc)" \
  bash -c "[ $rc -eq 0 ] && [ -s $o/claims.md ] && [ -s $o/claims.json ]"
[ "$rc" -eq 0 ] || tail -n 5 "$d/run.out"
check "claims.md: one row per claim S2, S3/S9, S4, S6, S8, S11" \
  bash -c "for c in S2 'S3/S9' S4 S6 S8 S11; do grep -q \"^| \$c | \" $o/claims.md || exit 1; done"
check "claims.md: the per-size table lists the four arms" \
  bash -c "[ \$(grep -cE '^\| (mha|mha_noln|sd_noln|sd_scalar) \| [0-9]' $o/claims.md) -eq 4 ]"
check "the surgered checkpoints are removed, the reports kept" \
  bash -c "[ -z \"\$(ls $o/tiny/*.lin*.bin $o/tiny/*.shrink.bin 2>/dev/null)\" ] && [ \$(ls $o/tiny/*.lin*.report.json | wc -l) -eq 12 ]"
"$PYTHON" - "$o" > "$d/check" 2>&1 <<'EOF'
import json, math, os, sys
o = sys.argv[1]
c = json.load(open(os.path.join(o, "claims.json")))
m = c["sizes"]["tiny"]
bad = []
def eq(what, a, b, tol=1e-9):
    if not (abs(a - b) <= tol):
        bad.append(f"{what}: {a} != {b}")
for arm in ("mha", "mha_noln", "sd_noln", "sd_scalar"):
    r, b = m["arms"][arm], os.path.join(o, "tiny", arm)
    vals = [float(l.split("tel:")[1]) for l in open(os.path.join(b, "main.log")) if " tel:" in l]
    eq(f"{arm} val", r["val"], vals[-1])
    spec = json.load(open(b + ".spectrum.json"))
    for k, x in enumerate(spec["layers"]):
        eq(f"{arm} erank layer {k}", r["erank"][k], x["erank_mean"])
    before = json.load(open(b + ".lin1.report.json"))["val"]["ppl_before"]
    eq(f"{arm} ppl", r["ppl"], before)
    change = {k: json.load(open(f"{b}.lin{k}.report.json"))["val"]["ppl_after"] / before - 1.0
              for k in (1, 2, 3)}
    for k, v in change.items():
        eq(f"{arm} linearize K={k}", r["linearize_ppl_change"][str(k)], v)
    eq(f"{arm} linearizable", r["linearizable"], max([k for k, v in change.items() if v < 0.05], default=0))
    if arm.startswith("sd"):
        sh = json.load(open(b + ".shrink.report.json"))
        p0, p1 = sh["attention_params"]
        eq(f"{arm} shrink cut", r["shrink"]["cut"], 1.0 - p1 / p0)
        if not p1 < p0:
            bad.append(f"{arm}: shrink did not cut ({p0} -> {p1})")
    elif "shrink" in r:
        bad.append(f"{arm}: a shrink on a standard model")
agrees = {x["claim"]: x["agrees"] for x in c["claims"]}
sd, mha = m["arms"]["sd_noln"], m["arms"]["mha"]
want = {"S2": math.isfinite(sd["val"]) and sd["frac_unstable"] == 0,
        "S3/S9": sd["erank"][0] < 3.0 and sd["erank"][-1] > 1.5 * sd["erank"][0],
        "S4": sd["linearizable"] > mha["linearizable"],
        "S11": math.isfinite(m["arms"]["mha_noln"]["val"])}
for k, v in want.items():
    if agrees[k] != {"tiny": v}:
        bad.append(f"{k}: agrees {agrees[k]}, expected {v} from the numbers")
for k in ("S6", "S8"):
    if agrees[k] is not None:
        bad.append(f"{k}: agrees {agrees[k]}, expected null (no yes/no rule)")
print("\n".join(bad) if bad else "consistent")
EOF
check "claims.json: val, erank, perplexities, linearizable layers, shrink cut equal the runs' files; every 'agrees' follows from them" \
  grep -qx consistent "$d/check"
[ "$(cat "$d/check")" = consistent ] || head -n 5 "$d/check"
check "claims.md: the S8 row gives the scalar-D cost in nats, perplexity and percent" \
  grep -qE '^\| S8 \| .* tiny: val loss [+-][0-9.]+ nats \(ppl [+-][0-9.]+, [+-][0-9.]+%\) vs full D' "$o/claims.md"
"${RUN[@]}" > "$d/run2.out" 2>&1; rc=$?
check "a second start runs nothing and writes the same claims (exit $rc)" \
  bash -c "[ $rc -eq 0 ] && ! grep -q '\.log [0-9]* s$' $d/run2.out && grep -q '^wrote $o/claims.md' $d/run2.out"
expect_error "other settings in the same --out are refused" \
  "^error: $o/settings.json: this directory holds a run with other settings \(steps differ" \
  "$PYTHON" scripts/sd_claims.py --sizes tiny --data shakespeare --steps 4 --out "$o"

# ------------------------------------------------------------------------------------------------
# bad input
expect_error "an unknown size" "^error: --sizes tiny,huge: expected a comma list of tiny, small" \
  "$PYTHON" scripts/sd_claims.py --sizes tiny,huge --out "$d/e"
expect_error "--steps 0" "^error: --steps, --threads: expected positive integers" \
  "$PYTHON" scripts/sd_claims.py --steps 0 --out "$d/e"
expect_error "an unknown data set is one line" "^error: argument --data: invalid choice: 'nowhere'" \
  "$PYTHON" scripts/sd_claims.py --data nowhere --out "$d/e"
expect_error "an unknown flag is one line" "^error: unrecognized arguments: --seeds" \
  "$PYTHON" scripts/sd_claims.py --seeds 1,2 --out "$d/e"
check "the refused runs created nothing" test ! -e "$d/e"

finish
