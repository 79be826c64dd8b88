#!/usr/bin/env bash
# scripts/sd_cpu_experiment.sh: a small S-D experiment on the CPU (TinyShakespeare): the routing
# cascade (doc/methods.md 3.10) and post-hoc linearization (3.13 reading (a)) for three arms of the same
# shape, then one summary table.
#
#   scripts/sd_cpu_experiment.sh [--steps N] [--model DESC] [--heads H] [--out DIR] [--threads N] [--dry-run]
#
# Arms (same init seed, same data order, same recipe as `make train`):
#   mha      standard softmax attention with LayerNorm (the baseline "standard attention")
#   sd       S-D attention (formulation A) with LayerNorm
#   sd_noln  S-D attention without per-block LayerNorm (-ln 0), U drawn with std -sd_init_u so that
#            the initial logits are O(1) (with GPT-2's 0.02 they are ~1e-4 and S never moves)
# Both S-D arms draw S with std --sd_init_s (default 0.1, as in the documented run; 0 is the
# trainers' default, under which the spectra show the learned S: scripts/sd_init_sweep.py).
# For each arm: ./sd_spectrum on the final checkpoint (per-layer erank of the routing part: S for
# S-D heads, the skew part of W_Q W_K^T for standard heads), then ./sd_surgery -op linearize -k K
# for K = 1..L-1 with the val loss before and after on the first 20 val windows (10,240 tokens).
# The "before" loss does not depend on K: only the K = 1 run evaluates it (-eval_before 0 for the
# others) and the summary takes it from there.
# Outputs in --out (default out/sd_cpu): <arm>/ (main.log, checkpoint), <arm>.spectrum.{txt,json},
# <arm>.lin<K>.report.json, summary.md. Finished steps are skipped when started again.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
STEPS=400; MODEL=L8C256H4T256; HEADS=4; OUT=out/sd_cpu; THREADS=1; DRY=0; SD_INIT_U=1.0
# the S init of the published run of this script (doc/sd_attention.md); the trainers' default is 0,
# under which the spectra show what training learned (scripts/sd_init_sweep.py)
SD_INIT_S=0.1
while [ $# -gt 0 ]; do
  case "$1" in
    --help|-h) sed -n '/^set -euo/q; 2,$p' "$0"; exit 0 ;;
    --dry-run) DRY=1; shift; continue ;;
  esac
  need_value "$1" $#
  case "$1" in
    --steps) STEPS=$2 ;;
    --model) MODEL=$2 ;;
    --heads) HEADS=$2 ;;
    --out) OUT=$2 ;;
    --threads) THREADS=$2 ;;
    --sd_init_u) SD_INIT_U=$2 ;;
    --sd_init_s) SD_INIT_S=$2 ;;
    *) die "$1: unknown flag (see --help)" ;;
  esac
  shift 2
done
is_uint --steps "$STEPS" --heads "$HEADS" --threads "$THREADS"
TS=dev/data/tinyshakespeare
for f in ./train_gpt2 ./sd_spectrum ./sd_surgery "$TS/tiny_shakespeare_train.bin" "$TS/tiny_shakespeare_val.bin"; do
  [ -e "$f" ] || die "$f is missing (run: make train_gpt2 sd_spectrum sd_surgery data)"
done
L=$(echo "$MODEL" | sed -nE 's/^L([0-9]+)C.*/\1/p')
[ -n "$L" ] || die "--model $MODEL: expected L<layers>C<width>H<heads>[T<maxT>]"
export OMP_NUM_THREADS=$THREADS
# run LOG CMD...: prints the command; unless --dry-run, runs it with its output in LOG, and a
# failure stops the script naming LOG. --dry-run writes nothing.
run() {
  local log=$1; shift
  echo "+ $* > $log"
  [ "$DRY" = 1 ] && return 0
  "$@" > "$log" 2>&1 || die "$1 failed: see $log"
}
[ "$DRY" = 1 ] || mkdir -p "$OUT"

declare -A TABLE=([mha]="$HEADS*$L" [sd]="$HEADS:sd*$L" [sd_noln]="$HEADS:sd*$L")
declare -A EXTRA=([mha]="" [sd]="-sd_init_s $SD_INIT_S" [sd_noln]="-ln 0 -sd_init_s $SD_INIT_S -sd_init_u $SD_INIT_U")
for arm in mha sd sd_noln; do
  if [ "$DRY" = 1 ]; then echo "+ echo '${TABLE[$arm]}' > $OUT/$arm.table.txt"
  else printf '%s\n' "${TABLE[$arm]}" > "$OUT/$arm.table.txt"; fi
  ckpt=$(printf '%s/%s/model_%08d.bin' "$OUT" "$arm" "$STEPS")
  if [ ! -f "$OUT/$arm/DONE_$(printf %08d "$STEPS")" ]; then
    # shellcheck disable=SC2086
    run "$OUT/$arm.train.log" ./train_gpt2 -e "$MODEL" -prism "$OUT/$arm.table.txt" ${EXTRA[$arm]} \
      -i "$TS/tiny_shakespeare_train.bin" -j "$TS/tiny_shakespeare_val.bin" \
      -b 4 -t 128 -x "$STEPS" -l 1e-3 -u 20 -q 0.1 -c 0.1 -v "$STEPS" -m -1 -s 0 -n "$STEPS" -o "$OUT/$arm" -y 1
  fi
  [ -f "$OUT/$arm.spectrum.json" ] || run "$OUT/$arm.spectrum.txt" ./sd_spectrum "$ckpt" -json "$OUT/$arm.spectrum.json"
  for k in $(seq 1 $((L - 1))); do
    [ -f "$OUT/$arm.lin$k.report.json" ] && continue
    # the input's val loss does not depend on K: only the K = 1 run evaluates it
    run "$OUT/$arm.lin$k.log" ./sd_surgery -e "$ckpt" -o "$OUT/$arm.lin$k.bin" -op linearize -k "$k" \
      -j "$TS/tiny_shakespeare_val.bin" -m 20 -b 4 -t 128 -eval_before $([ "$k" = 1 ] && echo 1 || echo 0)
    [ "$DRY" = 1 ] || rm -f "$OUT/$arm.lin$k.bin"
  done
done
[ "$DRY" = 1 ] && exit 0
/usr/bin/python3 - "$OUT" "$L" <<'EOF'
import json, sys, os
out, L = sys.argv[1], int(sys.argv[2])
arms = ["mha", "sd", "sd_noln"]
lines = ["# S-D CPU experiment", ""]
lines.append("## Routing effective rank (Roy-Vetterli erank, mean over heads) per layer")
lines.append("")
lines.append("| layer | " + " | ".join(arms) + " |")
lines.append("|---|" + "---|" * len(arms))
spec = {a: json.load(open(os.path.join(out, a + ".spectrum.json"))) for a in arms}
def layers(j):
    return j["layers"]
for l in range(L):
    row = []
    for a in arms:
        ls = layers(spec[a])
        v = ls[l].get("erank_mean") if l < len(ls) else None
        row.append("%.2f" % v if isinstance(v, (int, float)) else "?")
    lines.append(f"| {l} | " + " | ".join(row) + " |")
lines.append("")
lines.append("## Linearizing layers 0..K-1 after training: val perplexity change")
lines.append("")
lines.append("| K | " + " | ".join(arms) + " |")
lines.append("|---|" + "---|" * len(arms))
def val(a, k):
    return json.load(open(os.path.join(out, f"{a}.lin{k}.report.json")))["val"]
# "before" is the unchanged checkpoint, the same for every K: the K = 1 run's number is used
base = {a: (val(a, 1)["loss_before"], val(a, 1)["ppl_before"]) for a in arms}
for k in range(1, L):
    row = ["%+.1f%%" % (100.0 * (val(a, k)["ppl_after"] / base[a][1] - 1.0)) for a in arms]
    lines.append(f"| {k} | " + " | ".join(row) + " |")
lines.append("")
lines.append("Val loss / perplexity before surgery: " + ", ".join(
    f"{a} {base[a][0]:.4f} / {base[a][1]:.2f}" for a in arms))
open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
print(f"wrote {os.path.join(out, 'summary.md')}")
EOF
