#!/usr/bin/env bash
# scripts/ab_upstream.sh: upstream llm.c's train_gpt2cu against ours on the same data, flags and
# init checkpoint; then the losses step by step and tokens/s (scripts/ab_compare.py).
#
#   scripts/ab_upstream.sh PATH_TO_LLMC [--steps 50] [-b 16] [--dry-run] ...   (--help: all options)
#
# PATH_TO_LLMC is a checkout of karpathy/llm.c in which train_gpt2cu has ALREADY been built with
# upstream's own instructions (its README); this script builds nothing there. Our ./train_gpt2cu
# is this repository's CUDA trainer. Both run from this repository's root, so they read the same
# shards (default: TinyShakespeare), and both start from one checkpoint written by train_gpt2.py
# (--model d12 --seed 42 by default; bf16, version 5, because upstream's default bf16 build
# refuses fp32 files; --dtype fp32 for an FP32 upstream build). Only uniform models can be
# compared: upstream refuses our Prism checkpoints (version 103/105), by design.
# The flags are the subset both trainers share: -i -j -e -b -t -d -x -l -u -q -c -v -m -s 0 -h 0
# -n 0 -o. Outputs in --out (default out/ab_upstream): upstream.log, ours.log (stdout), each
# run's main.log, compare.json. Exit status: ab_compare.py's (0 agree, 2 differ, 1 error).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
PYTHON=${PYTHON:-/usr/bin/python3}

usage() {
  cat <<'EOF'
usage: scripts/ab_upstream.sh PATH_TO_LLMC [options]
  --ours PATH        our trainer (default ./train_gpt2cu)
  --init FILE        the init checkpoint of both runs (a uniform v3/v5 file); default: written
                     by train_gpt2.py from --model/--seed/--dtype into --out
  --model DESC       descriptor for the written init (default d12)
  --seed N           its init seed (default 42)
  --dtype bf16|fp32  its dtype (default bf16, upstream's default build)
  --train GLOB       train shards (default dev/data/tinyshakespeare/tiny_shakespeare_train.bin)
  --val GLOB         val shards (default dev/data/tinyshakespeare/tiny_shakespeare_val.bin)
  --steps N          -x (default 50)
  -b B, -t T         micro-batch and sequence length (default 16, 1024)
  --total-batch D    -d (default B*T: no accumulation)
  --lr LR            -l (default 6e-4); warmup -u 10, -q 0.0, -c 0.1
  --val-every N      -v (default 25)
  --val-batches M    -m (default 1: TinyShakespeare's val split holds one 16 x 1024 window)
  --tol NATS         per-step loss tolerance for ab_compare.py (default 0.01)
  --out DIR          (default out/ab_upstream)
  --dry-run          print the commands, run nothing
EOF
}

[ $# -ge 1 ] || { usage >&2; exit 1; }
case "$1" in --help|-h) usage; exit 0 ;; esac
LLMC=${1%/}; shift
OURS=./train_gpt2cu; INIT=""; MODEL=d12; SEED=42; DTYPE=bf16
TRAIN=dev/data/tinyshakespeare/tiny_shakespeare_train.bin
VAL=dev/data/tinyshakespeare/tiny_shakespeare_val.bin
STEPS=50; B=16; T=1024; TOTAL=""; LR=6e-4; VAL_EVERY=25; VAL_BATCHES=1; TOL=0.01
OUT=out/ab_upstream; DRY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --help|-h) usage; exit 0 ;;
    --dry-run) DRY=1; shift; continue ;;
  esac
  need_value "$1" $#
  case "$1" in
    --ours) OURS=$2 ;; --init) INIT=$2 ;; --model) MODEL=$2 ;; --seed) SEED=$2 ;;
    --dtype) DTYPE=$2 ;; --train) TRAIN=$2 ;; --val) VAL=$2 ;; --steps) STEPS=$2 ;;
    -b) B=$2 ;; -t) T=$2 ;; --total-batch) TOTAL=$2 ;; --lr) LR=$2 ;;
    --val-every) VAL_EVERY=$2 ;; --val-batches) VAL_BATCHES=$2 ;; --tol) TOL=$2 ;; --out) OUT=$2 ;;
    *) die "$1: unknown option (see scripts/ab_upstream.sh --help)" ;;
  esac
  shift 2
done
is_uint --steps "$STEPS" -b "$B" -t "$T" --seed "$SEED" --val-every "$VAL_EVERY" --val-batches "$VAL_BATCHES"
case "$DTYPE" in bf16|fp32) ;; *) die "--dtype '$DTYPE': expected bf16 or fp32" ;; esac
TOTAL=${TOTAL:-$((B * T))}

# ---- inputs: one line per missing item
UPSTREAM="$LLMC/train_gpt2cu"
missing=()
[ -x "$UPSTREAM" ] || missing+=("$UPSTREAM: not built: build upstream llm.c's train_gpt2cu first, following its own README (this script runs it, it does not build it)")
if [ ! -x "$OURS" ]; then
  if [ "$OURS" = ./train_gpt2cu ]; then
    missing+=("./train_gpt2cu: not built: build this repository's CUDA trainer first (make train_gpt2cu USE_CUDNN=1; doc/gpu.md)")
  else
    missing+=("$OURS: no executable trainer at this path (--ours)")
  fi
fi
compgen -G "$TRAIN" >/dev/null || missing+=("$TRAIN: no train shard matches (--train; TinyShakespeare: make data)")
compgen -G "$VAL" >/dev/null || missing+=("$VAL: no val shard matches (--val)")
if [ -n "$INIT" ]; then
  if [ ! -f "$INIT" ]; then
    missing+=("$INIT: init checkpoint not found (--init)")
  else
    version=$(od -An -t d4 -j 4 -N 4 "$INIT" | tr -d ' ')
    case "$version" in 3|5) ;; *) missing+=("$INIT: header[1] version $version: upstream llm.c reads only uniform checkpoints (version 3 or 5)") ;; esac
  fi
fi

INIT_PATH=${INIT:-$OUT/init_${MODEL}_seed${SEED}_${DTYPE}.bin}
FLAGS=(-i "$TRAIN" -j "$VAL" -e "$INIT_PATH" -b "$B" -t "$T" -d "$TOTAL" -x "$STEPS" -l "$LR"
       -u 10 -q 0.0 -c 0.1 -v "$VAL_EVERY" -m "$VAL_BATCHES" -s 0 -h 0 -n 0)
abs() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
UP_CMD=("$(abs "$UPSTREAM")" "${FLAGS[@]}" -o "$OUT/upstream")
OUR_CMD=("$OURS" "${FLAGS[@]}" -o "$OUT/ours")
WRITE_INIT=("$PYTHON" train_gpt2.py --model "$MODEL" --seed "$SEED" --write_model "$INIT_PATH" --write_dtype "$DTYPE")
COMPARE=("$PYTHON" scripts/ab_compare.py "$OUT/upstream.log" "$OUT/ours.log" --tol "$TOL"
         --tokens-per-step "$TOTAL" --json "$OUT/compare.json")

if [ "$DRY" = 1 ]; then
  echo "mkdir -p $OUT"
  [ -n "$INIT" ] || echo "${WRITE_INIT[*]}"
  echo "${OUR_CMD[*]} > $OUT/ours.log"
  echo "${UP_CMD[*]} > $OUT/upstream.log"
  echo "${COMPARE[*]}"
  report_missing dry "${missing[@]}"
  exit 0
fi
report_missing run "${missing[@]}"

mkdir -p "$OUT"
if [ -z "$INIT" ]; then
  "${WRITE_INIT[@]}" > "$OUT/init.log" 2>&1 || die "$INIT_PATH: train_gpt2.py could not write the init ($(tail -n 1 "$OUT/init.log"))"
fi
echo "ours:     ${OUR_CMD[*]}"
"${OUR_CMD[@]}" > "$OUT/ours.log" 2>&1 || die "$OURS exited with an error (see $OUT/ours.log: $(tail -n 1 "$OUT/ours.log"))"
echo "upstream: ${UP_CMD[*]}"
"${UP_CMD[@]}" > "$OUT/upstream.log" 2>&1 || die "$UPSTREAM exited with an error (see $OUT/upstream.log: $(tail -n 1 "$OUT/upstream.log"))"
exec "${COMPARE[@]}"
