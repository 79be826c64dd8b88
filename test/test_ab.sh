#!/usr/bin/env bash
# test/test_ab.sh: the one-command A/B (scripts/ab.py) and its summary (scripts/ab_report.py):
#   - ab_report.py on synthetic runs of three arms with known numbers: the paired val-loss
#     difference and its 95% interval, per-task accuracy deltas, Delta D_l per layer, steps to the
#     target loss, tokens/s ratio and median MFU; its errors;
#   - ab.py end to end on the tiny preset (TinyShakespeare, 4 steps, 2 seeds x 3 arms: uniform,
#     Prism and a layer-table file), then the summary's numbers checked against the runs' own
#     logs, evals.json and attn_distance JSON; the arms of a seed start from the same weights, two
#     seeds from different ones; a second start skips everything; other settings in the same
#     --out are refused;
#   - the small preset's options (--seq-len, --val-every, --val-batches -1, --attn-batch) on the
#     trainer and attn_distance lines, the attention windows the val split holds, their errors;
#   - --dry-run for the GPU sizes (run_gpt2.sh lines with --budget, the budget line), the SM 8.x
#     warning for head size 256 and its absence for the 128-wide preset; bad input is one line;
#   - run_gpt2.sh on a shard folder that is not FineWeb: its prefix, and a val split under
#     10*2^20 tokens read whole, said so.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
PYTHON=${PYTHON:-/usr/bin/python3}
export PYTHON
export -f near far
d=build/tmp_ab
rm -rf "$d"; mkdir -p "$d"

# ------------------------------------------------------------------------------------------------
# the bytes preset: the prose bytes, -tok, no zero-shot tasks, the floors with the byte tokenizer
dry=$("$PYTHON" scripts/ab.py --size bytes --seeds 1 --out "$d/bytes_dry" --dry-run 2>/dev/null)
check "ab.py --size bytes: L4C128H2T256V256 on the prose bytes, 1920 steps of 16 x 256, -tok bytes_tokenizer.bin, no evals" \
  test "$(grep -c "^OMP_NUM_THREADS=2 ./train_gpt2 -e L4C128H2T256V256 .* -i 'dev/data/prose_bytes/prose_bytes_train_\*.bin' .* -b 16 -t 256 -x 1920 .* -tok bytes_tokenizer.bin" <<< "$dry")/$(grep -c 'eval_gpt2' <<< "$dry")/$(grep -c 'floors.py .* -b 16 -t 256 -m 16 .*--tokenizer bytes_tokenizer.bin' <<< "$dry")" = 2/0/1
expect_error "ab.py --size bytes --evals 1: the task files are GPT-2-tokenized" \
  "^error: --evals 1: the zero-shot task files are GPT-2-tokenized" \
  "$PYTHON" scripts/ab.py --size bytes --evals 1 --out "$d/bytes_dry" --dry-run
expect_error "ab.py --size bytes --data shakespeare" "^error: --data shakespeare: the bytes size reads the prose corpus as bytes" \
  "$PYTHON" scripts/ab.py --size bytes --data shakespeare --out "$d/bytes_dry" --dry-run

# ab_report.py on synthetic runs
s=$d/synth
"$PYTHON" - "$s" <<'EOF'
import json, os, sys
out = sys.argv[1]
# final val losses: uniform 3.00 3.10 3.05; prism -0.02 -0.01 -0.03 (mean -0.02, sd 0.01);
# wide +0.01 on every seed (sd 0: interval of zero width)
final = {"uniform": [3.00, 3.10, 3.05], "prism": [2.98, 3.09, 3.02], "wide": [3.01, 3.11, 3.06]}
for arm, vals in final.items():
    for seed, v in zip((1, 2, 3), vals):
        d = os.path.join(out, f"{arm}_seed{seed}")
        os.makedirs(d)
        with open(os.path.join(d, "main.log"), "w") as f:
            # val records at 0, 10, 20: the 10-step one is v + 0.5 for uniform and v + 0.2 for prism,
            # so that the target 3.40 is reached at step 20 by uniform and at step 10 by prism
            mid = v + (0.2 if arm == "prism" else 0.5)
            f.write(f"s:0 tel:10.0\n")
            for st in range(20):
                f.write(f"s:{st} trl:{10 - st * 0.3:.4f} lr:0.001 norm:1.0\n")
                if st == 9:
                    f.write(f"s:10 tel:{mid:.4f}\n")
            f.write(f"s:20 tel:{v:.4f}\n")
        ms = {"uniform": 100.0, "prism": 95.0, "wide": 104.0}[arm]
        mfu = {"uniform": 40.0, "prism": 42.0, "wide": 38.0}[arm]
        with open(os.path.join(d, "stdout.log"), "w") as f:
            f.write("B 4 x T 64 = 1000 tokens per step\n")
            for st in range(8):
                # the first 3 step lines (warm-up) are left out of the median: 0.0 there
                f.write(f"step {st + 1:4d}/20 | loss 3.0 (+0.00z)| norm 1.0 (+0.00z)| lr 1e-3 | {ms} ms | "
                        f"{0.0 if st < 3 else mfu + st - 5:.1f}% bf16 MFU | 10000 tok/s\n")
            f.write(f"total average iteration time: {ms} ms\n")
        acc = {"hellaswag": 0.30, "piqa": 0.60, "arc_easy": 0.40, "winogrande": 0.50, "lambada": 0.10}
        bump = {"uniform": 0.0, "prism": 0.01 * seed, "wide": -0.02}[arm]
        tasks = {t: ({"acc": a + bump, "acc_norm": a + bump, "examples": 100} if t in ("hellaswag", "piqa", "arc_easy")
                     else {"acc": a + bump, "examples": 100}) for t, a in acc.items()}
        json.dump({"tasks": tasks}, open(os.path.join(d, "evals.json"), "w"))
    if arm != "uniform":
        for seed in (1, 2, 3):
            # Delta D: layer 0 = -1, -2, -3 (prism) or +1 (wide); layer 1 = +0.5
            d0 = -float(seed) if arm == "prism" else 1.0
            # wide's layer 2 is linear attention: attn_distance skips it (no attention matrix)
            skipped = [{"layer": 2, "skipped": "no attention matrix"}] if arm == "wide" else []
            json.dump({"delta": [{"layer": 0, "delta": {"D": d0}}, {"layer": 1, "delta": {"D": 0.5}}] + skipped},
                      open(os.path.join(out, f"attn_{arm}_seed{seed}.json"), "w"))
# the floors of the val windows (scripts/floors.py --json): every run is below the bigram floor 4.0
json.dump({"unigram": 6.0, "bigram": 4.0, "bigram_lambda": 0.6, "targets": 1000, "train_tokens": 100000,
           "B": 4, "T": 64, "batches": 4, "bytes": 4000, "bytes_per_token": 4.0, "unigram_bpb": 2.16,
           "bigram_bpb": 1.44}, open(os.path.join(out, "floors.json"), "w"))
EOF
"$PYTHON" scripts/ab_report.py "$s" --arms uniform,prism,wide --target-loss 3.40 > "$s/out" 2>&1; rc=$?
check "ab_report: exit 0 and summary.md, summary.json, loss.png, attn_delta.png written (exit $rc)" \
  bash -c "[ $rc -eq 0 ] && [ -s $s/summary.md ] && [ -s $s/summary.json ] && [ -s $s/loss.png ] && [ -s $s/attn_delta.png ]"
j() { "$PYTHON" -c "import json,sys; s=json.load(open('$s/summary.json'))['summary']; print($1)"; }
check "ab_report: prism - uniform = -0.0200, 95% CI [-0.0448, +0.0048] (se 0.0058, t 4.303)" \
  bash -c "near $(j "s['vs_reference']['prism']['val']['mean']") -0.02 1e-9 && near $(j "s['vs_reference']['prism']['val']['ci95'][0]") -0.044841 2e-5 && near $(j "s['vs_reference']['prism']['val']['ci95'][1]") 0.004841 2e-5"
check "ab_report: the within-the-noise statement for prism" grep -q '^prism - uniform = -0.0200 +- 0.0058 (se) nats over 3 paired seeds: within the noise' "$s/out"
check "ab_report: wide is +0.0100 on every seed: higher (worse), the interval excludes 0" \
  grep -q "^wide's final val loss is higher (worse) than uniform's by 0.0100 nats over 3 paired seeds" "$s/out"
check "ab_report: paired hellaswag delta of prism = +0.0200 (0.01 x seed), wide = -0.0200" \
  bash -c "near $(j "s['vs_reference']['prism']['acc']['hellaswag']['mean']") 0.02 1e-9 && near $(j "s['vs_reference']['wide']['acc']['lambada']['mean']") -0.02 1e-9"
check "ab_report: winogrande and lambada use acc (no acc_norm): per-arm mean 0.5 and 0.1 for uniform" \
  bash -c "near $(j "s['per_arm']['uniform']['acc']['winogrande']") 0.5 1e-9 && near $(j "s['per_arm']['uniform']['acc']['lambada']") 0.1 1e-9"
check "ab_report: Delta D layer 0 of prism = -2 with 95% CI [-4.484, +0.484] (sd 1, t 4.303); layer 1 = 0.5" \
  bash -c "near $(j "s['vs_reference']['prism']['delta_D']['0']['mean']") -2 1e-9 && near $(j "s['vs_reference']['prism']['delta_D']['0']['ci95'][0]") -4.484338 1e-5 && near $(j "s['vs_reference']['prism']['delta_D']['1']['mean']") 0.5 1e-9"
check "ab_report: a layer attn_distance skipped (linear attention) is n/a, with the note, and listed as skipped" \
  bash -c "[ \"$(j "s['vs_reference']['wide']['delta_D_skipped']")\" = '[2]' ] && grep -q '^| 2 | n/a | n/a |$' $s/summary.md && grep -q '^n/a: a layer that attn_distance skips (linear attention' $s/summary.md"
check "ab_report: steps to 3.40: uniform at 20, prism at 10 on every seed (ratio 0.5)" \
  bash -c "[ \"$(j "sorted(set(s['per_arm']['uniform']['steps_to_target'].values()))")\" = '[20]' ] && [ \"$(j "sorted(set(s['per_arm']['prism']['steps_to_target'].values()))")\" = '[10]' ] && near $(j "s['vs_reference']['prism']['steps_ratio']['mean']") 0.5 1e-9"
check "ab_report: tokens/s ratio prism/uniform = 100/95 = 1.0526; median MFU after warm-up 40.0, 42.0" \
  bash -c "near $(j "s['vs_reference']['prism']['tok_s_ratio']") 1.052632 1e-5 && near $(j "s['per_arm']['uniform']['mfu']") 40.0 1e-9 && near $(j "s['per_arm']['prism']['mfu']") 42.0 1e-9"
check "ab_report: an accuracy interval counts the examples: wide is -0.02 on every seed (sd 0), yet its hellaswag interval is -0.02 +- t(2) sqrt((0.28 x 0.72 + 0.3 x 0.7) / 100 / 3) = +- 0.1594" \
  bash -c "near $(j "s['vs_reference']['wide']['acc']['hellaswag']['ci95'][1]") 0.139384 1e-4 && near $(j "s['vs_reference']['wide']['acc']['hellaswag']['ci95'][0]") -0.179384 1e-4"
check "ab_report: the header names the tables, the floors and the examples per task" \
  bash -c "grep -q '^- val windows: 4 batches of B 4 x T 64 (1,000 targets); floors unigram 6.0000 (2.160 bpb), bigram 4.0000' $s/summary.md && grep -q '^- zero-shot examples per task: arc_easy 100, hellaswag 100' $s/summary.md && grep -q '^- layer table per arm: .uniform. the descriptor uniform heads' $s/summary.md"
check "ab_report: bits per byte per arm: uniform 3.05 nats x 1000 / (4000 ln 2) = 1.1000" \
  bash -c "near $(j "s['per_arm']['uniform']['bpb']['mean']") 1.100054 1e-5"
# the gate: with the bigram floor at 3.05, uniform's seed 2 (3.10) and seed 3 (3.05) are not below it
cp "$s/floors.json" "$s/floors.keep"
"$PYTHON" -c "import json,sys; f=json.load(open(sys.argv[1])); f['bigram']=3.05; json.dump(f, open(sys.argv[1], 'w'))" "$s/floors.json"
"$PYTHON" scripts/ab_report.py "$s" --arms uniform,prism,wide --plots 0 > "$s/out_gate" 2>&1
check "ab_report: a run at or above the bigram floor gets no verdict: 'not testable at this budget' with the numbers" \
  bash -c "grep -q '^prism vs uniform: not testable at this budget: mean val uniform 3.0500, prism 3.0300 vs bigram floor 3.0500 (unigram 6.0000) nats' $s/out_gate && ! grep -q 'within the noise\|excludes 0' $s/out_gate"
rm "$s/floors.json"
"$PYTHON" scripts/ab_report.py "$s" --arms uniform,prism,wide --plots 0 > "$s/out_gate" 2>&1
check "ab_report: without floors.json no verdict either" \
  bash -c "grep -q '^prism vs uniform: no floors.json (scripts/floors.py): whether the runs learned is unknown, so no verdict' $s/out_gate"
echo '{not json' > "$s/floors.json"
expect_error "ab_report: a malformed floors.json is one line naming it" "^error: $s/floors.json: not JSON .*expected scripts/floors.py --json output" \
  "$PYTHON" scripts/ab_report.py "$s" --arms uniform,prism,wide --plots 0
mv "$s/floors.keep" "$s/floors.json"
"$PYTHON" scripts/ab_report.py "$s" --arms uniform,prism --plots 0 > "$s/out2" 2>&1
check "ab_report: the default target is the largest final val loss (3.10 of uniform seed 2)" \
  bash -c "near $(j "s['target_loss']") 3.10 1e-9"
expect_error "ab_report: an arm with no runs is an error" "^error: $s: no finished runs of the arm\(s\) lean" \
  "$PYTHON" scripts/ab_report.py "$s" --arms uniform,lean
printf 's:0 tel:10.0\ns:0 trl:10.0 lr:0.001 norm:1.0\n' > "$s/wide_seed1/main.log"
expect_error "ab_report: an unfinished run is an error naming its log" "^error: $s/wide_seed1/main.log: unfinished run" \
  "$PYTHON" scripts/ab_report.py "$s" --arms uniform,wide
echo '{"tasks": {"piqa": {}}}' > "$s/prism_seed1/evals.json"
expect_error "ab_report: a malformed evals.json names the file" "^error: $s/prism_seed1/evals.json: not eval_gpt2 -json output" \
  "$PYTHON" scripts/ab_report.py "$s" --arms uniform,prism

# ------------------------------------------------------------------------------------------------
# ab.py end to end: the tiny preset on TinyShakespeare, 4 steps, 2 seeds x 3 arms
o=$d/tiny
printf '# a table with explicit head sizes (2 heads of 32: attention width 64 < C)\n2x32*2 2*2\n' > "$d/narrow.txt"
AB=("$PYTHON" scripts/ab.py --size tiny --data shakespeare --steps 4 --seeds 1,2 --eval-n 2 --attn-windows 1
    --threads 1 --jobs 2 --arms "uniform,prism,narrow=$d/narrow.txt" --out "$o")  # two trainings at a time
"${AB[@]}" > "$d/tiny.out" 2>&1; rc=$?
check "ab.py tiny: 6 runs, the evals, 4 attention distances and the summary (exit $rc)" \
  bash -c "[ $rc -eq 0 ] && [ \$(ls -d $o/*_seed[12] | wc -l) -eq 6 ] && [ \$(ls $o/attn_*_seed*.json | wc -l) -eq 4 ] && [ -s $o/summary.md ] && [ -s $o/loss.png ] && [ -s $o/attn_delta.png ]"
[ "$rc" -eq 0 ] || tail -n 5 "$d/tiny.out"
"$PYTHON" - "$o" > "$d/tiny.check" 2>&1 <<'EOF'
import json, math, os, statistics, sys
o = sys.argv[1]
s = json.load(open(os.path.join(o, "summary.json")))["summary"]
bad = []
def final(arm, seed):
    vals = [float(l.split("tel:")[1]) for l in open(os.path.join(o, f"{arm}_seed{seed}", "main.log")) if " tel:" in l]
    return vals[-1]
for arm in ("prism", "narrow"):
    diffs = [final(arm, k) - final("uniform", k) for k in (1, 2)]
    if abs(s["vs_reference"][arm]["val"]["mean"] - statistics.fmean(diffs)) > 1e-9:
        bad.append(f"{arm}: paired val mean {s['vs_reference'][arm]['val']['mean']} != logs {statistics.fmean(diffs)}")
    for t in ("hellaswag", "piqa", "arc_easy", "winogrande", "lambada"):
        def acc(a, k):
            v = json.load(open(os.path.join(o, f"{a}_seed{k}", "evals.json")))["tasks"][t]
            return v.get("acc_norm", v["acc"])
        dd = statistics.fmean(acc(arm, k) - acc("uniform", k) for k in (1, 2))
        if abs(s["vs_reference"][arm]["acc"][t]["mean"] - dd) > 1e-9:
            bad.append(f"{arm} {t}: {s['vs_reference'][arm]['acc'][t]['mean']} != evals.json {dd}")
    per = {}
    for k in (1, 2):
        for e in json.load(open(os.path.join(o, f"attn_{arm}_seed{k}.json")))["delta"]:
            per.setdefault(str(e["layer"]), []).append(e["delta"]["D"])
    for layer, v in per.items():
        if abs(s["vs_reference"][arm]["delta_D"][layer]["mean"] - statistics.fmean(v)) > 1e-9:
            bad.append(f"{arm} layer {layer}: Delta D {s['vs_reference'][arm]['delta_D'][layer]['mean']} != attn json {statistics.fmean(v)}")
    if len(per) != 4:
        bad.append(f"{arm}: {len(per)} layers of Delta D, expected 4")
print("\n".join(bad) if bad else "consistent")
EOF
check "ab.py tiny: the summary's paired val loss, task deltas and Delta D_l equal the runs' main.log, evals.json and attn JSON" \
  grep -qx consistent "$d/tiny.check"
[ "$(cat "$d/tiny.check")" = consistent ] || head -n 5 "$d/tiny.check"
check "ab.py tiny: every run draws independent rows (-rows 1, the default)" \
  bash -c "grep -q -- '-rows *| 1 ' $o/narrow_seed2/stdout.log && grep -q -- '-rows *| 1 ' $o/prism_seed2/stdout.log"
check "ab.py tiny: seed S reads the data order -data_seed S and inits with -seed S in every arm" \
  bash -c "grep -q -- '-data_seed *| 2 ' $o/narrow_seed2/stdout.log && grep -q -- '-seed *| 2 ' $o/prism_seed2/stdout.log"
check "ab.py tiny: the table arm runs with -layers, the preset with -prism (the rules checked)" \
  bash -c "grep -q -- '^| -layers  *| [^\"]' $o/narrow_seed1/stdout.log && grep -q -- '^| -prism  *| prism/' $o/prism_seed1/stdout.log"
check "ab.py tiny: the narrow table's layers are 2 heads x 32" grep -q '2 heads x  32' "$o/narrow_seed1/stdout.log"
# The arms of a seed start from the same weights (same -seed): uniform and Prism differ at step 0
# only by the head split (measured 0.0000 here); two seeds differ by about 0.04 nats, so 1e-3
# tells a shared start from two.
tel0() { sed -n 's/^s:0 tel://p' "$1"; }
near_tel0() {
  local a b
  a=$(tel0 "$1"); b=$(tel0 "$2")
  echo "step-0 val loss $a ($1) vs $b ($2)"
  near "$a" "$b" "$3"
}
for seed in 1 2; do
  check "ab.py tiny: seed $seed's uniform and Prism runs start from the same weights (step-0 val losses within 1e-3 nats)" \
    near_tel0 "$o/uniform_seed$seed/main.log" "$o/prism_seed$seed/main.log" 1e-3
done
check "ab.py tiny: the two seeds start from different weights (step-0 val losses more than 1e-3 apart)" \
  far "$(tel0 "$o/uniform_seed1/main.log")" "$(tel0 "$o/uniform_seed2/main.log")" 1e-3
"${AB[@]}" > "$d/tiny2.out" 2>&1
check "ab.py: a second start skips the 6 complete runs and reruns no eval or attention distance" \
  bash -c "[ \$(grep -c 'complete, skipped' $d/tiny2.out) -eq 6 ] && ! grep -q 'zero-shot evals\|attention distance' $d/tiny2.out"
expect_error "ab.py: other settings in the same --out are refused" "^error: $o/ab.json: this directory holds an A/B with other settings \(steps, val_every differ\)" \
  "$PYTHON" scripts/ab.py --size tiny --data shakespeare --steps 5 --seeds 1,2 --arms uniform,prism --out "$o"
expect_error "ab.py: an arm name run with another table is refused" "^error: $o/ab.json: arm narrow was run with the table" \
  "$PYTHON" scripts/ab.py --size tiny --data shakespeare --steps 4 --seeds 1,2 --eval-n 2 --attn-windows 1 --arms uniform,narrow=prism/schedules/L4C128_prism.txt --out "$o"
# --jobs 2 with a GPU trainer (a stand-in named train_gpt2cu that notes its CUDA_VISIBLE_DEVICES and
# runs the CPU trainer): each training sees one GPU, and the two at once see different ones
printf '#!/usr/bin/env bash\necho "${CUDA_VISIBLE_DEVICES-unset}" >> %s/devices.txt\nexec ./train_gpt2 "$@"\n' "$PWD/$d" \
  > "$d/train_gpt2cu"
chmod +x "$d/train_gpt2cu"
"$PYTHON" scripts/ab.py --size tiny --data shakespeare --steps 3 --seeds 1,2 --threads 1 --jobs 2 --evals 0 --attn 0 \
  --bin "$d/train_gpt2cu" --out "$d/gj" > "$d/gj.out" 2>&1
check "ab.py --jobs 2 with a GPU trainer: 4 runs, each on GPU 0 or 1, both used ($(sort "$d/devices.txt" | tr '\n' ' '))" \
  test "$(grep -cx '[01]' "$d/devices.txt")/$(sort -u "$d/devices.txt" | tr -d '\n')" = "4/01"

# ------------------------------------------------------------------------------------------------
# --dry-run and checks
dry=$("$PYTHON" scripts/ab.py --size 124M --budget tenth --arms uniform,prism_d --seeds 1,2 --out "$d/g" --dry-run 2>/dev/null)
check "ab.py --dry-run 124M: 4 run_gpt2.sh runs at --budget tenth with --data-seed S, budget line with the run count" \
  bash -c "[ \$(grep -c '^bash scripts/run_gpt2.sh --size 124M .*--budget tenth' <<< \"\$1\") -eq 4 ] && grep -q -- '--seed 2 --data-seed 2 ' <<< \"\$1\" && grep -q '^# budget tenth: 1886 steps x 524288 = 0.99B tokens; .* per run; 4 runs' <<< \"\$1\"" _ "$dry"
check "ab.py --dry-run 124M: evals on eval_gpt2cu (all examples), attention distance and the report" \
  bash -c "grep -q '^./eval_gpt2cu -e $d/g/prism_d_seed2/model_00001886.bin -tasks all -n 0 ' <<< \"\$1\" && [ \$(grep -c 'attn_distance' <<< \"\$1\") -eq 2 ] && grep -q 'scripts/ab_report.py $d/g --arms uniform,prism_d' <<< \"\$1\"" _ "$dry"
check "ab.py --dry-run writes nothing" test ! -e "$d/g"
dryf=$("$PYTHON" scripts/ab.py --size 354M --data-order fixed --arms uniform,prism --seeds 3 --out "$d/g" --dry-run 2>/dev/null)
check "ab.py --data-order fixed: llm.c's order 42 in every run" \
  bash -c "grep -q -- '--size 354M --seed 3 --data-seed 42 ' <<< \"\$1\"" _ "$dryf"
# the small A/B on TinyShakespeare of doc/reproducing.md: T, -v and -m set, the whole val split,
# attention distance on windows of 4 sequences
drys=$("$PYTHON" scripts/ab.py --size small --data shakespeare --data-order fixed --evals 0 --val-every 150 \
       --val-batches -1 --attn-batch 4 --seeds 1 --out "$d/g" --dry-run 2>/dev/null)
check "ab.py --val-every 150 --val-batches -1 --attn-batch 4: -v 150 -m -1 on the trainer, attn_distance -b 4 x 16 windows, no eval" \
  bash -c "[ \$(grep -c -- ' -b 4 -t 128 -x 300 .* -v 150 -m -1 -s 0 ' <<< \"\$1\") -eq 2 ] && grep -q -- '^OMP_NUM_THREADS=2 ./attn_distance .* -b 4 -t 0 -n 16 ' <<< \"\$1\" && ! grep -q eval_gpt2 <<< \"\$1\"" _ "$drys"
dryl=$("$PYTHON" scripts/ab.py --size small --data shakespeare --seq-len 256 --micro-batch 8 --attn-batch 8 --seeds 1 \
       --out "$d/g" --dry-run 2>/dev/null)
check "ab.py --seq-len 256 --attn-batch 8: -t 256 on the trainer; 15 attn windows of 8 x 256 (all TinyShakespeare's 32,768 val tokens hold)" \
  bash -c "grep -q -- ' -b 8 -t 256 -x 300 ' <<< \"\$1\" && grep -q -- ' -b 8 -t 0 -n 15 ' <<< \"\$1\"" _ "$dryl"
expect_error "ab.py: --seq-len beyond the preset's maxT" "^error: --seq-len 512: longer than the maxT 256 of L8C256H4T256$" \
  "$PYTHON" scripts/ab.py --size small --seq-len 512 --dry-run --out "$d/g"
expect_error "ab.py: --val-every on a launcher size" "^error: --val-every: tiny, small and bytes only; 124M runs llm.c.s recipe" \
  "$PYTHON" scripts/ab.py --size 124M --val-every 10 --dry-run --out "$d/g"
expect_error "ab.py: --val-batches 0" "^error: --val-batches 0: expected a positive integer or -1" \
  "$PYTHON" scripts/ab.py --size tiny --val-batches 0 --dry-run --out "$d/g"
expect_error "ab.py: no attn_distance window in the val split, before any run" \
  "^error: dev/data/tinyshakespeare/tiny_shakespeare_val.bin: 32768 val tokens hold no attn_distance window of --attn-batch x T = 65536 tokens" \
  "$PYTHON" scripts/ab.py --size small --data shakespeare --attn-batch 512 --dry-run --out "$d/g"
w=$("$PYTHON" scripts/ab.py --size small --bin ./train_gpt2cu --gpu-arch 8.0 --out "$d/g" --dry-run 2>&1 >/dev/null)
check "ab.py: SM 8.0 and the small Prism (256-wide heads): a warning before any run, naming the missing 128-wide preset" \
  bash -c "grep -q '^warning: SM 8.0 GPU: cuDNN does not train head size 256 there, so the 256-wide layers of arm prism (prism/schedules/L8C256_prism.txt)' <<< \"\$1\"" _ "$w"
w2=$("$PYTHON" scripts/ab.py --size 757M --arms uniform,prism,prism_d --gpu-arch 8.6 --out "$d/g" --dry-run 2>&1 >/dev/null)
check "ab.py: 757M on SM 8.6 names L24C1536_prism_d.txt, and warns for prism only" \
  bash -c "[ \$(grep -c 'head size 256' <<< \"\$1\") -eq 1 ] && grep -q 'L24C1536_prism_d.txt avoids it' <<< \"\$1\"" _ "$w2"
w3=$("$PYTHON" scripts/ab.py --size small --gpu-arch 8.0 --out "$d/g" --dry-run 2>&1 >/dev/null)
check "ab.py: no SM 8.x warning for the CPU trainer" bash -c "! grep -q 'head size 256' <<< \"\$1\"" _ "$w3"
expect_error "ab.py: an unknown arm" "^error: --arms: 'wider': expected uniform, prism, prism_b, prism_c, prism_d or NAME=FILE" \
  "$PYTHON" scripts/ab.py --size tiny --arms uniform,wider --out "$d/e"
expect_error "ab.py: one arm is not an A/B" "^error: --arms uniform: expected at least two arms with distinct names" \
  "$PYTHON" scripts/ab.py --size tiny --arms uniform --out "$d/e"
expect_error "ab.py: a name with _seed would break the run folders" "^error: --arms: 'a_seed1' is not an arm name" \
  "$PYTHON" scripts/ab.py --size tiny --arms uniform,a_seed1=x.txt --out "$d/e"
expect_error "ab.py: bad seeds" "^error: --seeds '1,x': expected distinct non-negative integers" \
  "$PYTHON" scripts/ab.py --size tiny --seeds 1,x --out "$d/e"
expect_error "ab.py --jobs 0: one line" "^error: --gpus, --threads and --jobs: expected positive integers" \
  "$PYTHON" scripts/ab.py --size tiny --jobs 0 --out "$d/e"
expect_error "ab.py: --steps with --budget" "^error: --steps and --budget half: give one of them" \
  "$PYTHON" scripts/ab.py --size tiny --steps 3 --budget half --out "$d/e"
expect_error "ab.py: --gpus 2 with the CPU trainer" "^error: --gpus 2: the CPU trainer ./train_gpt2 runs one process" \
  "$PYTHON" scripts/ab.py --size tiny --data shakespeare --gpus 2 --out "$d/e"
expect_error "ab.py: a missing layer table is named before any run" "^error: $d/none.txt: layer table of arm x not found" \
  "$PYTHON" scripts/ab.py --size tiny --data shakespeare --arms uniform,x=$d/none.txt --out "$d/e"
expect_error "ab.py: an unknown data set" "^error: --data nowhere: expected shakespeare, prose, fineweb, fineweb-edu or a directory" \
  "$PYTHON" scripts/ab.py --size tiny --data nowhere --out "$d/e"
expect_error "ab.py: an unknown size is one line" "^error: argument --size: invalid choice: 'huge'" \
  "$PYTHON" scripts/ab.py --size huge --out "$d/e"
expect_error "ab.py: no abbreviated flags (--seed is not --seeds)" "^error: unrecognized arguments: --seed 2" \
  "$PYTHON" scripts/ab.py --size tiny --seed 2 --out "$d/e"
expect_error "ab.py: --build takes 0 or 1" "^error: argument --build: invalid choice: 2" \
  "$PYTHON" scripts/ab.py --size tiny --build 2 --out "$d/e"
expect_error "ab.py: a --bin that make does not build is one line" "^error: $d/none/train_gpt2: not built \(--bin names a built trainer\)" \
  "$PYTHON" scripts/ab.py --size tiny --data shakespeare --evals 0 --attn 0 --bin "$d/none/train_gpt2" --out "$d/e"
check "ab.py: the refused runs created nothing" test ! -e "$d/e"

# ------------------------------------------------------------------------------------------------
# run_gpt2.sh on another data set: a folder of toy_{train,val}_*.bin shards, 100,000 val tokens
toy_shards() {  # folder val_tokens: toy_train_000001.bin (200,000 tokens) and toy_val_000000.bin
  "$PYTHON" - "$1" "$2" <<'EOF'
import os, struct, sys
d = sys.argv[1]; os.makedirs(d)
for name, n in (("toy_train_000001.bin", 200000), ("toy_val_000000.bin", int(sys.argv[2]))):
    with open(os.path.join(d, name), "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(bytes(2 * n))
EOF
}
toy_shards "$d/toy" 100000
toy=$(scripts/run_gpt2.sh --size 124M --data "$d/toy" --hellaswag 0 --bin ./train_gpt2 --dry-run 2>/dev/null)
check "run_gpt2.sh --data toy/: the shards' own prefix, and the 100,000-token val split read whole (-m 1 of 65,536)" \
  bash -c "grep -q -- \"-i '$d/toy/toy_train\*.bin' -j '$d/toy/toy_val\*.bin'\" <<< \"\$1\" && grep -q -- ' -m 1 ' <<< \"\$1\" && grep -q 'the val split holds 100000 tokens, fewer than llm.c' <<< \"\$1\"" _ "$toy"

# a val split smaller than one batch (B*T*processes = 65,536 tokens at 124M) is refused in one line
toy_shards "$d/toy_small" 50000
expect_error "run_gpt2.sh --data: a 50,000-token val split holds no batch of 65,536 tokens" \
  "^error: .*toy_small/toy_val\*\.bin: 50000 val tokens hold no batch of B\*T\*processes = 65536 tokens$" \
  scripts/run_gpt2.sh --size 124M --data "$d/toy_small" --hellaswag 0 --bin ./train_gpt2 --dry-run

finish
