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
#
#   scripts/ab_upstream.sh PATH_TO_LLMC --cpu [--model L4C128H4T256] ...
#
# --cpu compares the CPU programs instead, no GPU needed: upstream's train_gpt2 (its demo run, fixed
# settings: B 4, T 64, 41 AdamW steps with beta2 0.999 and no clipping on shuffled TinyShakespeare,
# val loss every 10 steps; built in PATH_TO_LLMC by the user, `make train_gpt2` there) against
# build/upstream_cpu_loop, the same run on this project's model, data loader and AdamW
# (dev/cpu/upstream_cpu_loop.c). Both run in --out/run, where the fixed paths they read are links
# to this repository's files: gpt2_124M.bin (the init, fp32 version 3: upstream's CPU code reads
# nothing else), dev/data/tinyshakespeare/*.bin, gpt2_tokenizer.bin. Both are fp32, so the default
# --tol is 1e-3 nats (measured: 5e-6 over 41 steps for L4 C128); only --ours, --init, --model,
# --seed, --tol, --out and --dry-run apply.
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
  --cpu              the CPU programs instead: upstream's train_gpt2 demo run against
                     build/upstream_cpu_loop (make build/upstream_cpu_loop); fp32 init, --tol 1e-3
EOF
}

# --cpu: upstream's CPU demo run (its train_gpt2) against build/upstream_cpu_loop, both started in
# one run folder whose fixed input paths link to this repository's files
cpu_compare() {
  local up="$LLMC/train_gpt2" ours=${OURS_SET:-build/upstream_cpu_loop} run="$OUT/run" tol=${TOL_SET:-1e-3}
  local init=${INIT:-$OUT/init_${MODEL}_seed${SEED}_fp32.bin} missing=() version
  [ -x "$up" ] || missing+=("$up: not built: build upstream llm.c's CPU train_gpt2 first (make train_gpt2 in its checkout; this script runs it, it does not build it)")
  [ -x "$ours" ] || missing+=("$ours: not built (make build/upstream_cpu_loop)")
  [ -f "$TRAIN" ] || missing+=("$TRAIN: missing (make data)")
  [ -f "$VAL" ] || missing+=("$VAL: missing (make data)")
  if [ -n "$INIT" ]; then
    if [ ! -f "$INIT" ]; then
      missing+=("$INIT: init checkpoint not found (--init)")
    else
      version=$(od -An -t d4 -j 4 -N 4 "$INIT" | tr -d ' ')
      [ "$version" = 3 ] || missing+=("$INIT: header[1] version $version: upstream's CPU train_gpt2 reads only fp32 uniform checkpoints (version 3)")
    fi
  fi
  local write=("$PYTHON" train_gpt2.py --model "$MODEL" --seed "$SEED" --write_model "$init" --write_dtype fp32)
  local ours_abs up_abs
  ours_abs=$(abs "$ours")
  up_abs=$(abs "$up")
  local compare=("$PYTHON" scripts/ab_compare.py "$OUT/upstream.log" "$OUT/ours.log" --tol "$tol"
                 --tokens-per-step 256 --json "$OUT/compare.json")
  if [ "$DRY" = 1 ]; then
    echo "mkdir -p $run/dev/data/tinyshakespeare (links: gpt2_124M.bin -> $init, the TinyShakespeare shards, gpt2_tokenizer.bin)"
    [ -n "$INIT" ] || echo "${write[*]}"
    echo "(cd $run && $ours_abs) > $OUT/ours.log"
    echo "(cd $run && $up_abs) > $OUT/upstream.log"
    echo "${compare[*]}"
    report_missing dry "${missing[@]}"
    return 0
  fi
  report_missing run "${missing[@]}"
  mkdir -p "$run/dev/data/tinyshakespeare"
  if [ -z "$INIT" ]; then
    "${write[@]}" > "$OUT/init.log" 2>&1 || die "$init: train_gpt2.py could not write the init ($(tail -n 1 "$OUT/init.log"))"
  fi
  ln -sf "$(abs "$init")" "$run/gpt2_124M.bin"
  ln -sf "$(abs "$TRAIN")" "$run/dev/data/tinyshakespeare/tiny_shakespeare_train.bin"
  ln -sf "$(abs "$VAL")" "$run/dev/data/tinyshakespeare/tiny_shakespeare_val.bin"
  if [ -f gpt2_tokenizer.bin ]; then ln -sf "$PWD/gpt2_tokenizer.bin" "$run/gpt2_tokenizer.bin"; fi
  echo "ours:     (cd $run && $ours_abs)"
  (cd "$run" && "$ours_abs") > "$OUT/ours.log" 2>&1 ||
    die "$ours exited with an error (see $OUT/ours.log: $(tail -n 1 "$OUT/ours.log"))"
  echo "upstream: (cd $run && $up_abs)"
  (cd "$run" && "$up_abs") > "$OUT/upstream.log" 2>&1 ||
    die "$up exited with an error (see $OUT/upstream.log: $(tail -n 1 "$OUT/upstream.log"))"
  "${compare[@]}"
}

[ $# -ge 1 ] || { usage >&2; exit 1; }
case "$1" in --help|-h) usage; exit 0 ;; esac
LLMC=${1%/}; shift
OURS=./train_gpt2cu; INIT=""; MODEL=d12; SEED=42; DTYPE=bf16
TRAIN=dev/data/tinyshakespeare/tiny_shakespeare_train.bin
VAL=dev/data/tinyshakespeare/tiny_shakespeare_val.bin
STEPS=50; B=16; T=1024; TOTAL=""; LR=6e-4; VAL_EVERY=25; VAL_BATCHES=1; TOL=0.01
OUT=out/ab_upstream; DRY=0; CPU=0; GPU_ONLY=""; OURS_SET=""; TOL_SET=""""
while [ $# -gt 0 ]; do
  case "$1" in
    --help|-h) usage; exit 0 ;;
    --dry-run) DRY=1; shift; continue ;;
    --cpu) CPU=1; shift; continue ;;
  esac
  need_value "$1" $#
  case "$1" in --dtype|--train|--val|--steps|-b|-t|--total-batch|--lr|--val-every|--val-batches) GPU_ONLY=$1 ;; esac
  case "$1" in
    --ours) OURS=$2; OURS_SET=$2 ;; --init) INIT=$2 ;; --model) MODEL=$2 ;; --seed) SEED=$2 ;;
    --dtype) DTYPE=$2 ;; --train) TRAIN=$2 ;; --val) VAL=$2 ;; --steps) STEPS=$2 ;;
    -b) B=$2 ;; -t) T=$2 ;; --total-batch) TOTAL=$2 ;; --lr) LR=$2 ;;
    --val-every) VAL_EVERY=$2 ;; --val-batches) VAL_BATCHES=$2 ;; --tol) TOL=$2; TOL_SET=$2 ;; --out) OUT=$2 ;;
    *) die "$1: unknown option (see scripts/ab_upstream.sh --help)" ;;
  esac
  shift 2
done
is_uint --steps "$STEPS" -b "$B" -t "$T" --seed "$SEED" --val-every "$VAL_EVERY" --val-batches "$VAL_BATCHES"
case "$DTYPE" in bf16|fp32) ;; *) die "--dtype '$DTYPE': expected bf16 or fp32" ;; esac
TOTAL=${TOTAL:-$((B * T))}
abs() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
if [ "$CPU" = 1 ]; then
  [ -z "$GPU_ONLY" ] || die "$GPU_ONLY does not apply with --cpu (upstream's CPU demo run has fixed settings)"
  cpu_compare
  exit $?
fi

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
UP_CMD=("$(abs "$UPSTREAM")" "${FLAGS[@]}" -o "$OUT/upstream")
OUR_CMD=("$OURS" "${FLAGS[@]}" -start_over 1 -o "$OUT/ours")  # a rerun keeps the earlier run in ours/replaced_<n>/
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
