#!/usr/bin/env bash
# scripts/ab_cpu.sh: a small real A/B on the CPU: uniform vs Prism on TinyShakespeare with the
# CPU trainer ./train_gpt2, several seeds per arm, then scripts/ab_summary.py.
#
#   scripts/ab_cpu.sh                      # the full A/B: 3 seeds x 2 arms of L8C256H4T256
#   scripts/ab_cpu.sh --dry-run            # print the commands
#   scripts/ab_cpu.sh --help
#
# Pairing (doc/methods.md 2.6 "Protocol"): for each seed, the two arms start from the SAME weights
# (-seed S draws identical tensors: Prism changes no shape) and read the SAME batches (the data
# order is llm.c's, shuffle seed 42, whatever -seed is; with --vary-data 1 each pair reads the
# order of -data_seed S instead, so that the spread over seeds includes the data order's
# variance as well as the init's); they differ only in the head split of the
# layers (prism/schedules/L8C256_{uniform,prism}.txt: heads 4 x 64 everywhere vs 1 x 256, 1 x 256,
# 2 x 128, 2 x 128, 4 x 64 x 4). Runs go seed by seed, uniform then Prism, so a change in machine
# load hits both arms of a pair alike.
#
# Each run: --steps steps of B x T tokens (lr 1e-3, warmup 20, cosine to 0.1, weight decay 0.1:
# the recipe of `make train`), val loss every --val-every steps on --val-batches windows (-1: the
# whole val split, 63 windows of 4 x 128), a checkpoint at the end. Then, per seed, the attention
# distance of the Prism checkpoint against the uniform one on 16 windows of B x T val tokens (64
# sequences at the defaults; fewer windows when the val split holds fewer)
# (./attn_distance -e prism -e2 uniform: the paper's "flip", claim P7, at this small scale; --attn 0
# skips it), and the plots. Outputs in --out (default out/ab_cpu): <arm>_seed<S>/ (main.log,
# model_<steps>.bin), <arm>_seed<S>.log (stdout), summary.md, attn_seed<S>.{txt,csv,json},
# loss.png, attn_distance.png. A run whose log is complete is skipped when the script is started
# again; an interrupted run starts over. The settings are stamped in settings.txt: a different
# configuration in the same --out is refused.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
PYTHON=${PYTHON:-/usr/bin/python3}

usage() {
  cat <<'EOF'
usage: scripts/ab_cpu.sh [options]
  --seeds "S ..."     init seeds, one pair of runs each (default "1 2 3")
  --steps N           optimizer steps per run (default 300)
  --model DESC        model descriptor (default L8C256H4T256)
  --uniform FILE      uniform schedule (default prism/schedules/L8C256_uniform.txt)
  --prism FILE        Prism schedule (default prism/schedules/L8C256_prism.txt)
  -b B, -t T          micro-batch and sequence length (default 4, 128)
  --val-every N       -v (default 150)
  --val-batches M     -m (default -1: the whole val split)
  --threads N         OMP_NUM_THREADS (default 2)
  --attn 0|1          attention distance of each pair's checkpoints, and the plots (default 1)
  --vary-data 0|1     1: seed S also sets the data order (-data_seed S, both arms alike); default 0
                      (llm.c's order 42 in every pair: only the init varies)
  --bin PATH          the trainer (default ./train_gpt2; ./train_gpt2cu takes the same flags)
  --out DIR           (default out/ab_cpu)
  --dry-run           print the commands, run nothing
EOF
}

SEEDS="1 2 3"; STEPS=300; MODEL=L8C256H4T256
UNIFORM=prism/schedules/L8C256_uniform.txt; PRISM=prism/schedules/L8C256_prism.txt
B=4; T=128; VAL_EVERY=150; VAL_BATCHES=-1; THREADS=2; BIN=./train_gpt2; OUT=out/ab_cpu; DRY=0
ATTN=1; VARY_DATA=0
while [ $# -gt 0 ]; do
  case "$1" in
    --help|-h) usage; exit 0 ;;
    --dry-run) DRY=1; shift; continue ;;
  esac
  need_value "$1" $#
  case "$1" in
    --seeds) SEEDS=$2 ;; --steps) STEPS=$2 ;; --model) MODEL=$2 ;; --uniform) UNIFORM=$2 ;;
    --prism) PRISM=$2 ;; -b) B=$2 ;; -t) T=$2 ;; --val-every) VAL_EVERY=$2 ;;
    --val-batches) VAL_BATCHES=$2 ;; --threads) THREADS=$2 ;; --bin) BIN=$2 ;; --out) OUT=$2 ;;
    --attn) ATTN=$2 ;; --vary-data) VARY_DATA=$2 ;;
    *) die "$1: unknown option (see scripts/ab_cpu.sh --help)" ;;
  esac
  shift 2
done
for v in $SEEDS; do is_uint --seeds "$v"; done
[ -n "${SEEDS// /}" ] || die "--seeds: expected at least one seed"
is_uint --steps "$STEPS" -b "$B" -t "$T" --val-every "$VAL_EVERY" --threads "$THREADS"
[[ "$VAL_BATCHES" =~ ^-1$|^[1-9][0-9]*$ ]] || die "--val-batches '$VAL_BATCHES': expected -1 or a positive integer"
case "$ATTN" in 0|1) ;; *) die "--attn '$ATTN': expected 0 or 1" ;; esac
case "$VARY_DATA" in 0|1) ;; *) die "--vary-data '$VARY_DATA': expected 0 or 1" ;; esac

TS=dev/data/tinyshakespeare
missing=()
[ -x "$BIN" ] || missing+=("$BIN: not built (make train_gpt2)")
for f in "$TS/tiny_shakespeare_train.bin" "$TS/tiny_shakespeare_val.bin"; do
  [ -f "$f" ] || missing+=("$f: not found (make data)")
done
for f in "$UNIFORM" "$PRISM"; do [ -f "$f" ] || missing+=("$f: schedule not found"); done
[ "$ATTN" = 0 ] || [ -x ./attn_distance ] || missing+=("./attn_distance: not built (make attn_distance; or --attn 0)")
CKPT=$(printf 'model_%08d.bin' "$STEPS")
# attention distance on 16 windows of B x T val tokens, or as many as the val split holds: the
# dataloader's count, (tokens - 1) / (B T), with the token count from the shard header (int32 at
# byte 8). At -b 8 -t 256 TinyShakespeare's 32,768 val tokens hold 15.
ATTN_N=16
VAL_BIN=$TS/tiny_shakespeare_val.bin
if [ "$ATTN" = 1 ] && [ -f "$VAL_BIN" ]; then
  val_tokens=$(od -An -t d4 -j 8 -N 4 "$VAL_BIN" | tr -d ' ')
  windows=0
  [ $((B * T)) -gt 0 ] && windows=$(( (val_tokens - 1) / (B * T) ))
  [ "$windows" -lt "$ATTN_N" ] && ATTN_N=$windows
  [ "$ATTN_N" -ge 1 ] || missing+=("$VAL_BIN: $val_tokens tokens hold no window of B*T = $((B * T)) tokens for attn_distance (lower -b or -t, or --attn 0)")
fi
set_attn() {  # seed -> ATTN_CMD: Prism minus uniform on the first ATTN_N x B val sequences of T tokens
  ATTN_CMD=(./attn_distance -e "$OUT/prism_seed$1/$CKPT" -e2 "$OUT/uniform_seed$1/$CKPT"
            -j "$VAL_BIN" -b "$B" -t "$T" -n "$ATTN_N" -csv "$OUT/attn_seed$1.csv"
            -json "$OUT/attn_seed$1.json")
}
PLOT_LOSS=("$PYTHON" scripts/plot_logs.py -o "$OUT/loss.png")
PLOT_ATTN=("$PYTHON" prism/plot_attn_distance.py -o "$OUT/attn_distance.png")

set_cmd() {  # arm schedule seed -> CMD, the trainer command
  CMD=("$BIN" -e "$MODEL" -prism "$2" -seed "$3" -i "$TS/tiny_shakespeare_train.bin"
       -j "$TS/tiny_shakespeare_val.bin" -b "$B" -t "$T" -x "$STEPS" -l 1e-3 -u 20 -q 0.1 -c 0.1
       -v "$VAL_EVERY" -m "$VAL_BATCHES" -s 0 -n "$STEPS" -o "$OUT/$1_seed$3")
  [ "$VARY_DATA" = 1 ] && CMD+=(-data_seed "$3")
  return 0
}
SETTINGS="model=$MODEL uniform=$UNIFORM prism=$PRISM B=$B T=$T steps=$STEPS val_every=$VAL_EVERY val_batches=$VAL_BATCHES threads=$THREADS"
[ "$VARY_DATA" = 1 ] && SETTINGS+=" vary_data=1"

if [ "$DRY" = 1 ]; then
  echo "# $SETTINGS; seeds $SEEDS"
  for s in $SEEDS; do
    set_cmd uniform "$UNIFORM" "$s"; echo "OMP_NUM_THREADS=$THREADS ${CMD[*]} > $OUT/uniform_seed$s.log"
    set_cmd prism "$PRISM" "$s"; echo "OMP_NUM_THREADS=$THREADS ${CMD[*]} > $OUT/prism_seed$s.log"
  done
  echo "$PYTHON scripts/ab_summary.py $OUT --markdown $OUT/summary.md"
  if [ "$ATTN" = 1 ]; then
    for s in $SEEDS; do set_attn "$s"; echo "OMP_NUM_THREADS=$THREADS ${ATTN_CMD[*]} > $OUT/attn_seed$s.txt"; done
    echo "${PLOT_LOSS[*]} $OUT/*_seed*/"
    echo "${PLOT_ATTN[*]} $OUT/attn_seed*.csv"
  fi
  report_missing dry "${missing[@]}"
  exit 0
fi
report_missing run "${missing[@]}"

mkdir -p "$OUT"
if [ -f "$OUT/settings.txt" ] && [ "$(cat "$OUT/settings.txt")" != "$SETTINGS" ]; then
  die "$OUT/settings.txt: this directory holds an A/B with other settings ($(cat "$OUT/settings.txt")); use another --out or remove it"
fi
echo "$SETTINGS" > "$OUT/settings.txt.tmp" && mv "$OUT/settings.txt.tmp" "$OUT/settings.txt"

complete() {  # run name: stdout finished and main.log has the last step's val loss
  grep -q '^total average iteration time' "$OUT/$1.log" 2>/dev/null &&
    grep -q "^s:$STEPS tel:" "$OUT/$1/main.log" 2>/dev/null
}
start=$(date +%s)
for s in $SEEDS; do
  for arm in uniform prism; do
    name=${arm}_seed$s
    if complete "$name"; then echo "$name: complete, skipped"; continue; fi
    sched=$UNIFORM; [ "$arm" = prism ] && sched=$PRISM
    t0=$(date +%s)
    set_cmd "$arm" "$sched" "$s"
    OMP_NUM_THREADS=$THREADS "${CMD[@]}" > "$OUT/$name.log" 2>&1 ||
      die "$OUT/$name.log: the trainer failed: $(tail -n 1 "$OUT/$name.log")"
    echo "$name: $(grep '^val loss' "$OUT/$name.log" | tail -n 1), $(( $(date +%s) - t0 )) s"
  done
done
echo "all runs: $(( $(date +%s) - start )) s"
"$PYTHON" scripts/ab_summary.py "$OUT" --markdown "$OUT/summary.md"
[ "$ATTN" = 1 ] || exit 0
runs=(); csvs=()
for s in $SEEDS; do
  set_attn "$s"
  OMP_NUM_THREADS=$THREADS "${ATTN_CMD[@]}" > "$OUT/attn_seed$s.txt" 2>&1 ||
    die "$OUT/attn_seed$s.txt: attn_distance failed: $(tail -n 1 "$OUT/attn_seed$s.txt")"
  runs+=("$OUT/uniform_seed$s" "$OUT/prism_seed$s"); csvs+=("$OUT/attn_seed$s.csv")
done
"${PLOT_LOSS[@]}" "${runs[@]}" | tail -n 1
"${PLOT_ATTN[@]}" "${csvs[@]}"
