#!/usr/bin/env bash
# scripts/run_gpt2.sh: the reproduction launcher for uniform and Prism GPT-2 at 124M (d12),
# 354M (d24) and 757M (24 x 1536, -e L24C1536H24) on FineWeb with llm.c's recipes
# (doc/baselines.md "Hyperparameters of the reproduction scripts"), run by the CUDA trainer ./train_gpt2cu.
#
#   scripts/run_gpt2.sh --size 124M --arm prism --seed 42                 # one GPU
#   scripts/run_gpt2.sh --size 124M --arm uniform --gpus 8                # mpirun -np 8
#   scripts/run_gpt2.sh --size 124M --arm prism --gpus 16 --micro-batch 32 \
#       --hosts node1:8,node2:8                                           # mpirun over 2 nodes
#   scripts/run_gpt2.sh ... --dry-run                                     # print, run nothing
#   scripts/run_gpt2.sh --help
# Thin wrappers: scripts/run_gpt2_{124M,354M,757M}.sh. Slurm: scripts/multi_node/*.sbatch, which
# run one rank per task through this script's --launcher slurm-task.
#
# What it does, as llm.c's scripts/run_gpt2_*.sh:
#   - the recipe's flags: -b -t -d -x -l -u 700 -q 0.0 -c 0.1 -z 1 -r 0 -v 250 -h 1 -s -g 144 -n
#     -y 1; the arm adds -prism prism/schedules/<scale>_prism.txt (uniform: the descriptor's own
#     heads; table: -layers --schedule FILE, any layer table without Prism's rules); -seed sets the init seed. The data order is llm.c's (shuffle seed 42 + rank) in
#     both arms, so two arms with the same seed form an A/B pair (doc/prism.md "Candidate schedules and negative controls": its protocol);
#   - the val-loss comparability rule (doc/formats.md "Val-loss comparability"): every eval reads the first 10*2^20 val
#     tokens, so -m = 10485760 / (B * T * processes), which must divide exactly;
#   - it restarts the trainer with -y 1 (resume from the last DONE_ checkpoint) until
#     DONE_<last step> exists, and gives up after --max-restarts attempts without progress;
#   - it checks its inputs first (the trainer binary, the data, the schedule, the HellaSwag file)
#     and prints one line per missing input;
#   - --budget runs a fraction of the recipe's tokens (the LR schedule follows -x), and every run
#     prints its token count and an estimate of its GPU-hours;
#   - on an SM 8.x GPU (A100, RTX 30xx/40xx, L4/L40: nvidia-smi, or --gpu-arch) it warns before
#     launching when the schedule has head size 256 under -attn auto: cuDNN does not train d = 256
#     there, so those layers run on the own kernels, several times slower (doc/gpu.md), and Prism
#     would be measured slower than uniform; it names the 128-wide preset where one exists.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

VAL_TOKENS=10485760 # 10 * 2^20: llm.c's published val loss (doc/formats.md "Val-loss comparability")
RESTART_DELAY=${LLMC_RESTART_DELAY:-5} # seconds between a failed attempt and the next

usage() {
  cat <<'EOF'
usage: scripts/run_gpt2.sh --size 124M|354M|757M [options] [-- extra trainer flags]
  --size S            model and recipe: 124M (-e d12, FineWeb 10B), 354M (-e d24, FineWeb 100B),
                      757M (-e L24C1536H24, FineWeb 100B; llm.c's 774M recipe)
  --arm A             uniform (default), prism, or table (any layer table: -layers FILE)
  --schedule FILE     the layer table of --arm prism (a Prism schedule, default
                      prism/schedules/{d12,d24,L24C1536}_prism.txt) or --arm table (required)
  --seed N            init seed, -seed (default 42; the data order is the same for every seed)
  --data-seed N       the data order's shuffle seed, -data_seed (default 42, llm.c's); give both
                      arms of a pair the same one
  --gpus N            processes: 1 runs ./train_gpt2cu directly, N > 1 runs mpirun -np N (default 1)
  --hosts LIST        mpirun --host LIST for several nodes, e.g. node1:8,node2:8; every NCCL_*
                      variable of the environment is forwarded with -x
  --micro-batch B     per-GPU B (default: the recipe's); -d stays, so grad accumulation adapts
  --total-batch D     tokens per step (default 524288; changing it leaves llm.c's recipe)
  --steps N           -x (default: the recipe's; the LR schedule follows)
  --budget B          full (default), half, quarter or tenth of the recipe's steps (-x; the LR
                      schedule follows); the GPU-hours estimate is printed for every run
  --gpu-arch CC       the GPUs' compute capability, e.g. 8.0 or 9.0 (default: nvidia-smi's), for
                      the SM 8.x warning about head size 256
  --hellaswag 0|1     -h (default 1: needs dev/data/hellaswag/hellaswag_val.bin)
  --data DIR          token shards (default dev/data/fineweb10B or fineweb100B); an edu_ folder
                      uses the edu_fineweb_ prefix, another folder the prefix of its first
                      *_val*.bin (dev/data/prose: prose_); a val split under 10*2^20 tokens is
                      read whole
  --out DIR           -o (default log/gpt2_<size>_<arm>_seed<seed>)
  --bin PATH          the trainer (default ./train_gpt2cu)
  --max-restarts N    stop after N attempts in a row that add no checkpoint (default 20)
  --launcher L        local (default) or slurm-task (one rank inside srun; see scripts/multi_node)
  --rendezvous R      slurm-task only: fs (default; --fs-dir DIR) or tcp (--server-ip IP)
  --check-only        check the inputs and exit
  --print-done-file   print the DONE_ marker of the last step and exit (for the .sbatch loops)
  --dry-run           print the exact command lines and any missing input; run nothing
EOF
}

# ------------------------------------------------------------------------------------------------
# Recipes: llm.c's scripts/run_gpt2_{124M,350M,774M}.sh (doc/baselines.md "Hyperparameters of the reproduction scripts"). 757M = 24 x 1536 is a
# reconstruction (doc/prism.md "Model sizes"); it takes the 774M recipe, the closest published one.
set_recipe() {
  case "$1" in
    124M) DESC=d12; DATA_DIR=dev/data/fineweb10B; B=64; STEPS=18865; LR=6e-4
          SAMPLE_EVERY=20000; CKPT_EVERY=5000; SCALE=d12 ;;
    354M) DESC=d24; DATA_DIR=dev/data/fineweb100B; B=64; STEPS=60000; LR=3e-4
          SAMPLE_EVERY=100000; CKPT_EVERY=2000; SCALE=d24 ;;
    757M) DESC=L24C1536H24; DATA_DIR=dev/data/fineweb100B; B=32; STEPS=286102; LR=2.5e-4
          SAMPLE_EVERY=300000; CKPT_EVERY=4000; SCALE=L24C1536 ;;
    *) die "--size '$1': expected 124M, 354M or 757M" ;;
  esac
  T=1024
  TOTAL_BATCH=524288
}

# ------------------------------------------------------------------------------------------------
# Options
SIZE=""; ARM=uniform; SCHEDULE=""; SEED=42; GPUS=1; HOSTS=""; MICRO=""; TOTAL=""; STEPS_OPT=""
HELLASWAG=1; DATA_OPT=""; OUT=""; BIN=./train_gpt2cu; MAX_RESTARTS=20; LAUNCHER=local
BUDGET=full; GPU_ARCH=""; DATA_SEED=42
RENDEZVOUS=fs; FS_DIR=""; SERVER_IP=""; MODE=run; EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --help|-h) usage; exit 0 ;;
    --dry-run) MODE=dry; shift; continue ;;
    --check-only) MODE=check; shift; continue ;;
    --print-done-file) MODE=done; shift; continue ;;
    --) shift; EXTRA=("$@"); break ;;
  esac
  need_value "$1" $#
  case "$1" in
    --size) SIZE=$2 ;;
    --arm) ARM=$2 ;;
    --schedule) SCHEDULE=$2 ;;
    --seed) SEED=$2 ;;
    --gpus) GPUS=$2 ;;
    --hosts) HOSTS=$2 ;;
    --micro-batch) MICRO=$2 ;;
    --total-batch) TOTAL=$2 ;;
    --steps) STEPS_OPT=$2 ;;
    --budget) BUDGET=$2 ;;
    --data-seed) DATA_SEED=$2 ;;
    --gpu-arch) GPU_ARCH=$2 ;;
    --hellaswag) HELLASWAG=$2 ;;
    --data) DATA_OPT=$2 ;;
    --out) OUT=$2 ;;
    --bin) BIN=$2 ;;
    --max-restarts) MAX_RESTARTS=$2 ;;
    --launcher) LAUNCHER=$2 ;;
    --rendezvous) RENDEZVOUS=$2 ;;
    --fs-dir) FS_DIR=$2 ;;
    --server-ip) SERVER_IP=$2 ;;
    *) die "$1: unknown option (see scripts/run_gpt2.sh --help)" ;;
  esac
  shift 2
done

[ -n "$SIZE" ] || die "--size: expected 124M, 354M or 757M (see --help)"
set_recipe "$SIZE"
case "$ARM" in uniform|prism|table) ;; *) die "--arm '$ARM': expected uniform, prism or table" ;; esac
case "$LAUNCHER" in local|slurm-task) ;; *) die "--launcher '$LAUNCHER': expected local or slurm-task" ;; esac
case "$RENDEZVOUS" in fs|tcp) ;; *) die "--rendezvous '$RENDEZVOUS': expected fs or tcp" ;; esac
case "$HELLASWAG" in 0|1) ;; *) die "--hellaswag '$HELLASWAG': expected 0 or 1" ;; esac
is_uint --seed "$SEED" --gpus "$GPUS" --max-restarts "$MAX_RESTARTS" --data-seed "$DATA_SEED"
[ -n "$MICRO" ] && { is_uint --micro-batch "$MICRO"; B=$MICRO; }
[ -n "$TOTAL" ] && { is_uint --total-batch "$TOTAL"; TOTAL_BATCH=$TOTAL; }
case "$BUDGET" in
  full) ;; half) STEPS=$((STEPS / 2)) ;; quarter) STEPS=$((STEPS / 4)) ;; tenth) STEPS=$((STEPS / 10)) ;;
  *) die "--budget '$BUDGET': expected full, half, quarter or tenth" ;;
esac
[ -n "$STEPS_OPT" ] && [ "$BUDGET" != full ] && die "--steps and --budget $BUDGET: give one of them"
[ -n "$STEPS_OPT" ] && { is_uint --steps "$STEPS_OPT"; STEPS=$STEPS_OPT; }
[ -z "$GPU_ARCH" ] || [[ "$GPU_ARCH" =~ ^[0-9]+\.[0-9]$ ]] || die "--gpu-arch '$GPU_ARCH': expected a compute capability such as 8.0 or 9.0"
[ -n "$DATA_OPT" ] && DATA_DIR=${DATA_OPT%/}
[ "$GPUS" -ge 1 ] && [ "$B" -ge 1 ] && [ "$STEPS" -ge 1 ] || die "--gpus, --micro-batch and --steps must be >= 1"
[ -z "$HOSTS" ] || [ "$GPUS" -gt 1 ] || die "--hosts $HOSTS: needs --gpus N > 1 (the total process count)"
[ "$HELLASWAG" = 0 ] || [ "$B" -ge 4 ] ||
  die "--micro-batch $B: -h 1 needs B >= 4 (a HellaSwag example takes 4 rows); use --hellaswag 0"
[ "$ARM" = prism ] && SCHEDULE=${SCHEDULE:-prism/schedules/${SCALE}_prism.txt}
[ "$ARM" = uniform ] && [ -n "$SCHEDULE" ] && die "--schedule $SCHEDULE: only with --arm prism or table"
[ "$ARM" = table ] && [ -z "$SCHEDULE" ] && die "--arm table needs its layer table: --schedule FILE"
OUT=${OUT:-log/gpt2_${SIZE}_${ARM}_seed${SEED}}

# Processes: --gpus locally; the Slurm task count under srun.
NPROC=$GPUS
if [ "$LAUNCHER" = slurm-task ]; then
  for v in SLURM_NTASKS SLURM_PROCID SLURM_NTASKS_PER_NODE; do
    [ -n "${!v:-}" ] || die "--launcher slurm-task: \$$v is not set (run inside srun, from scripts/multi_node/*.sbatch)"
  done
  NPROC=$SLURM_NTASKS
  if [ "$RENDEZVOUS" = fs ]; then [ -n "$FS_DIR" ] || die "--rendezvous fs: needs --fs-dir DIR (a directory every node sees)"
  else [ -n "$SERVER_IP" ] || die "--rendezvous tcp: needs --server-ip IP (the rank-0 node)"; fi
fi

# Batch arithmetic: grad accumulation and the val batches of the comparability rule.
PER_STEP=$((B * T * NPROC))
[ $((TOTAL_BATCH % PER_STEP)) -eq 0 ] ||
  die "-d $TOTAL_BATCH is not a multiple of B*T*processes = $B*$T*$NPROC = $PER_STEP (use --micro-batch $((TOTAL_BATCH / T / NPROC)) or --total-batch)"
VAL_BATCHES=$((VAL_TOKENS / PER_STEP))
GRAD_ACCUM=$((TOTAL_BATCH / PER_STEP))

# The shards' prefix: FineWeb's by the folder name (edu_* is FineWeb-Edu), or, for another data
# set (dev/data/prose, dev/data/tinyshakespeare), the name before "_val" of its first val shard.
case "$(basename "$DATA_DIR")" in edu_*) PREFIX=edu_fineweb ;; *) PREFIX=fineweb ;; esac
SHARD="_*" # fineweb_train_000001.bin; another prefix may have one unnumbered file
FIRST_VAL=$(compgen -G "$DATA_DIR/*_val*.bin" | sort | head -n 1 || true)
if [ -n "$FIRST_VAL" ] && ! compgen -G "$DATA_DIR/${PREFIX}_val_*.bin" > /dev/null; then
  PREFIX=$(basename "$FIRST_VAL"); PREFIX=${PREFIX%%_val*}; SHARD="*"
fi
TRAIN_GLOB="$DATA_DIR/${PREFIX}_train$SHARD.bin"
VAL_GLOB="$DATA_DIR/${PREFIX}_val$SHARD.bin"
# A val split smaller than the 10*2^20 tokens of llm.c's rule (the offline corpora) is read whole,
# in as many B*T*processes batches as it holds, and the description line says so.
VAL_NOTE=""
# (a shard without a readable header leaves the count unknown: the trainer reports that file)
val_tokens=""
if compgen -G "$VAL_GLOB" > /dev/null; then
  val_tokens=0
  for f in $VAL_GLOB; do
    n=$(od -An -t d4 -j 8 -N 4 "$f" 2>/dev/null | tr -d ' ' || true)
    if [[ "$n" =~ ^[0-9]+$ ]]; then val_tokens=$((val_tokens + n)); else val_tokens=""; break; fi
  done
fi
if [ -n "$val_tokens" ]; then
  if [ "$val_tokens" -lt "$VAL_TOKENS" ]; then
    VAL_BATCHES=$(( (val_tokens - 1) / PER_STEP ))
    [ "$VAL_BATCHES" -ge 1 ] || die "$VAL_GLOB: $val_tokens val tokens hold no batch of B*T*processes = $PER_STEP tokens"
    VAL_NOTE=" (the val split holds $val_tokens tokens, fewer than llm.c's 10*2^20: -m $VAL_BATCHES batches of it; not comparable with llm.c's val loss)"
  fi
fi
[ -n "$VAL_NOTE" ] || [ $((VAL_TOKENS % PER_STEP)) -eq 0 ] ||
  die "10*2^20 val tokens are not a whole number of B*T*processes = $PER_STEP batches (doc/formats.md 'Val-loss comparability'): choose B so that it divides"
DONE_FILE="$OUT/DONE_$(printf '%08d' "$STEPS")"

FLAGS=(-i "$TRAIN_GLOB" -j "$VAL_GLOB" -o "$OUT" -e "$DESC" -seed "$SEED"
       -b "$B" -t "$T" -d "$TOTAL_BATCH" -x "$STEPS" -l "$LR" -u 700 -q 0.0 -c 0.1
       -z 1 -r 0 -v 250 -m "$VAL_BATCHES" -h "$HELLASWAG" -s "$SAMPLE_EVERY" -g 144
       -n "$CKPT_EVERY" -y 1)
[ "$ARM" = prism ] && FLAGS+=(-prism "$SCHEDULE")
[ "$ARM" = table ] && FLAGS+=(-layers "$SCHEDULE")
[ "$DATA_SEED" != 42 ] && FLAGS+=(-data_seed "$DATA_SEED")
if [ "$LAUNCHER" = slurm-task ]; then
  # some Slurm versions write SLURM_NTASKS_PER_NODE as "8(x2)"
  FLAGS+=(-pn "$SLURM_NTASKS" -pr "$SLURM_PROCID" -pg "${SLURM_NTASKS_PER_NODE%%(*}" -pi "$RENDEZVOUS")
  if [ "$RENDEZVOUS" = fs ]; then FLAGS+=(-pf "$FS_DIR"); else FLAGS+=(-ps "$SERVER_IP"); fi
fi
FLAGS+=(${EXTRA[@]+"${EXTRA[@]}"})

if [ "$LAUNCHER" = local ] && [ "$NPROC" -gt 1 ]; then
  CMD=(mpirun -np "$NPROC")
  if [ -n "$HOSTS" ]; then
    # other nodes get the NCCL settings only when mpirun forwards them (-x)
    CMD+=(--host "$HOSTS")
    for v in $(compgen -e | grep '^NCCL_' | sort); do CMD+=(-x "$v"); done
  fi
  CMD+=("$BIN" "${FLAGS[@]}")
else
  CMD=("$BIN" "${FLAGS[@]}")
fi

# ------------------------------------------------------------------------------------------------
# Inputs: one line per missing item.
missing_inputs() {
  if [ ! -x "$BIN" ]; then
    if [ "$BIN" = ./train_gpt2cu ]; then
      echo "./train_gpt2cu: not built: build the CUDA trainer first (make train_gpt2cu USE_CUDNN=1; doc/gpu.md)"
    else
      echo "$BIN: no executable trainer at this path (--bin)"
    fi
  fi
  if [ "$LAUNCHER" = local ] && [ "$NPROC" -gt 1 ] && ! command -v mpirun >/dev/null 2>&1; then
    echo "mpirun: not found in PATH (--gpus $NPROC launches mpirun -np $NPROC; install Open MPI)"
  fi
  local kind=classic version=100B
  [ "$PREFIX" = edu_fineweb ] && kind=edu
  case "$DATA_DIR" in *10B) version=10B ;; esac
  local fetch="python dev/data/fineweb.py -t $kind -v $version"
  compgen -G "$TRAIN_GLOB" >/dev/null || echo "$TRAIN_GLOB: no train shard matches (prepare FineWeb: $fetch)"
  compgen -G "$VAL_GLOB" >/dev/null || echo "$VAL_GLOB: no val shard matches (prepare FineWeb: $fetch)"
  if [ "$ARM" != uniform ] && [ ! -f "$SCHEDULE" ]; then echo "$SCHEDULE: layer table not found (--schedule)"; fi
  if [ "$HELLASWAG" = 1 ] && [ ! -f dev/data/hellaswag/hellaswag_val.bin ]; then
    echo "dev/data/hellaswag/hellaswag_val.bin: not found, needed by -h 1 (python dev/data/hellaswag.py, or --hellaswag 0)"
  fi
}

# ------------------------------------------------------------------------------------------------
# The run's cost: tokens, and GPU-hours from the FLOPs per token (6 N + 6 L C T, doc/formats.md "Throughput and MFU")
# at the throughput measured for d12 on one H200 (558k tok/s, 45 % MFU: doc/gpu.md); an A100
# has 312 of the H200's 989 dense bf16 TFLOP/s, so about 3.2 times the hours at the same MFU.
model_shape() {  # descriptor -> "L C"
  case "$1" in d12) echo "12 768" ;; d24) echo "24 1024" ;; L24C1536H24) echo "24 1536" ;; esac
}
budget_line() {
  local L C
  read -r L C < <(model_shape "$DESC")
  awk -v L="$L" -v C="$C" -v T="$T" -v steps="$STEPS" -v batch="$TOTAL_BATCH" -v budget="$BUDGET" 'BEGIN {
    N = 50304 * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
    f = 6 * N + 6 * L * C * T; f12 = 6 * 124475904 + 6 * 12 * 768 * 1024
    tokens = steps * batch; h200 = tokens / (558000 * f12 / f) / 3600
    a100 = h200 * 988.8 / 312
    printf "# budget %s: %d steps x %d = %.2fB tokens; about %s GPU-hours on H200s, %s on A100s (at d12'"'"'s measured MFU)\n", budget, steps, batch, tokens / 1e9, hours(h200), hours(a100)
  }
  function hours(h) { return sprintf(h < 10 ? "%.1f" : "%.0f", h) }'
}

# The head sizes of a schedule file on this model's width: an entry is heads, or heads x size,
# with an optional :kind and *count (prism/rules.h); comments (#) and blank lines skipped.
schedule_head_sizes() {  # file C -> the head sizes, one per entry
  sed 's/#.*//' "$1" | tr -s ' \t' '\n\n' | grep . | while read -r e; do
    e=${e%%\**}; e=${e%%:*}
    if [[ "$e" == *x* ]]; then echo "${e#*x}"; elif [[ "$e" =~ ^[0-9]+$ ]] && [ "$e" -gt 0 ]; then echo $(( $2 / e )); fi
  done
}
sm8_warning() {
  [ "$ARM" != uniform ] && [ -f "$SCHEDULE" ] || return 0
  local arch=$GPU_ARCH
  [ -n "$arch" ] || arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' ' || true)
  case "$arch" in 8.*) ;; *) return 0 ;; esac
  local a prev="" attn=auto
  for a in ${EXTRA[@]+"${EXTRA[@]}"}; do [ "$prev" = -attn ] && attn=$a; prev=$a; done
  [ "$attn" = auto ] || return 0
  local L C
  read -r L C < <(model_shape "$DESC")
  # grep reads to the end (no -q): under pipefail an early exit would fail the pipeline by SIGPIPE
  schedule_head_sizes "$SCHEDULE" "$C" | grep -x 256 > /dev/null || return 0
  local alt="prism/schedules/${SCALE}_prism_d.txt (P-D, head sizes 128 and 64) avoids it: --schedule prism/schedules/${SCALE}_prism_d.txt"
  warn "SM $arch GPU: cuDNN does not train head size 256 there, so the 256-wide layers of $SCHEDULE run on the own kernels under -attn auto, several times slower (doc/gpu.md \"Attention paths\"); $alt"
}

describe() {
  local note=""
  local recipe_b
  recipe_b=$(set_recipe "$SIZE"; echo "$B")
  [ "$B" != "$recipe_b" ] && note+=" (B differs from the recipe's $recipe_b; grad accumulation adapts)"
  { [ -n "$TOTAL" ] || [ -n "$STEPS_OPT" ]; } && note+=" (NOT llm.c's recipe: -d/-x changed)"
  [ "$BUDGET" != full ] && note+=" (NOT llm.c's recipe: --budget $BUDGET)"
  echo "# GPT-2 $SIZE ($DESC), arm $ARM${SCHEDULE:+ ($SCHEDULE)}, seed $SEED: $NPROC process(es), B $B x T $T x $GRAD_ACCUM micro-steps = $TOTAL_BATCH tokens/step, $STEPS steps; val: -m $VAL_BATCHES x $PER_STEP$([ -n "$VAL_NOTE" ] || echo " = 10*2^20") tokens$VAL_NOTE$note"
  budget_line
}

# Shell quoting for copy-paste: plain words as they are, anything else in single quotes.
quoted() {
  local out=() a
  for a in "$@"; do
    if [[ "$a" =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then out+=("$a"); else out+=("'${a//\'/\'\\\'\'}'"); fi
  done
  echo "${out[*]}"
}

[ "$MODE" = done ] && { echo "$DONE_FILE"; exit 0; }
mapfile -t MISSING < <(missing_inputs)
sm8_warning
if [ "$MODE" = dry ]; then
  describe
  if [ "$LAUNCHER" = local ]; then
    echo "mkdir -p $(quoted "$OUT")"
    echo "until [ -e $(quoted "$DONE_FILE") ]; do $(quoted "${CMD[@]}"); done"
  else
    quoted "${CMD[@]}"
  fi
  report_missing dry "${MISSING[@]}"
  exit 0
fi
report_missing run "${MISSING[@]}"
[ "$MODE" = check ] && { echo "inputs present: $(describe | sed 's/^# //')"; exit 0; }

# ------------------------------------------------------------------------------------------------
# Run. One Slurm rank: once (the .sbatch loop restarts every rank together). Locally: llm.c's
# resume loop until the last step's DONE_ marker exists.
if [ "$LAUNCHER" = slurm-task ]; then
  exec "${CMD[@]}"
fi
latest_done() { ls "$OUT" 2>/dev/null | grep -E '^DONE_[0-9]{8}$' | sort | tail -n 1 || true; }
mkdir -p "$OUT"
describe | tee -a "$OUT/launcher.log"
quoted "${CMD[@]}" | tee -a "$OUT/launcher.log"
fails=0
while [ ! -e "$DONE_FILE" ]; do
  before=$(latest_done)
  set +e
  "${CMD[@]}" 2>&1 | tee -a "$OUT/stdout.log"
  rc=${PIPESTATUS[0]}
  set -e
  [ -e "$DONE_FILE" ] && break
  if [ "$(latest_done)" = "$before" ]; then fails=$((fails + 1)); else fails=0; fi
  if [ "$fails" -ge "$MAX_RESTARTS" ]; then
    die "$BIN exited $rc; $fails attempts in a row wrote no new checkpoint in $OUT (see $OUT/stdout.log)"
  fi
  echo "trainer exited with status $rc before $DONE_FILE; resuming from the last checkpoint (-y 1) in ${RESTART_DELAY}s" | tee -a "$OUT/launcher.log"
  sleep "$RESTART_DELAY"
done
echo "done: $DONE_FILE"
