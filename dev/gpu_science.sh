#!/usr/bin/env bash
# dev/gpu_science.sh: both papers' experiments at small scale on one GPU, in one run of < 8 minutes
# with its build (doc/gpu.md "The prepared science run").
#
#   bash dev/gpu_science.sh          results in build/gpu_science/science.txt (GPU_SCIENCE_OUT=dir to
#                                    change); with $OUT set (a results folder that a batch system
#                                    copies back) $OUT/science.txt grows line by line too, so a run
#                                    killed from outside still returns what it found, and the logs,
#                                    spectra and reports come back as one $OUT/gpu_science_logs.tar.gz
#                                    (never checkpoints or data)
#
# Carry build/cudnn_frontend (make gpu_frontend_copy) and dev/data/prose (make prose) along to a
# machine without network access: without dev/data/prose the run makes it from ../shared/data.
# gpt2_tokenizer.bin (make data) along too gives the floors and val losses in bits per byte.
#
# Parts, in order of value, each sized from the measured tokens/s inside a global budget
# (GPU_SCIENCE_BUDGET seconds, 465) and skipped with a line when what is left cannot fit it:
#   1. build train_gpt2cu for this GPU only (cuDNN, one process) and the CPU programs the analysis
#      needs (train_gpt2 for the parameter counts, sd_spectrum, sd_surgery, attn_distance); the
#      prose corpus (make prose) unless it is there
#   2. tokens/s of each model shape (a 30-step run), then the plan: per part the model, arms,
#      steps, tokens, tokens per parameter, epochs of the train split and the expected seconds
#   3. the S-D claims at the paper's smallest scale, GPT-2's vocabulary: L4C128H4T256 (7.2M
#      parameters with the 50304 x 128 embedding) to about 10 tokens per parameter, arms sd_noln
#      (SD_NOLN_FLAGS), mha_noln (-ln 0, input scale 35.36) and mha, all with -rows 1, one seed; 10 checkpoints of sd_noln
#      through ./sd_spectrum (routing erank and n90 per layer over training); val loss of each arm
#      on the whole val split beside the unigram and bigram floors (scripts/floors.py); the first
#      K = 1 .. L-1 layers linearized (./sd_surgery, no retraining) on sd_noln and mha_noln
#   4a. the next size, L6C256H4T256 (17.7M), the same three arms at fewer tokens per parameter
#   4b. Prism's mechanism: L8C512H8T512 uniform (8 heads of 64) vs the Prism schedule 2*2 4*2 8*4
#      (head sizes 256, 128, 64), 2 seeds each, then ./attn_distance: Delta D_l per layer
# Exit status: non-zero if any check failed. science.txt ends with "N passed, N failed".
#
# GPU_SCIENCE_HOST=1 runs every part on a machine without a GPU (make test does, as the suite
# gpu_science_host): the trainer is the CPU one (./train_gpt2, which takes the same flags), the
# sizes are tiny (L3C32, L2C64, L4C64 at B 1 x T 32, one OpenMP thread), runs take 10 (part 3) or 3
# steps unless the budget (150 s) is short, the data is the prose corpus if it is built, else
# TinyShakespeare (host mode never makes the corpus), and the run checks its own output: every
# part ran and wrote its lines, the plan came before the runs. About 35 s on 2 busy cores. Its
# numbers say nothing about a GPU or about the papers.
# GPU_SCIENCE_DATA=shakespeare trains on TinyShakespeare (make data) instead of the prose corpus.
# A setting out of range (a budget that is not a positive integer, an unknown data set, ...) is one
# error line and exit 2, before anything is built or written.
# GPU_SCIENCE_PLAN_ONLY=1 prints the GPU plan from assumed rates and exits, building and running
# nothing: GPU_SCIENCE_ASSUME="TOK/S_PART3 TOK/S_PART4A TOK/S_PART4B STARTUP_S BUILD_S"
# (default "4000000 2000000 1000000 4 120").
set -u
cd "$(dirname "$0")/.." || exit 1

# the settings from the environment, checked before anything is built or written (one line each)
bad_setting() { echo "error: $1" >&2; exit 2; }
is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
for v in GPU_SCIENCE_HOST GPU_SCIENCE_PLAN_ONLY; do
  case "${!v:-0}" in 0|1) ;; *) bad_setting "$v=${!v}: expected 0 or 1" ;; esac
done
for v in GPU_SCIENCE_BUDGET GPU_SCIENCE_THREADS; do
  if [ -n "${!v:-}" ] && { ! is_uint "${!v}" || [ "${!v}" -lt 1 ]; }; then
    bad_setting "$v=${!v}: expected a positive integer"
  fi
done
case "${GPU_SCIENCE_DATA:-prose}" in prose|shakespeare) ;; *)
  bad_setting "GPU_SCIENCE_DATA=$GPU_SCIENCE_DATA: expected prose or shakespeare" ;; esac
if [ -n "${GPU_SCIENCE_ASSUME:-}" ] &&
   ! [[ "$GPU_SCIENCE_ASSUME" =~ ^\ *[0-9]+(\ +[0-9]+){4}\ *$ ]]; then
  bad_setting "GPU_SCIENCE_ASSUME='$GPU_SCIENCE_ASSUME': expected five integers: tokens/s of parts 3, 4a and 4b, start-up seconds, build seconds"
fi

# --- the recipe: every arm of parts 3, 4a and 4b trains with LR_FLAGS (learning rate, warmup) --
# and independent rows (-rows 1); the LayerNorm-free arms read their input at EMB_SCALE (unit RMS
# at GPT-2's init: without it their attention stays uniform; doc/sd_attention.md "The recipe")
LR_FLAGS=${GPU_SCIENCE_LR_FLAGS:-"-l 1e-3 -u 100"}
EMB_SCALE=35.36
SD_NOLN_FLAGS=${GPU_SCIENCE_SD_NOLN_FLAGS:-"-ln 0 -emb_scale $EMB_SCALE -sd_init_u 0.02 $LR_FLAGS"}
MHA_NOLN_FLAGS="-ln 0 -emb_scale $EMB_SCALE $LR_FLAGS"
MHA_FLAGS="$LR_FLAGS"
PRISM_FLAGS="$LR_FLAGS"
COMMON_FLAGS="-q 0.1 -c 0.1 -s 0 -rows 1"   # cosine to 0.1 of the peak, weight decay 0.1, no samples
TPP_TARGET=10                        # tokens per parameter of parts 3 and 4a (the most they get)

HOST=${GPU_SCIENCE_HOST:-0}
PLAN_ONLY=${GPU_SCIENCE_PLAN_ONLY:-0}
if [ "$HOST" = 1 ]; then OUTDIR=${GPU_SCIENCE_OUT:-build/gpu_science_host}
elif [ "$PLAN_ONLY" = 1 ]; then OUTDIR=${GPU_SCIENCE_OUT:-build/gpu_science_plan}
else OUTDIR=${GPU_SCIENCE_OUT:-build/gpu_science}; fi
mkdir -p "$OUTDIR"
SCIENCE=$OUTDIR/science.txt
: > "$SCIENCE"
# a rerun on a warm machine must not read the last run's outputs
rm -rf "$OUTDIR/runs" "$OUTDIR/analysis"
rm -f "$OUTDIR"/*.log
RUNS=$OUTDIR/runs
AN=$OUTDIR/analysis
mkdir -p "$RUNS" "$AN"
if [ "$HOST" = 1 ]; then BUDGET=${GPU_SCIENCE_BUDGET:-150}; else BUDGET=${GPU_SCIENCE_BUDGET:-465}; fi
DEADLINE=$((SECONDS + BUDGET))
NPROC=$(nproc)
PASSED=0
FAILED=0

OUT_SCIENCE=
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ] && [ "$PLAN_ONLY" != 1 ]; then OUT_SCIENCE=$OUT/science.txt; : > "$OUT_SCIENCE"; fi
sumtee() { if [ -n "$OUT_SCIENCE" ]; then tee -a "$SCIENCE" "$OUT_SCIENCE"; else tee -a "$SCIENCE"; fi; }
log() { echo "$*" | sumtee; }
copy_logs_out() {  # on any exit: logs, spectra, reports and tables as one archive
  [ -n "$OUT_SCIENCE" ] || return 0
  (cd "$OUTDIR" && find . -name '*.log' -o -name '*.json' -o -name '*.csv' -o -name '*table*.txt' \
     -o -name 'flags.txt' | tar -czf "$OUT/gpu_science_logs.tar.gz" -T -) 2>/dev/null || true
}
trap copy_logs_out EXIT
trap 'exit 143' TERM INT
left() { echo $((DEADLINE - SECONDS)); }
result() {  # ok(0|1) message
  if [ "$1" -eq 0 ]; then PASSED=$((PASSED + 1)); log "PASS $2"; else FAILED=$((FAILED + 1)); log "FAIL $2"; fi
}
# run NAME SECONDS CMD...: output to $OUTDIR/NAME.log (removed first); never past the deadline
run() {
  local name=$1 limit=$2 l
  shift 2
  l=$(left)
  [ "$limit" -gt "$l" ] && limit=$l
  rm -f "$OUTDIR/$name.log"
  if [ "$limit" -le 3 ]; then
    log "NOT RUN $name: the time budget is spent"
    return 124
  fi
  timeout "$limit" "$@" > "$OUTDIR/$name.log" 2>&1
}
# awk arithmetic on floats: f EXPR (the values inlined; 10 significant digits)
f() { awk -v OFMT='%.10g' "BEGIN{print $*}"; }
fmt() { awk -v x="$2" "BEGIN{printf \"$1\", x}"; }   # fmt FORMAT VALUE
mtok() { awk -v x="$1" 'BEGIN{if (x >= 1e5) printf "%.1fM", x / 1e6; else printf "%d", x}'; }

# a Python with numpy (scripts/floors.py needs it; /usr/bin/python3 first, as the Makefile)
PY=
for p in "${PYTHON:-}" /usr/bin/python3 python3; do
  if [ -n "$p" ] && "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { PY=${PYTHON:-/usr/bin/python3}; log "note: no Python with numpy (PYTHON, /usr/bin/python3, python3): the floors are skipped"; }

# --- sizes --------------------------------------------------------------------------------------
if [ "$HOST" = 1 ]; then
  P3_MODEL=L3C32H2T32 P3_L=3 P3_C=32 P3_H=2 P3_B=1 P3_T=32
  P4_MODEL=L2C64H2T32 P4_L=2 P4_H=2 P4_B=1 P4_T=32
  PR_MODEL=L4C64H4T32 PR_L=4 PR_H=4 PR_B=1 PR_T=32 PR_TABLE="1 2 4*2"   # head sizes 64, 32, 16
  VAL_M=1 SURG_B=1 SURG_T=32 SURG_M=1 ATTN_N=2
  TIME_STEPS=2 TIME_SKIP=1
  CAP3=10 CAP4=3 CAPR=3 MIN_STEPS=2 ROUND=1
  CPU_FLOPS=2e10 CKPT_BW=2e8 RESERVE=5
  TRAIN=./train_gpt2
  # one thread: OpenMP threads that spin on a loaded 2-core machine run 3-4x slower than one
  THREADS=${GPU_SCIENCE_THREADS:-1}
else
  P3_MODEL=L4C128H4T256 P3_L=4 P3_C=128 P3_H=4 P3_B=64 P3_T=256
  P4_MODEL=L6C256H4T256 P4_L=6 P4_H=4 P4_B=64 P4_T=256
  PR_MODEL=L8C512H8T512 PR_L=8 PR_H=8 PR_B=32 PR_T=512 PR_TABLE="2*2 4*2 8*4"  # head sizes 256, 128, 64
  VAL_M=-1 SURG_B=8 SURG_T=256 SURG_M=16 ATTN_N=8
  TIME_STEPS=30 TIME_SKIP=5
  CAP3=0 CAP4=0 CAPR=0 MIN_STEPS=300 ROUND=10   # steps are multiples of ROUND
  CPU_FLOPS=2e11 CKPT_BW=1e9 RESERVE=15
  TRAIN=./train_gpt2cu
  THREADS=${GPU_SCIENCE_THREADS:-$NPROC}   # the CPU tools (sd_surgery, attn_distance)
fi
declare -A ARM_FLAGS=([sd_noln]="$SD_NOLN_FLAGS" [mha_noln]="$MHA_NOLN_FLAGS" [mha]="$MHA_FLAGS")
SD_ARMS=(sd_noln mha_noln mha)

if [ "$HOST" = 1 ]; then MODE="host mode: the CPU trainer $TRAIN at tiny sizes; the numbers say nothing about a GPU"
elif [ "$PLAN_ONLY" = 1 ]; then MODE="plan only: assumed rates, nothing built or run"
else MODE="GPU"; fi
log "== gpu_science $(date -u +%Y-%m-%dT%H:%M:%SZ) ($MODE; budget ${BUDGET} s)"
log "recipe: SD_NOLN_FLAGS '$SD_NOLN_FLAGS'; mha_noln '$MHA_NOLN_FLAGS'; mha '$MHA_FLAGS'; Prism arms '$PRISM_FLAGS'; all with '$COMMON_FLAGS'"

# --- 1. build -----------------------------------------------------------------------------------
log "== 1. build"
PROSE_TRAIN='dev/data/prose/prose_train_*.bin' PROSE_VAL='dev/data/prose/prose_val_*.bin'
have_prose() { [ -f dev/data/prose/prose_val_000000.bin ] && compgen -G "$PROSE_TRAIN" > /dev/null; }
PROSE_PID=
if [ "$PLAN_ONLY" = 1 ]; then
  log "plan only: no build"
elif [ "$HOST" = 1 ]; then
  run build 300 make -j "$NPROC" PYTHON="$PY" train_gpt2 sd_spectrum sd_surgery attn_distance
  result $? "build: train_gpt2 sd_spectrum sd_surgery attn_distance (host mode; log build.log)"
else
  PYT=${PYTHON:-python3}   # the Python whose wheels hold cuDNN (PyTorch's), as dev/gpu_check.sh
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | head -n 1 | sed 's/^/gpu: /' | sumtee
  NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$NVCC")")}
  SITE=$(timeout 60 "$PYT" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" 2>/dev/null || true)
  # cuDNN and its frontend headers: the same search as dev/gpu_check.sh step 2
  if [ -f "$CUDA_HOME/include/cudnn.h" ]; then CUDNN_HOME=$CUDA_HOME
  elif [ -f /usr/include/cudnn.h ]; then CUDNN_HOME=/usr
  elif [ -n "$SITE" ] && [ -f "$SITE/nvidia/cudnn/include/cudnn.h" ]; then CUDNN_HOME=$SITE/nvidia/cudnn
  else CUDNN_HOME=; fi
  if [ -n "$CUDNN_HOME" ]; then
    for d in "$CUDNN_HOME/lib" "$CUDNN_HOME/lib64"; do [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"; done
  fi
  FRONTEND=${CUDNN_FRONTEND_PATH:-}
  if [ -z "$FRONTEND" ]; then
    loc=$(timeout 60 "$PYT" -m pip show nvidia-cudnn-frontend 2>/dev/null | sed -n 's/^Location: //p')
    if [ -n "$loc" ] && [ -f "$loc/include/cudnn_frontend.h" ]; then FRONTEND=$loc/include
    elif [ -f build/cudnn_frontend/include/cudnn_frontend.h ]; then FRONTEND=$PWD/build/cudnn_frontend/include
    fi
  fi
  USE_CUDNN=0
  if [ -n "$CUDNN_HOME" ] && [ -n "$FRONTEND" ]; then USE_CUDNN=1; else
    log "cuDNN: ${CUDNN_HOME:-not found}, frontend headers: ${FRONTEND:-not found (carry build/cudnn_frontend)}: the own attention kernels only (slower)"
  fi
  CC_GPU=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')
  [ -n "$CC_GPU" ] || CC_GPU=90
  MAKEVARS=(GPU_COMPUTE_CAPABILITY="$CC_GPU" USE_CUDNN="$USE_CUDNN" PYTHON="$PY" NO_MULTI_GPU=1)
  [ -n "$CUDNN_HOME" ] && MAKEVARS+=(CUDNN_HOME="$CUDNN_HOME")
  [ -n "$FRONTEND" ] && MAKEVARS+=(CUDNN_FRONTEND_PATH="$FRONTEND")
  # the corpus is tokenized on the CPU while nvcc compiles
  if ! have_prose && [ "${GPU_SCIENCE_DATA:-}" != shakespeare ]; then
    ( timeout 120 make PYTHON="$PY" prose > "$OUTDIR/prose.log" 2>&1 ) &
    PROSE_PID=$!
  fi
  TARGETS=(train_gpt2cu train_gpt2 sd_spectrum sd_surgery attn_distance)
  run build 240 make -j "$NPROC" "${MAKEVARS[@]}" "${TARGETS[@]}"
  rc=$?
  result $rc "build for sm_$CC_GPU (USE_CUDNN=$USE_CUDNN): ${TARGETS[*]} (log build.log)"
  if [ $rc -ne 0 ] && [ "$USE_CUDNN" = 1 ]; then
    log "retrying without cuDNN (the own attention kernels)"
    run build_nocudnn 150 make -j "$NPROC" GPU_COMPUTE_CAPABILITY="$CC_GPU" USE_CUDNN=0 PYTHON="$PY" NO_MULTI_GPU=1 "${TARGETS[@]}"
    result $? "build without cuDNN (log build_nocudnn.log)"
  fi
fi
# the data: the prose corpus (made above, or carried); host mode falls back to TinyShakespeare
if [ -n "$PROSE_PID" ]; then
  wait "$PROSE_PID"
  result $? "make prose: the prose corpus from ../shared/data (log prose.log)"
fi
if have_prose && [ "${GPU_SCIENCE_DATA:-}" != shakespeare ]; then
  TRAIN_GLOB=$PROSE_TRAIN VAL_GLOB=$PROSE_VAL DATA_NAME="prose corpus"
  [ -z "$PROSE_PID" ] && log "prose corpus: dev/data/prose is there (carried or made before): not rebuilt"
elif [ "$HOST" = 1 ] || [ "$PLAN_ONLY" = 1 ] || [ "${GPU_SCIENCE_DATA:-}" = shakespeare ]; then
  TRAIN_GLOB=dev/data/tinyshakespeare/tiny_shakespeare_train.bin
  VAL_GLOB=dev/data/tinyshakespeare/tiny_shakespeare_val.bin DATA_NAME="TinyShakespeare"
  if [ "${GPU_SCIENCE_DATA:-}" = shakespeare ]; then log "data: TinyShakespeare (GPU_SCIENCE_DATA=shakespeare)"
  else log "$MODE: dev/data/prose not built (make prose): TinyShakespeare instead"; fi
else
  TRAIN_GLOB=$PROSE_TRAIN VAL_GLOB=$PROSE_VAL DATA_NAME="prose corpus"
fi
shard_tokens() {  # GLOB: the tokens of the shards (header int 2)
  local n=0 t s files
  mapfile -t files < <(compgen -G "$1")
  for s in "${files[@]}"; do
    [ -f "$s" ] || continue
    t=$(od -An -t d4 -j 8 -N 4 "$s" | tr -d ' ')
    n=$((n + t))
  done
  echo "$n"
}
TRAIN_TOKENS=$(shard_tokens "$TRAIN_GLOB")
VAL_TOKENS=$(shard_tokens "$VAL_GLOB")
if [ "$TRAIN_TOKENS" -gt 0 ] && [ "$VAL_TOKENS" -gt 0 ]; then
  log "data: $DATA_NAME, train $TRAIN_GLOB ($TRAIN_TOKENS tokens), val $VAL_GLOB ($VAL_TOKENS tokens)"
else
  result 1 "data: no shards at $TRAIN_GLOB / $VAL_GLOB (make prose, or carry dev/data/prose)"
  log "elapsed ${SECONDS}s of a ${BUDGET}s budget"
  log "$PASSED passed, $FAILED failed"
  exit 1
fi
if [ "$PLAN_ONLY" != 1 ]; then
  for p in "$TRAIN" ./train_gpt2 ./sd_spectrum ./sd_surgery ./attn_distance; do
    [ -x "$p" ] || result 1 "$p: not built (see build.log)"
  done
fi

# the floors of every val-window shape the parts use, computed on the CPU in the background
TOKENIZER_ARG=()
[ -f gpt2_tokenizer.bin ] && TOKENIZER_ARG=(--tokenizer gpt2_tokenizer.bin)
declare -A FLOOR_PID=()
floors_start() {  # B T M: scripts/floors.py on the trainer's val windows of that shape
  local key=B$1_T$2_M$3
  [ -n "${FLOOR_PID[$key]:-}" ] && return 0
  if [ ! -f scripts/floors.py ]; then FLOOR_PID[$key]=none; return 0; fi
  ( timeout 180 "$PY" scripts/floors.py --train "$TRAIN_GLOB" --val "$VAL_GLOB" -b "$1" -t "$2" -m "$3" \
      "${TOKENIZER_ARG[@]}" --json "$AN/floors_$key.json" > "$OUTDIR/floors_$key.log" 2>&1 ) &
  FLOOR_PID[$key]=$!
}
# FLOOR_UNI FLOOR_BI FLOOR_TARGETS FLOOR_BYTES of a window shape (empty when there are none)
floors_get() {  # B T M
  local key=B$1_T$2_M$3 pid
  pid=${FLOOR_PID[$key]:-}
  FLOOR_UNI='' FLOOR_BI='' FLOOR_TARGETS='' FLOOR_BYTES=''
  if [ "$pid" = none ]; then
    log "floors: scripts/floors.py not found: no floors"
    return 1
  fi
  [[ "$pid" =~ ^[0-9]+$ ]] && wait "$pid" 2>/dev/null
  FLOOR_PID[$key]=finished
  if [ ! -f "$AN/floors_$key.json" ]; then
    result 1 "floors B $1 x T $2, -m $3: no output ($(tail -n 1 "$OUTDIR/floors_$key.log" 2>/dev/null); log floors_$key.log)"
    return 1
  fi
  read -r FLOOR_UNI FLOOR_BI FLOOR_TARGETS FLOOR_BYTES < <("$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(d["unigram"], d["bigram"], d["targets"], d.get("bytes") or 0)' "$AN/floors_$key.json")
  [ -n "$FLOOR_BI" ]
}
bpb() {  # NATS: bits per byte on the floors' windows (empty without a byte count)
  [ -n "${FLOOR_BYTES:-}" ] && [ "${FLOOR_BYTES:-0}" != 0 ] || return 0
  awk -v n="$1" -v t="$FLOOR_TARGETS" -v b="$FLOOR_BYTES" 'BEGIN{printf " (%.3f bpb)", n * t / (b * log(2))}'
}
floors_line() {  # B T M
  local m="$3 batches"
  [ "$3" = -1 ] && m="every window of the val split"
  [ -n "$FLOOR_BI" ] && log "floors on the val windows (B $1 x T $2, $m; $FLOOR_TARGETS targets): unigram $(fmt %.4f "$FLOOR_UNI")$(bpb "$FLOOR_UNI"), bigram $(fmt %.4f "$FLOOR_BI")$(bpb "$FLOOR_BI") nats"
}
vs_floor() {  # NAME VAL: the val loss beside the floors
  local name=$1 v=$2 verdict
  if [ -z "$v" ]; then log "  $(printf '%-16s' "$name") val loss: none (the run did not finish)"; return; fi
  if [ -z "${FLOOR_BI:-}" ]; then log "  $(printf '%-16s' "$name") val $(fmt %.4f "$v") nats (no floors)"; return; fi
  verdict=$(awk -v v="$v" -v b="$FLOOR_BI" 'BEGIN{if (v < b) printf "below the bigram floor by %.4f: testable", b - v; else printf "above the bigram floor by %.4f: not testable", v - b}')
  log "  $(printf '%-16s' "$name") val $(fmt %.4f "$v")$(bpb "$v") nats; $verdict"
}

final_val() {  # main.log: the last val loss
  awk '{for (i = 1; i <= NF; i++) if ($i ~ /^tel:/) v = substr($i, 5)} END{if (v != "") print v}' "$1" 2>/dev/null
}
val_at() {  # main.log STEP
  awk -v s="s:$2" '$1 == s {for (i = 1; i <= NF; i++) if ($i ~ /^tel:/) v = substr($i, 5)} END{if (v != "") print v}' "$1" 2>/dev/null
}
table_of() {  # H KIND L
  printf '%s%s*%s\n' "$1" "$2" "$3"
}
# the parameter count of a model as the CPU trainer builds it (-x 0); else GPT-2's formula
params_of() {  # MODEL TABLE FLAGS
  local -a fl
  read -r -a fl <<< "$3"
  local n=
  if [ -x ./train_gpt2 ]; then
    n=$(OMP_NUM_THREADS=1 timeout 60 ./train_gpt2 -e "$1" -prism "$2" "${fl[@]}" -x 0 -b 1 -t 16 -v 0 -m 1 -s 0 \
          -i "$TRAIN_GLOB" -j "$VAL_GLOB" 2>&1 | sed -n 's/^parameters: \([0-9][0-9]*\)$/\1/p' | head -n 1)
  fi
  if [ -z "$n" ]; then  # L<l>C<c>H<h>T<t>: V 50304, the blocks of standard GPT-2
    n=$(echo "$1" | sed -E 's/^L([0-9]+)C([0-9]+)H[0-9]+T([0-9]+)$/\1 \2 \3/' |
        awk '{L = $1; C = $2; T = $3; printf "%d\n", 50304 * C + T * C + L * (12 * C * C + 13 * C) + 2 * C}')
  fi
  echo "$n"
}

# --- 2. tokens/s and the plan --------------------------------------------------------------------
log "== 2. tokens/s per model shape ($TIME_STEPS steps each), then the plan"
write_tables() {
  table_of "$P3_H" :sd "$P3_L" > "$RUNS/p3_sd_table.txt"; table_of "$P3_H" "" "$P3_L" > "$RUNS/p3_mha_table.txt"
  table_of "$P4_H" :sd "$P4_L" > "$RUNS/p4_sd_table.txt"; table_of "$P4_H" "" "$P4_L" > "$RUNS/p4_mha_table.txt"
  table_of "$PR_H" "" "$PR_L" > "$RUNS/pr_uniform_table.txt"
  printf '# Prism schedule for %s: head sizes %s (written by dev/gpu_science.sh)\n%s\n' "$PR_MODEL" \
    "$([ "$HOST" = 1 ] && echo "64, 32, 16" || echo "256, 128, 64")" "$PR_TABLE" > "$RUNS/pr_prism_table.txt"
}
write_tables
arm_table() {  # PART(p3|p4) ARM
  if [ "$2" = sd_noln ]; then echo "$RUNS/${1}_sd_table.txt"; else echo "$RUNS/${1}_mha_table.txt"; fi
}
# TIME_TPS, TIME_OVH: tokens/s over the steps after the first TIME_SKIP, and the start-up seconds
timing() {  # NAME MODEL TABLE FLAGS B T
  local name=$1 model=$2 table=$3 B=$5 T=$6 t0 t1 ms rc
  local -a fl
  read -r -a fl <<< "$4 $COMMON_FLAGS"
  TIME_TPS='' TIME_OVH=''
  t0=$(date +%s.%N)
  run "$name" 120 env OMP_NUM_THREADS="$THREADS" "$TRAIN" -e "$model" -prism "$table" "${fl[@]}" -seed 1 -data_seed 1 \
    -i "$TRAIN_GLOB" -j "$VAL_GLOB" -b "$B" -t "$T" -x "$TIME_STEPS" -v 0 -m 1
  rc=$?
  t1=$(date +%s.%N)
  ms=$(awk -v skip="$TIME_SKIP" '/^step /{n++; if (n > skip) for (i = 2; i <= NF; i++) if ($i == "ms") {s += $(i - 1); k++}}
          END{if (k > 0) printf "%.4f\n", s / k}' "$OUTDIR/$name.log" 2>/dev/null)
  if [ $rc -eq 0 ] && [ -n "$ms" ]; then
    TIME_TPS=$(f "$B * $T * 1000 / $ms")
    TIME_OVH=$(f "($t1 - $t0) - $TIME_STEPS * $ms / 1000")
    TIME_OVH=$(f "$TIME_OVH < 0.5 ? 0.5 : $TIME_OVH")
    result 0 "tokens/s $model ($name, B $B x T $T): $(fmt %.2f "$ms") ms per step, $(fmt %.0f "$TIME_TPS") tokens/s, start-up and first steps $(fmt %.1f "$TIME_OVH") s (log $name.log)"
  else
    result 1 "tokens/s $model ($name): the $TIME_STEPS-step run did not finish (exit $rc; log $name.log)"
  fi
}
# parameters (the CPU trainer's count; tokens per parameter use the standard model, mha)
declare -A PARAMS=()
for arm in "${SD_ARMS[@]}"; do
  PARAMS[p3_$arm]=$(params_of "$P3_MODEL" "$(arm_table p3 "$arm")" "${ARM_FLAGS[$arm]}")
  PARAMS[p4_$arm]=$(params_of "$P4_MODEL" "$(arm_table p4 "$arm")" "${ARM_FLAGS[$arm]}")
done
PARAMS[pr_uniform]=$(params_of "$PR_MODEL" "$RUNS/pr_uniform_table.txt" "$PRISM_FLAGS")
PARAMS[pr_prism]=$(params_of "$PR_MODEL" "$RUNS/pr_prism_table.txt" "$PRISM_FLAGS")
if [ "$PLAN_ONLY" = 1 ]; then
  read -r TPS3 TPS4 TPSR OVH BUILD_S <<< "${GPU_SCIENCE_ASSUME:-4000000 2000000 1000000 4 120}"
  OVH3=$OVH OVH4=$OVH OVHR=$OVH
  DEADLINE=$((SECONDS + BUDGET - BUILD_S - 3 * (OVH + 2)))
  log "assumed: tokens/s $TPS3 (part 3), $TPS4 (part 4a), $TPSR (part 4b); start-up $OVH s per run; build ${BUILD_S} s; timing runs $((3 * (OVH + 2))) s"
else
  timing time_p3 "$P3_MODEL" "$RUNS/p3_sd_table.txt" "$SD_NOLN_FLAGS" "$P3_B" "$P3_T"; TPS3=$TIME_TPS OVH3=$TIME_OVH
  timing time_p4 "$P4_MODEL" "$RUNS/p4_sd_table.txt" "$SD_NOLN_FLAGS" "$P4_B" "$P4_T"; TPS4=$TIME_TPS OVH4=$TIME_OVH
  timing time_pr "$PR_MODEL" "$RUNS/pr_prism_table.txt" "$PRISM_FLAGS" "$PR_B" "$PR_T"; TPSR=$TIME_TPS OVHR=$TIME_OVH
fi


# plan_steps TPS OVH RUNS B T TARGET_TOKENS FIXED_S SHARE_S CAP ROUND -> "STEPS SECONDS": the steps
# of each run (a multiple of ROUND) that reach TARGET_TOKENS or fill SHARE_S, whichever is less;
# FIXED_S: the part's seconds besides the training steps (start-ups, evals, checkpoints, analysis)
plan_steps() {
  awk -v tps="$1" -v ovh="$2" -v runs="$3" -v B="$4" -v T="$5" -v target="$6" -v fixed="$7" -v share="$8" \
      -v cap="$9" -v rnd="${10}" 'BEGIN{
    per = B * T / tps; full = int((target + B * T - 1) / (B * T)); full = int((full + rnd - 1) / rnd) * rnd
    fit = int((share - fixed - runs * ovh) / (runs * per) / rnd) * rnd; if (fit < 0) fit = 0
    s = full < fit ? full : fit; if (cap > 0 && s > cap) s = cap
    printf "%d %.0f\n", s, runs * (ovh + s * per) + fixed }'
}
# the seconds of the val evals (forward only: a third of a training step per token) and checkpoints
evals_s() {  # TPS N_EVALS B T PARAMS N_CKPT
  local scored
  if [ "$VAL_M" = -1 ]; then scored=$(( (VAL_TOKENS - 1) / ($3 * $4) )); scored=$((scored * $3 * $4)); else scored=$((VAL_M * $3 * $4)); fi
  f "$2 * $scored / (3 * $1) + $6 * ($5 * 16 / $CKPT_BW + 0.1)"
}
fwd_s() {  # PARAMS TOKENS: a CPU forward over TOKENS (2 flops per parameter and token) plus loading
  f "0.3 + 2 * $1 * $2 / $CPU_FLOPS"
}
# the seconds a part may take: host mode runs its capped steps whatever the CPU's rate
share() { if [ "$HOST" = 1 ]; then echo 1e9; else f "$1"; fi; }
PLAN_OK=1
for v in "$TPS3" "$TPS4" "$TPSR"; do [ -n "$v" ] || PLAN_OK=0; done
if [ "$PLAN_OK" = 0 ]; then
  log "PLAN: no plan (a timing run failed): parts 3 and 4 are skipped"
  S3=0 S4=0 SR=0
else
  AVAIL=$(( $(left) - RESERVE ))
  # part 3: 3 arms, 10 val evals and checkpoints on sd_noln (1 on the others), 12 spectra,
  # 2 x (L-1) linearizations (+1 for the val loss before)
  P3_REF=${PARAMS[p3_mha]}
  SURG_TOK=$((SURG_B * SURG_T * SURG_M))
  A3=$(f "12 * 0.5 + (2 * ($P3_L - 1) + 2) * $(fwd_s "$P3_REF" "$SURG_TOK")")
  X3=$(f "$(evals_s "$TPS3" 10 "$P3_B" "$P3_T" "$P3_REF" 10) + 2 * $(evals_s "$TPS3" 1 "$P3_B" "$P3_T" "$P3_REF" 1) + $A3")
  read -r S3 E3 <<< "$(plan_steps "$TPS3" "$OVH3" 3 "$P3_B" "$P3_T" "$(f "$TPP_TARGET * $P3_REF")" "$X3" "$(share "0.5 * $AVAIL")" "$CAP3" "$ROUND")"
  # part 4a: 3 arms, one val eval and checkpoint each, 3 spectra; 0.4 of what part 3 leaves
  P4_REF=${PARAMS[p4_mha]}
  X4=$(f "3 * $(evals_s "$TPS4" 1 "$P4_B" "$P4_T" "$P4_REF" 1) + 3 * 0.7")
  R4=$(f "$AVAIL - $E3")
  read -r S4 E4 <<< "$(plan_steps "$TPS4" "$OVH4" 3 "$P4_B" "$P4_T" "$(f "$TPP_TARGET * $P4_REF")" "$X4" "$(share "0.4 * $R4")" "$CAP4" "$ROUND")"
  # part 4b: 2 arms x 2 seeds, one val eval and checkpoint each, 2 attention-distance runs; the rest
  PR_REF=${PARAMS[pr_uniform]}
  XR=$(f "4 * $(evals_s "$TPSR" 1 "$PR_B" "$PR_T" "$PR_REF" 1) + 2 * $(fwd_s "$(f "2 * $PR_REF")" "$((ATTN_N * PR_T))")")
  RR=$(f "$AVAIL - $E3 - $E4")
  read -r SR ER <<< "$(plan_steps "$TPSR" "$OVHR" 4 "$PR_B" "$PR_T" 1e18 "$XR" "$(share "$RR")" "$CAPR" "$ROUND")"
  plan_part() {  # LABEL MODEL ARMS PARAMS_TEXT REF STEPS B T RUNS SECONDS TPS
    local label=$1 model=$2 arms=$3 ptext=$4 ref=$5 steps=$6 B=$7 T=$8 runs=$9 secs=${10} tps=${11} tok
    tok=$((steps * B * T))
    log "PLAN $label: $model, arms $arms; parameters $ptext"
    if [ "$steps" -lt "$MIN_STEPS" ]; then
      log "PLAN   skipped: ${steps} steps fit its share of the budget, fewer than $MIN_STEPS"
      return
    fi
    log "PLAN   $steps steps of B $B x T $T = $(mtok "$tok") tokens per run = $(fmt %.2f "$(f "$tok / $ref")") tokens per parameter, $(fmt %.2f "$(f "$tok / $TRAIN_TOKENS")") epochs of the $(mtok "$TRAIN_TOKENS")-token train split"
    log "PLAN   expected $secs s: $runs runs at $(fmt %.0f "$tps") tokens/s ($(fmt %.1f "$(f "$steps * $B * $T / $tps")") s of steps each), start-ups, evals, checkpoints, analysis"
  }
  log "PLAN (budget left $(left) s; $RESERVE s kept for the end; every arm of a part at the rate of the arm timed in step 2)"
  plan_part "part 3, the S-D claims" "$P3_MODEL" "sd_noln mha_noln mha (seed 1; 10 checkpoints of sd_noln)" \
    "sd_noln ${PARAMS[p3_sd_noln]}, mha_noln ${PARAMS[p3_mha_noln]}, mha ${PARAMS[p3_mha]} (tokens per parameter of mha; target $TPP_TARGET)" \
    "$P3_REF" "$S3" "$P3_B" "$P3_T" 3 "$E3" "$TPS3"
  plan_part "part 4a, the next size" "$P4_MODEL" "sd_noln mha_noln mha (seed 1)" \
    "sd_noln ${PARAMS[p4_sd_noln]}, mha_noln ${PARAMS[p4_mha_noln]}, mha ${PARAMS[p4_mha]}" \
    "$P4_REF" "$S4" "$P4_B" "$P4_T" 3 "$E4" "$TPS4"
  plan_part "part 4b, Prism vs uniform" "$PR_MODEL" "uniform ($PR_H heads), Prism '$PR_TABLE' (seeds 1, 2)" \
    "uniform ${PARAMS[pr_uniform]}, Prism ${PARAMS[pr_prism]}" "$PR_REF" "$SR" "$PR_B" "$PR_T" 4 "$ER" "$TPSR"
  tot=0
  [ "$S3" -ge "$MIN_STEPS" ] && tot=$((tot + E3))
  [ "$S4" -ge "$MIN_STEPS" ] && tot=$((tot + E4))
  [ "$SR" -ge "$MIN_STEPS" ] && tot=$((tot + ER))
  log "PLAN total expected $tot s of $AVAIL s"
  [ "$HOST" = 1 ] && log "PLAN   (host mode: $CAP3, $CAP4 and $CAPR steps per run, whatever the budget)"
fi
if [ "$PLAN_ONLY" = 1 ]; then
  log "$PASSED passed, $FAILED failed"
  exit 0
fi
for key in "$P3_B $P3_T" "$P4_B $P4_T" "$PR_B $PR_T"; do
  read -r b t <<< "$key"
  floors_start "$b" "$t" "$VAL_M"
done

# refit STEPS SECONDS TPS OVH RUNS B T FIXED LABEL: the steps a part runs, fitted again to the time
# left now (an earlier part may have run long); sets FIT_STEPS, FIT_SECONDS; 1 when it cannot run
refit() {
  local steps=$1 secs=$2 avail
  avail=$(( $(left) - RESERVE ))
  FIT_STEPS=$steps FIT_SECONDS=$secs
  if [ "$steps" -lt "$MIN_STEPS" ]; then
    log "SKIP $9: the plan had no room for it ($steps steps, fewer than $MIN_STEPS)"
    return 1
  fi
  if [ "$secs" -gt "$avail" ]; then
    read -r FIT_STEPS FIT_SECONDS <<< "$(plan_steps "$3" "$4" "$5" "$6" "$7" "$((steps * $6 * $7))" "$8" "$avail" "$steps" "$ROUND")"
    if [ "$FIT_STEPS" -lt "$MIN_STEPS" ]; then
      log "SKIP $9: $avail s left, $secs s planned ($FIT_STEPS steps would fit, fewer than $MIN_STEPS)"
      return 1
    fi
    log "re-planned $9: $FIT_STEPS steps instead of $steps ($avail s left, $secs s planned)"
  fi
  return 0
}
limit_of() {  # SECONDS: a run's time limit from its expected seconds
  if [ "$HOST" = 1 ]; then f "int(4 * $1 + 30)"; else f "int(1.5 * $1 + 20)"; fi
}
# train TAG DIR MODEL TABLE FLAGS B T STEPS CKPT_EVERY VAL_EVERY SEED EXPECTED_S
train() {
  local tag=$1 dir=$2 model=$3 table=$4 B=$6 T=$7 steps=$8 nck=$9 vev=${10} seed=${11} t0 rc v
  local -a fl
  read -r -a fl <<< "$5 $COMMON_FLAGS"
  rm -rf "$dir"
  t0=$SECONDS
  run "$tag" "$(limit_of "${12}")" env OMP_NUM_THREADS="$THREADS" "$TRAIN" -e "$model" -prism "$table" "${fl[@]}" \
    -seed "$seed" -data_seed "$seed" -i "$TRAIN_GLOB" -j "$VAL_GLOB" -b "$B" -t "$T" -x "$steps" \
    -v "$vev" -m "$VAL_M" -n "$nck" -o "$dir"
  rc=$?
  v=$(final_val "$dir/main.log")
  rm -f "$dir"/state_*.bin   # the optimizer states: nothing here resumes a run
  [ -f "$dir/model_$(printf '%08d' "$steps").bin" ] || rc=1
  result $rc "train $tag: $steps steps in $((SECONDS - t0)) s, final val loss ${v:-none} (log $tag.log)"
  return $rc
}
spectrum() {  # TAG CKPT: ./sd_spectrum -json; sets SPEC ("erank per layer | n90 per layer") or empty
  SPEC=
  run "$1" 60 ./sd_spectrum "$2" -json "$AN/$1.json" || return 1
  SPEC=$("$PY" -c 'import json, sys
L = json.load(open(sys.argv[1]))["layers"]
num = lambda x, k: "-" if x.get(k) is None else "%.2f" % x[k]
print(" ".join(num(x, "erank_mean") for x in L), "|", " ".join(num(x, "n90_mean") for x in L))' "$AN/$1.json" 2>/dev/null)
  [ -n "$SPEC" ]
}

# --- 3. the S-D claims ---------------------------------------------------------------------------
P3_DONE=0
log "== 3. S-D claims: $P3_MODEL, arms ${SD_ARMS[*]}, one init and data seed"
if [ "$PLAN_OK" = 1 ] && refit "$S3" "$E3" "$TPS3" "$OVH3" 3 "$P3_B" "$P3_T" "$X3" "part 3"; then
  P3_DONE=1
  steps=$FIT_STEPS
  every=$((steps / 10))
  [ "$every" -lt 1 ] && every=1
  per=$(f "($FIT_SECONDS - $X3) / 3 + 10")
  for arm in "${SD_ARMS[@]}"; do
    nck=$steps
    [ "$arm" = sd_noln ] && nck=$every
    train "p3_$arm" "$RUNS/p3_$arm" "$P3_MODEL" "$(arm_table p3 "$arm")" "${ARM_FLAGS[$arm]}" "$P3_B" "$P3_T" \
      "$steps" "$nck" "$every" 1 "$per"
  done
  ck() { echo "$RUNS/p3_$1/model_$(printf '%08d' "$2").bin"; }
  floors_get "$P3_B" "$P3_T" "$VAL_M" && floors_line "$P3_B" "$P3_T" "$VAL_M"
  log "val loss of each arm after $steps steps ($(mtok $((steps * P3_B * P3_T))) tokens):"
  for arm in "${SD_ARMS[@]}"; do vs_floor "$arm" "$(final_val "$RUNS/p3_$arm/main.log")"; done
  log "routing spectrum of sd_noln over training (./sd_spectrum: erank of S per layer, mean over heads | n90 per layer):"
  log "  $(printf '%7s %8s' step val) | erank L0 .. L$((P3_L - 1)) | n90 L0 .. L$((P3_L - 1))"
  first0='' last0='' lastrow='' nspec=0
  for ((s = every; s <= steps; s += every)); do
    c=$(ck sd_noln "$s")
    if [ ! -f "$c" ]; then log "  $(printf '%7d' "$s") no checkpoint"; continue; fi
    if spectrum "spectrum_p3_sd_noln_$s" "$c"; then
      nspec=$((nspec + 1))
      log "  $(printf '%7d %8s' "$s" "$(val_at "$RUNS/p3_sd_noln/main.log" "$s")") | $SPEC"
      e0=${SPEC%% *}
      [ -z "$first0" ] && first0=$e0
      last0=$e0 lastrow=${SPEC%%|*}
    else
      log "  $(printf '%7d' "$s") sd_spectrum failed (log spectrum_p3_sd_noln_$s.log)"
    fi
  done
  [ "$nspec" -eq $((steps / every)) ]
  result $? "sd_spectrum on the $((steps / every)) checkpoints of sd_noln ($nspec read)"
  if [ -n "$first0" ]; then
    lowest=$(echo "$lastrow" | awk '{m = $1; k = 0; for (i = 2; i <= NF; i++) if ($i < m) {m = $i; k = i - 1}; print k == 0 ? "yes" : "no (layer " k ")"}')
    log "layer 0 of sd_noln: routing erank $first0 at the first checkpoint -> $last0 at the last ($(fmt %+.0f "$(f "100 * ($last0 - $first0) / $first0")")%); lowest of the layers at the end: $lowest (the paper: near one rotation plane, erank 2, in the first layer, rising with depth)"
  fi
  # the cascade is read from n90 against the optimizer's null (doc/sd_tools.md "n90 against erank,
  # and the nulls"): what one and two planes of routing signal give after this run's AdamW
  n90row=${SPEC#*| }
  lr=$(echo "$LR_FLAGS" | awk '{for (i = 1; i < NF; i++) if ($i == "-l") print $(i + 1)}')
  wu=$(echo "$LR_FLAGS" | awk '{for (i = 1; i < NF; i++) if ($i == "-u") print $(i + 1)}')
  null=$("$PY" -c 'import sys; from sd_attention import routing_null as r
d, n, lr, wu = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
rows = r.nulls(d, n, lr, min(wu, max(1, n // 5)), 0.1, noise_ratios=(0.0, 1.0, 3.0), draws=4, seed=1)["rows"]
hi = lambda k: max(x["s_n90"] + 2 * x["s_n90_sd"] for x in rows if x["k"] == k)
print("%.1f %.1f" % (hi(1), hi(2)))' "$((P3_C / P3_H))" "$steps" "${lr:-1e-3}" "${wu:-0}" 2>/dev/null)
  if [ -n "$null" ] && [ -n "$SPEC" ]; then
    n0=${n90row%% *} nl=${n90row##* }
    log "cascade (n90 of S, layer 0 and last, against the two-plane null ${null#* } and the one-plane null ${null%% *} of this run's AdamW): layer 0 $n0, last $nl; layer 0 within two planes and the last above: $(awk -v a="$n0" -v b="$nl" -v h="${null#* }" 'BEGIN{print (a <= h && b > h) ? "yes" : "no"}')"
  fi
  for arm in mha_noln mha; do
    c=$(ck "$arm" "$steps")
    if [ -f "$c" ] && spectrum "spectrum_p3_$arm" "$c"; then
      log "routing erank of $arm at the end (R, the skew part of W_Q W_K^T) | n90: $SPEC"
    fi
  done
  # the first K layers linear without retraining: the val perplexity change per K
  log "linearization (./sd_surgery -op linearize -k K, no retraining; val B $SURG_B x T $SURG_T x $SURG_M batches; perplexity change against the model as trained):"
  for arm in sd_noln mha_noln; do
    c=$(ck "$arm" "$steps")
    if [ ! -f "$c" ]; then log "  $arm: no checkpoint"; continue; fi
    line='' base='' ok=0 lin5=0
    for ((k = 1; k < P3_L; k++)); do
      rep=$AN/p3_${arm}_lin$k
      run "surgery_p3_${arm}_lin$k" 120 env OMP_NUM_THREADS="$THREADS" ./sd_surgery -e "$c" -o "$rep.bin" -op linearize -k "$k" \
        -j "$VAL_GLOB" -m "$SURG_M" -b "$SURG_B" -t "$SURG_T" -eval_before "$([ "$k" = 1 ] && echo 1 || echo 0)"
      rm -f "$rep.bin"
      if [ ! -f "$rep.report.json" ]; then line="$line K=$k failed"; continue; fi
      read -r pb pa < <("$PY" -c 'import json, sys
v = json.load(open(sys.argv[1]))["val"]
print(v["ppl_before"] if v.get("ppl_before") is not None else "-", v["ppl_after"])' "$rep.report.json")
      [ "$k" = 1 ] && base=$pb
      if [ -n "$base" ] && [ "$base" != - ]; then
        ch=$(f "100 * ($pa / $base - 1)")
        line="$line K=$k $(fmt %+.1f "$ch")%"
        ok=$((ok + 1))
        [ "$(f "$ch < 5 && $lin5 == $k - 1")" = 1 ] && lin5=$k
      fi
    done
    log "  $(printf '%-9s' "$arm") ppl $(fmt %.2f "${base:-0}"):$line; linearizable at < 5 %: first $lin5 of $P3_L layers"
    [ "$ok" -eq $((P3_L - 1)) ]
    result $? "linearization of $arm for K = 1 .. $((P3_L - 1)) (logs surgery_p3_${arm}_lin*.log)"
  done
fi

# --- 4a. the next size ---------------------------------------------------------------------------
P4_DONE=0
log "== 4a. the next size: $P4_MODEL, arms ${SD_ARMS[*]}, one init and data seed"
if [ "$PLAN_OK" = 1 ] && refit "$S4" "$E4" "$TPS4" "$OVH4" 3 "$P4_B" "$P4_T" "$X4" "part 4a"; then
  P4_DONE=1
  steps=$FIT_STEPS
  per=$(f "($FIT_SECONDS - $X4) / 3 + 10")
  for arm in "${SD_ARMS[@]}"; do
    train "p4_$arm" "$RUNS/p4_$arm" "$P4_MODEL" "$(arm_table p4 "$arm")" "${ARM_FLAGS[$arm]}" "$P4_B" "$P4_T" \
      "$steps" "$steps" 0 1 "$per"
  done
  floors_get "$P4_B" "$P4_T" "$VAL_M" && floors_line "$P4_B" "$P4_T" "$VAL_M"
  log "val loss of each arm after $steps steps ($(mtok $((steps * P4_B * P4_T))) tokens, $(fmt %.2f "$(f "$steps * $P4_B * $P4_T / ${PARAMS[p4_mha]}")") tokens per parameter):"
  for arm in "${SD_ARMS[@]}"; do vs_floor "$arm" "$(final_val "$RUNS/p4_$arm/main.log")"; done
  log "routing erank per layer at the end | n90 per layer:"
  for arm in "${SD_ARMS[@]}"; do
    c=$RUNS/p4_$arm/model_$(printf '%08d' "$steps").bin
    if [ -f "$c" ] && spectrum "spectrum_p4_$arm" "$c"; then log "  $(printf '%-9s' "$arm") $SPEC"
    else log "  $(printf '%-9s' "$arm") no spectrum"; fi
  done
fi

# --- 4b. Prism vs uniform ------------------------------------------------------------------------
PR_DONE=0
log "== 4b. Prism's mechanism: $PR_MODEL uniform ($PR_H heads per layer) vs Prism '$PR_TABLE', seeds 1 and 2"
if [ "$PLAN_OK" = 1 ] && refit "$SR" "$ER" "$TPSR" "$OVHR" 4 "$PR_B" "$PR_T" "$XR" "part 4b"; then
  PR_DONE=1
  steps=$FIT_STEPS
  per=$(f "($FIT_SECONDS - $XR) / 4 + 10")
  for seed in 1 2; do
    for arm in uniform prism; do
      train "pr_${arm}_seed$seed" "$RUNS/pr_${arm}_seed$seed" "$PR_MODEL" "$RUNS/pr_${arm}_table.txt" "$PRISM_FLAGS" \
        "$PR_B" "$PR_T" "$steps" "$steps" 0 "$seed" "$per"
    done
  done
  floors_get "$PR_B" "$PR_T" "$VAL_M" && floors_line "$PR_B" "$PR_T" "$VAL_M"
  log "val loss after $steps steps ($(mtok $((steps * PR_B * PR_T))) tokens, $(fmt %.2f "$(f "$steps * $PR_B * $PR_T / $PR_REF")") tokens per parameter):"
  dsum=0 dn=0
  for seed in 1 2; do
    vu=$(final_val "$RUNS/pr_uniform_seed$seed/main.log")
    vp=$(final_val "$RUNS/pr_prism_seed$seed/main.log")
    vs_floor "uniform seed $seed" "$vu"
    vs_floor "Prism seed $seed" "$vp"
    if [ -n "$vu" ] && [ -n "$vp" ]; then dsum=$(f "$dsum + $vp - $vu"); dn=$((dn + 1)); fi
  done
  [ "$dn" -gt 0 ] && log "  Prism - uniform val loss, mean over $dn seed(s): $(fmt %+.4f "$(f "$dsum / $dn")") nats"
  log "attention distance (./attn_distance -e Prism -e2 uniform, $ATTN_N windows of T $PR_T from the val split): Delta D_l = D_l(Prism) - D_l(uniform) per layer, in tokens | Delta D_norm per layer"
  ad=0
  for seed in 1 2; do
    cp_=$RUNS/pr_prism_seed$seed/model_$(printf '%08d' "$steps").bin
    cu_=$RUNS/pr_uniform_seed$seed/model_$(printf '%08d' "$steps").bin
    if [ ! -f "$cp_" ] || [ ! -f "$cu_" ]; then log "  seed $seed: a checkpoint is missing"; continue; fi
    run "attn_distance_seed$seed" 180 env OMP_NUM_THREADS="$THREADS" ./attn_distance -e "$cp_" -e2 "$cu_" -j "$VAL_GLOB" \
      -b 1 -t 0 -n "$ATTN_N" -json "$AN/attn_seed$seed.json" -csv "$AN/attn_seed$seed.csv"
    row=$("$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))["delta"]
g = lambda k: " ".join("-" if x.get("delta", {}).get(k) is None else "%+.2f" % x["delta"][k] for x in d)
print(g("D"), "|", g("D_norm"))' "$AN/attn_seed$seed.json" 2>/dev/null)
    if [ -n "$row" ]; then log "  seed $seed: $row"; ad=$((ad + 1)); fi
    [ -n "$row" ]
    result $? "attn_distance seed $seed (log attn_distance_seed$seed.log)"
  done
  if [ "$ad" = 2 ]; then
    mean=$("$PY" -c 'import json, sys
ds = [json.load(open(p))["delta"] for p in sys.argv[1:]]
def m(k, l):
    v = [d[l].get("delta", {}).get(k) for d in ds]
    return "-" if None in v else "%+.2f" % (sum(v) / len(v))
print(" ".join(m("D", l) for l in range(len(ds[0]))), "|", " ".join(m("D_norm", l) for l in range(len(ds[0]))))' "$AN/attn_seed1.json" "$AN/attn_seed2.json" 2>/dev/null)
    log "  mean:   $mean (the paper: Delta D_l < 0 in the early wide-head layers, > 0 later)"
  fi
fi

# --- the run's own output: every part that ran wrote its lines ------------------------------------
log "== checks of this output"
section() {  # HEADER: the lines of science.txt from the line starting with HEADER to the next "== "
  awk -v h="$1" 'index($0, h) == 1 {on = 1; print; next} on && /^== / {exit} on' "$SCIENCE"
}
check_part() {  # DONE HEADER LABEL PATTERN...: every pattern has a line in the part's section
  local done=$1 header=$2 label=$3 miss=() text p
  shift 3
  if [ "$done" != 1 ]; then
    if [ "$HOST" = 1 ]; then result 1 "$label: skipped (host mode must run every part)"; else log "$label: skipped (see above)"; fi
    return
  fi
  text=$(section "$header")
  for p in "$@"; do grep -q -- "$p" <<< "$text" || miss+=("$p"); done
  [ ${#miss[@]} -eq 0 ]
  result $? "$label wrote its lines${miss[*]:+ (missing: ${miss[*]})}"
}
plan=$(section "== 2.")
pl=$(grep -n '^PLAN total expected' "$SCIENCE" | head -n 1 | cut -d: -f1)
p3=$(grep -n '^== 3\.' "$SCIENCE" | head -n 1 | cut -d: -f1)
grep -q '^PLAN part 3' <<< "$plan" && grep -q '^PLAN part 4a' <<< "$plan" && grep -q '^PLAN part 4b' <<< "$plan" &&
  [ -n "$pl" ] && [ -n "$p3" ] && [ "$pl" -lt "$p3" ]
result $? "the plan (parts 3, 4a, 4b and the total) was printed before the runs"
check_part "$P3_DONE" "== 3." "part 3" '^floors on the val windows' '^  sd_noln .*val ' '^  mha_noln .*val ' \
  '^  mha  .*val ' '^routing spectrum of sd_noln' '^layer 0 of sd_noln' '^routing erank of mha_noln' \
  '^  sd_noln   ppl .*K=1' '^  mha_noln  ppl .*K=1'
check_part "$P4_DONE" "== 4a." "part 4a" '^floors on the val windows' '^  sd_noln .*val ' '^  mha_noln .*val ' \
  '^  mha  .*val ' '^  sd_noln   [0-9]' '^  mha       [0-9]'
check_part "$PR_DONE" "== 4b." "part 4b" '^floors on the val windows' '^  uniform seed 1 .*val ' '^  Prism seed 2 .*val ' \
  '^  Prism - uniform' '^  seed 1: ' '^  seed 2: ' '^  mean: '

# host mode: its checkpoints say nothing; make test need not keep them
[ "$HOST" = 1 ] && rm -f "$RUNS"/*/model_*.bin
log "elapsed ${SECONDS}s of a ${BUDGET}s budget"
log "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
