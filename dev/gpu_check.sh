#!/usr/bin/env bash
# dev/gpu_check.sh: everything the CUDA trainer needs checked on a GPU, in one run of < 8 minutes
# (doc/gpu.md records the results).
#
#   bash dev/gpu_check.sh            results in build/gpu_check/ (GPU_CHECK_OUT=dir to change);
#                                    with $OUT set (a results folder that a batch system copies
#                                    back; at most 8 files go there) $OUT/summary.txt grows line by line, so a run killed from
#                                    outside still returns what it found, and the logs come back
#                                    as one $OUT/gpu_check_logs.tar.gz (never the states or data)
#
# Steps, each under its own time limit inside a global budget (GPU_CHECK_BUDGET seconds, 470):
#   1. versions: driver, GPU, CUDA (nvcc), cuDNN (header, library, PyTorch's), NCCL
#   2. libraries: cuDNN from the toolkit or, failing that, PyTorch's site-packages nvidia/cudnn;
#      the cuDNN frontend headers from pip or build/cudnn_frontend/include (make gpu_frontend_copy
#      on a machine that has them, then copy that folder along); without headers the cuDNN path is not built, which is a
#      failure unless GPU_CHECK_NO_CUDNN=1
#   3. build for this GPU: train_gpt2cu, test_gpt2cu, dev/cuda/attention_own, attention_cudnn,
#      attention_flash, sd_fold_check, linear_attention_check
#   4. test_gpt2cu on PyTorch debug states (uniform, Prism, explicit head sizes, head sizes 20 and
#      12 that only the own kernels serve, with parameter tensors at 8-byte offsets; the layer
#      kinds sd/sdlin/lin/mha, S-D without LayerNorm with prescale and decay on S, S-D with
#      explicit sizes, scalar D and +D: test/test_gpt2_cpu.sh's cases kinds, sd_noln, sd_explicit),
#      attention own, auto, flash and mma (Prism, explicit sizes, S-D without LayerNorm), plus -r 2
#      -ge 2, and a model with sharp attention (--qk_scale 10) on auto, own, flash and mma; the same checks
#      run on the CPU through test/host_cuda (make test), so a failure here is the GPU's own
#   5. dev/cuda checks with timings: attention (own, cuDNN, flash, and the register-tile kernels
#      mma, at d <= 64 also with 64-row block tiles: mma_64), the S-D fold and the linear
#      attention, head sizes 8 ... 256, 12, 20; mma / cuDNN at d 64 forward and backward apart
#   6. throughput: d12 uniform vs d12 Prism, B = 16, 64 (GPU_CHECK_BATCHES), T = 1024, random
#      tokens, 6 steps: ms per step and MFU averaged over steps 3-6, tokens/s (llm.c's EMA), the
#      Prism/uniform ratio; then d12 with every layer sd and -ln 0, and every layer lin, at B = 16
#   7. evals on the GPU (with dev/data carried; last, as the least important): train_gpt2cu -h 1
#      -ht hellaswag,lambada on TinyShakespeare (150 steps, Prism + S-D table), one eval_gpt2cu run
#      on the checkpoint compared with eval_gpt2 (CPU fp32) through dev/eval_compare.py, and its
#      first 64 examples with the trainer's step-150 counts
#   8. throughput of d12 uniform and Prism at B = 16 with -attn mma (the register-tile kernels),
#      -attn flash (the shared-memory tiled ones) and -attn own (the materializing ones); a path
#      this GPU cannot run for the schedule prints n/a
#   9. compute-sanitizer (memcheck, racecheck, synccheck) on dev/cuda/attention_mma and
#      attention_flash at d 64 and 128
# Exit status: non-zero if any check failed. The summary ends with "N passed, N failed".
#
# GPU_CHECK_HOST=1 runs the script on a machine without a GPU (make test does, as the suite
# gpu_check_host), so the script itself is known to work before it runs on a GPU: the
# trainer, test and evaluator are test/host_cuda's CPU builds (build/*_host), steps 5, 6 and 8
# (dev/cuda programs, timings) are skipped, step 7 runs 2 steps and 8 examples instead of 150 and
# 64, time limits are 8x and the budget 1500 s. Its numbers say nothing about a GPU.
set -u
cd "$(dirname "$0")/.."
OUTDIR=${GPU_CHECK_OUT:-build/gpu_check}
mkdir -p "$OUTDIR"
SUMMARY=$OUTDIR/summary.txt
: > "$SUMMARY"
# a rerun on a warm machine must not trust the last run's outputs: logs, debug states, eval files
rm -rf "$OUTDIR/states" "$OUTDIR/evalrun"
rm -f "$OUTDIR"/*.log
HOST=${GPU_CHECK_HOST:-0}
if [ "$HOST" = 1 ]; then BUDGET=${GPU_CHECK_BUDGET:-1500}; else BUDGET=${GPU_CHECK_BUDGET:-470}; fi
DEADLINE=$((SECONDS + BUDGET))
PY=${PYTHON:-python3}
if [ "$HOST" = 1 ]; then
  TRAINCU=./build/train_gpt2cu_host TESTCU=./build/test_gpt2cu_host EVALCU=./build/eval_gpt2cu_host
  EVAL_STEPS=2 EVAL_N=8 EVAL_CMP_N=16
else
  TRAINCU=./train_gpt2cu TESTCU=./test_gpt2cu EVALCU=./eval_gpt2cu
  EVAL_STEPS=150 EVAL_N=64 EVAL_CMP_N=200
fi
PASSED=0
FAILED=0

OUT_SUMMARY=
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then OUT_SUMMARY=$OUT/summary.txt; : > "$OUT_SUMMARY"; fi
sumtee() { if [ -n "$OUT_SUMMARY" ]; then tee -a "$SUMMARY" "$OUT_SUMMARY"; else tee -a "$SUMMARY"; fi; }
log() { echo "$*" | sumtee; }
copy_logs_out() {  # on any exit: the logs as one archive (the summary is already there)
  [ -n "$OUT_SUMMARY" ] || return 0
  (cd "$OUTDIR" && tar -czf "$OUT/gpu_check_logs.tar.gz" $(ls *.log 2>/dev/null)) 2>/dev/null || true
}
trap copy_logs_out EXIT
trap 'exit 143' TERM INT
left() { echo $((DEADLINE - SECONDS)); }
result() {  # ok(0|1) message
  if [ "$1" -eq 0 ]; then PASSED=$((PASSED + 1)); log "PASS $2"; else FAILED=$((FAILED + 1)); log "FAIL $2"; fi
}
# the "N passed, N failed" line of a log, else its last line (an error)
summary_of() {
  local sline
  sline=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" 2>/dev/null | tail -n 1)
  [ -n "$sline" ] && echo "$sline" || tail -n 1 "$1" 2>/dev/null
}
# run NAME SECONDS CMD...: output to $OUTDIR/NAME.log (removed first: no stale log is ever read);
# never past the deadline
run() {
  local name=$1 limit=$2
  shift 2
  [ "$HOST" = 1 ] && limit=$((limit * 8)) # the CPU builds are far slower than a GPU
  local l
  l=$(left)
  [ "$limit" -gt "$l" ] && limit=$l
  rm -f "$OUTDIR/$name.log"
  if [ "$limit" -le 5 ]; then
    log "NOT RUN $name: the time budget is spent"
    return 124  # every caller passes the status to result(), which counts the failure once
  fi
  timeout "$limit" "$@" > "$OUTDIR/$name.log" 2>&1
}

# ---------------------------------------------------------------------------------------------
log "== 1. versions ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | sumtee
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
log "nvcc: $($NVCC --version 2>&1 | tail -n 2 | tr '\n' ' ')"
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$NVCC")")}
SITE=$(timeout 60 "$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" 2>/dev/null || true)
TORCH_INFO=$(timeout 90 "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())" 2>&1 | tail -n 1)
log "python: $PY; $TORCH_INFO"
cudnn_header_version() {  # include dir
  local h=$1/cudnn_version.h
  [ -f "$h" ] || return 1
  awk '/define CUDNN_MAJOR /{a=$3} /define CUDNN_MINOR /{b=$3} /define CUDNN_PATCHLEVEL /{c=$3} END{print a"."b"."c}' "$h"
}

# ---------------------------------------------------------------------------------------------
log "== 2. libraries"
if [ -f "$CUDA_HOME/include/cudnn.h" ]; then
  CUDNN_HOME=$CUDA_HOME
elif [ -f /usr/include/cudnn.h ]; then
  CUDNN_HOME=/usr
elif [ -n "$SITE" ] && [ -f "$SITE/nvidia/cudnn/include/cudnn.h" ]; then
  CUDNN_HOME=$SITE/nvidia/cudnn
else
  CUDNN_HOME=
fi
if [ -n "$CUDNN_HOME" ]; then
  log "cuDNN: $(cudnn_header_version "$CUDNN_HOME/include") headers in $CUDNN_HOME"
  for d in "$CUDNN_HOME/lib" "$CUDNN_HOME/lib64"; do [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"; done
else
  log "cuDNN: not found (toolkit, /usr, $SITE/nvidia/cudnn)"
fi
if [ -n "$SITE" ] && [ -d "$SITE/nvidia/nccl/lib" ] && [ ! -f "$CUDA_HOME/include/nccl.h" ]; then
  export LD_LIBRARY_PATH="$SITE/nvidia/nccl/lib:${LD_LIBRARY_PATH:-}"
fi
FRONTEND=${CUDNN_FRONTEND_PATH:-}
if [ -z "$FRONTEND" ]; then
  loc=$(timeout 60 "$PY" -m pip show nvidia-cudnn-frontend 2>/dev/null | sed -n 's/^Location: //p')
  if [ -n "$loc" ] && [ -f "$loc/include/cudnn_frontend.h" ]; then FRONTEND=$loc/include
  elif [ -f build/cudnn_frontend/include/cudnn_frontend.h ]; then FRONTEND=$PWD/build/cudnn_frontend/include
  fi
fi
USE_CUDNN=0
if [ -n "$CUDNN_HOME" ] && [ -n "$FRONTEND" ]; then
  USE_CUDNN=1
  log "cuDNN frontend: $(grep -h 'define CUDNN_FRONTEND_\(MAJOR\|MINOR\|PATCH\)_VERSION' "$FRONTEND/cudnn_frontend_version.h" 2>/dev/null | awk '{printf "%s.", $3}' | sed 's/\.$//') in $FRONTEND"
else
  # cuDNN is the default path on this GPU: a run that never builds it has not checked the trainer
  # users will run, so it fails unless GPU_CHECK_NO_CUDNN=1 says that is intended
  why="cuDNN: ${CUDNN_HOME:-missing}, frontend headers: ${FRONTEND:-missing}"
  if [ "$HOST" = 1 ]; then log "host mode: no cuDNN needed ($why)"
  elif [ "${GPU_CHECK_NO_CUDNN:-0}" = 1 ]; then log "cuDNN path not built ($why; GPU_CHECK_NO_CUDNN=1): own kernels only"
  else result 1 "cuDNN path built ($why; copy the frontend headers to build/cudnn_frontend, doc/gpu.md): own kernels only"; fi
fi
if [ "$HOST" = 1 ] && [ "$USE_CUDNN" = 1 ]; then USE_CUDNN=0; log "host mode: the CPU builds have no cuDNN path"; fi
CC_GPU=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')
[ -n "$CC_GPU" ] || CC_GPU=90
MAKEVARS=(GPU_COMPUTE_CAPABILITY="$CC_GPU" USE_CUDNN=$USE_CUDNN PYTHON="$PY")
[ -n "$CUDNN_HOME" ] && MAKEVARS+=(CUDNN_HOME="$CUDNN_HOME")
[ -n "$FRONTEND" ] && MAKEVARS+=(CUDNN_FRONTEND_PATH="$FRONTEND")
# one process on this machine: a single-GPU build needs neither NCCL nor MPI to be present
MAKEVARS+=(NO_MULTI_GPU=1)

# ---------------------------------------------------------------------------------------------
# the PyTorch debug states of step 4 are written on the CPU while step 3 compiles
ST=$OUTDIR/states
mkdir -p "$ST"
printf '1 2 4*2\n' > "$ST/prism.txt"          # head sizes 64, 32, 16
printf '1x96 2x48 4x16*2\n' > "$ST/explicit.txt"
# 20 and 12: own kernels only; 3 x 12 = 36 makes sum_l 3 A_l = 612 not a multiple of 8, so every
# parameter tensor after qkvb is only 8-byte aligned (LayerNorm loads, unfused bias, cuBLASLt)
printf '2x20 3x12 4x16*2\n' > "$ST/odd.txt"
# the layer kinds: the same tables and options as test/test_gpt2_cpu.sh's cases
printf '4:sd 4:sdlin 4:lin 4\n' > "$ST/kinds.txt"
printf '4:sd*2 4:sdlin 4:lin\n' > "$ST/sd_noln.txt"
printf '2x24:sd 2x24:sd 4x8:sdlin 4x16\n' > "$ST/sd_explicit.txt"
printf '2 4:sd 4:lin 4\n' > "$ST/sharp.txt"   # with --qk_scale: attention far from uniform
VAL=dev/data/tinyshakespeare/tiny_shakespeare_val.bin
[ -f "$VAL" ] && VALARG="--data $VAL" || VALARG=
state() {  # name, extra args; never past the deadline (timeout 0 would mean no limit)
  local l
  l=$(left)
  [ "$l" -gt 200 ] && l=200
  [ "$l" -lt 1 ] && l=1
  timeout "$l" "$PY" train_gpt2.py --model tiny $2 --write_model "$ST/$1.bin" --debug_state "$ST/${1}_state.bin" \
    > "$OUTDIR/state_$1.log" 2>&1
}
STATE_NAMES=(uniform prism explicit odd kinds sd_noln sd_explicit sharp)
( state uniform "--B 4 --T 32"; state prism "--prism $ST/prism.txt --B 2 --T 64"
  state explicit "--prism $ST/explicit.txt --B 4 --T 32"; state odd "--prism $ST/odd.txt --B 4 --T 32"
  state kinds "--prism $ST/kinds.txt --B 4 --T 32"
  state sd_noln "--prism $ST/sd_noln.txt --ln 0 --lin_prescale 1 --sd_init_s 0.5 --sd_init_u 0.3 --sd_decay_s 1 --B 2 --T 64 $VALARG"
  state sd_explicit "--prism $ST/sd_explicit.txt --sd_scalar_d 1 --sd_sign 1 --sd_init_theta 0.5 --B 4 --T 32"
  state sharp "--prism $ST/sharp.txt --qk_scale 10 --sd_init_u 0.2 --B 2 --T 64 $VALARG" ) &
STATES_PID=$!

log "== 3. build for sm_$CC_GPU (USE_CUDNN=$USE_CUDNN)"
TARGETS=(train_gpt2cu test_gpt2cu eval_gpt2cu eval_gpt2 dev/cuda/attention_own dev/cuda/attention_flash
         dev/cuda/attention_mma dev/cuda/sd_fold_check dev/cuda/linear_attention_check)
[ "$USE_CUDNN" = 1 ] && TARGETS+=(dev/cuda/attention_cudnn)
[ "$HOST" = 1 ] && TARGETS=(build/train_gpt2cu_host build/test_gpt2cu_host build/eval_gpt2cu_host eval_gpt2)
run build 240 make -j "$(nproc)" "${MAKEVARS[@]}" "${TARGETS[@]}"
rc=$?
result $rc "build: ${TARGETS[*]} (log $OUTDIR/build.log)"
grep -E "warning|error" "$OUTDIR/build.log" | head -n 5 | sumtee
if [ $rc -ne 0 ] && [ "$USE_CUDNN" = 1 ]; then
  log "retrying without cuDNN so that the own kernels still get checked"
  USE_CUDNN=0
  MAKEVARS[1]=USE_CUDNN=0
  TARGETS=(train_gpt2cu test_gpt2cu eval_gpt2cu eval_gpt2 dev/cuda/attention_own dev/cuda/attention_flash
           dev/cuda/attention_mma dev/cuda/sd_fold_check dev/cuda/linear_attention_check)
  rm -f dev/cuda/attention_cudnn
  run build_nocudnn 180 make -j "$(nproc)" "${MAKEVARS[@]}" "${TARGETS[@]}"
  result $? "build without cuDNN (log $OUTDIR/build_nocudnn.log)"
fi

# ---------------------------------------------------------------------------------------------
log "== 4. test_gpt2cu vs PyTorch debug states (written during the build)"
wait "$STATES_PID"
for n in "${STATE_NAMES[@]}"; do
  [ -f "$ST/${n}_state.bin" ]
  result $? "debug state $n (train_gpt2.py; log state_$n.log)"
done
tg() {  # state, attn, extra flags
  local extra=${3:-}
  local tag=$1_$2${extra:+_r2}
  if [ ! -f "$ST/$1_state.bin" ]; then result 1 "test_gpt2cu $tag: no debug state (see $OUTDIR/state_$1.log)"; return; fi
  run "test_gpt2cu_$tag" 60 "$TESTCU" "$ST/$1.bin" "$ST/$1_state.bin" -attn "$2" $extra
  local rc=$?
  result $rc "test_gpt2cu $tag: $(summary_of "$OUTDIR/test_gpt2cu_$tag.log") (log test_gpt2cu_$tag.log)"
  grep '^FAIL' "$OUTDIR/test_gpt2cu_$tag.log" | head -n 5 | sed 's/^/    /' | sumtee
  # -attn auto serves a layer whose cuDNN graphs the backend refuses with the own kernels: here
  # that would leave the cuDNN path untested, so it counts as a failure
  # the uniform model's head size (16) is one cuDNN serves: with cuDNN built, auto must choose it
  if [ "$1_$2" = uniform_auto ] && [ "$USE_CUDNN" = 1 ]; then
    grep -q -- '-> cudnn' "$OUTDIR/test_gpt2cu_$tag.log"
    result $? "test_gpt2cu $tag: -attn auto put the layers on cuDNN (the printed path table)"
  fi
  if grep -q 'attn auto runs it on the own kernels' "$OUTDIR/test_gpt2cu_$tag.log"; then
    result 1 "test_gpt2cu $tag: cuDNN refused a layer's graphs (see the warning in the log)"
    grep '^warning: layer' "$OUTDIR/test_gpt2cu_$tag.log" | head -n 3 | sed 's/^/    /' | sumtee
  fi
}
tg uniform own
tg uniform auto
tg prism auto
tg explicit auto
tg odd auto     # layers 0-1 own (d 20, 12), layers 2-3 cuDNN
tg prism own "-r 2 -ge 2"
tg kinds auto   # sd and mha on cuDNN (d 16), sdlin and lin on the linear scan
tg kinds own    # sd on the own softmax kernels
tg sd_noln auto
tg sd_noln own "-r 2 -ge 2"
tg sd_explicit auto
tg prism flash  # the own tiled kernels (-attn flash): d 64, 32, 16
tg explicit flash   # d 96, 48, 16
tg sd_noln flash "-r 2 -ge 2"
tg prism mma    # the register-tile kernels (-attn mma): d 64, 32, 16
tg explicit mma     # d 96, 48, 16
tg sd_noln mma "-r 2 -ge 2"
# sharp attention (scores ~1 instead of ~0.03): a layer that reads another layer's saved
# probabilities or logsumexp fails here, not at the near-uniform init (test/host_cuda measured it)
tg sharp auto
tg sharp own
tg sharp flash "-r 1 -ge 1"
tg sharp mma

# ---------------------------------------------------------------------------------------------
log "== 5. dev/cuda checks: attention, S-D fold, linear attention (head sizes 8 16 32 64 128 256 12 20)"
[ "$HOST" = 1 ] && log "host mode: skipped (the dev/cuda programs need a GPU)"
for p in attention_own attention_cudnn attention_flash attention_mma sd_fold_check linear_attention_check; do
  [ "$HOST" = 1 ] && break
  [ -x "dev/cuda/$p" ] || { [ "$p" = attention_cudnn ] && [ "$USE_CUDNN" = 0 ] && continue; result 1 "$p: not built"; continue; }
  run "$p" 120 "./dev/cuda/$p"
  rc=$?
  result $rc "$p: $(summary_of "$OUTDIR/$p.log")"
  grep -E '^(FAIL|n/a)' "$OUTDIR/$p.log" | sed 's/^/    /' | sumtee
done
log "time per call (B 16, T 1024, C 768; sdfold: generator + K' forward, fold backward + dL + dS backward; mma: bwd 0 where this GPU cannot train that d):"
log "  path     d  heads  fwd ms  bwd ms"
cat "$OUTDIR"/attention_*.log "$OUTDIR"/sd_fold_check.log "$OUTDIR"/linear_attention_check.log 2>/dev/null |
  awk '/^TIME/{printf "  %-7s %3d %5d %7.3f %7.3f\n", $3, $5, $11, $13, $15}' | sumtee
own64=$(awk '/^TIME path own d 64 /{print $13 + $15}' "$OUTDIR/attention_own.log" 2>/dev/null)
cud64=$(awk '/^TIME path cudnn d 64 /{print $13 + $15}' "$OUTDIR/attention_cudnn.log" 2>/dev/null)
lin64=$(awk '/^TIME path linear d 64 /{print $13 + $15}' "$OUTDIR/linear_attention_check.log" 2>/dev/null)
fla64=$(awk '/^TIME path flash d 64 /{print $13 + $15}' "$OUTDIR/attention_flash.log" 2>/dev/null)
if [ -n "$own64" ] && [ -n "$cud64" ]; then
  log "own / cuDNN time at d = 64 (fwd + bwd): $(awk -v a="$own64" -v b="$cud64" 'BEGIN{printf "%.2f", a / b}') (target <= 2)"
fi
if [ -n "$fla64" ] && [ -n "$cud64" ]; then
  log "flash / cuDNN time at d = 64 (fwd + bwd): $(awk -v a="$fla64" -v b="$cud64" 'BEGIN{printf "%.2f", a / b}') (target <= 2 once the trainer uses it)"
fi
mma64=$(awk '/^TIME path mma d 64 /{print $13 + $15}' "$OUTDIR/attention_mma.log" 2>/dev/null)
if [ -n "$mma64" ] && [ -n "$cud64" ]; then
  log "register-tile (mma) / cuDNN time at d = 64 (fwd + bwd): $(awk -v a="$mma64" -v b="$cud64" 'BEGIN{printf "%.2f", a / b}') (target <= 2 once the trainer uses it)"
fi
# where the time goes: forward and backward apart, and the block tiles of 128 rows (two 16-row
# groups per warp, the default at d 64) against 64 (path mma_64), both measured in this run
mmaf=$(awk '/^TIME path mma d 64 /{print $13}' "$OUTDIR/attention_mma.log" 2>/dev/null)
mmab=$(awk '/^TIME path mma d 64 /{print $15}' "$OUTDIR/attention_mma.log" 2>/dev/null)
cudf=$(awk '/^TIME path cudnn d 64 /{print $13}' "$OUTDIR/attention_cudnn.log" 2>/dev/null)
cudb=$(awk '/^TIME path cudnn d 64 /{print $15}' "$OUTDIR/attention_cudnn.log" 2>/dev/null)
if [ -n "$mmaf" ] && [ -n "$cudf" ]; then
  log "register-tile (mma) / cuDNN at d = 64: forward $(awk -v a="$mmaf" -v b="$cudf" 'BEGIN{printf "%.2f", a / b}'), backward $(awk -v a="$mmab" -v b="$cudb" 'BEGIN{printf "%.2f", b > 0 ? a / b : 0}')"
fi
q64f=$(awk '/^TIME path mma_64 d 64 /{print $13}' "$OUTDIR/attention_mma.log" 2>/dev/null)
q64b=$(awk '/^TIME path mma_64 d 64 /{print $15}' "$OUTDIR/attention_mma.log" 2>/dev/null)
if [ -n "$mmaf" ] && [ -n "$q64f" ]; then
  log "register-tile block tiles of 128 / 64 rows at d = 64 (time): forward $(awk -v a="$mmaf" -v b="$q64f" 'BEGIN{printf "%.2f", a / b}'), backward $(awk -v a="$mmab" -v b="$q64b" 'BEGIN{printf "%.2f", b > 0 ? a / b : 0}') (below 1: the 128-row default is faster)"
fi
if [ -n "$mma64" ] && [ -n "$fla64" ]; then
  log "register-tile (mma) / flash time at d = 64 (fwd + bwd): $(awk -v a="$mma64" -v b="$fla64" 'BEGIN{printf "%.2f", a / b}')"
fi
if [ -n "$fla64" ] && [ -n "$own64" ]; then
  log "flash / own time at d = 64 (fwd + bwd): $(awk -v a="$fla64" -v b="$own64" 'BEGIN{printf "%.2f", a / b}')"
fi
if [ -n "$lin64" ] && [ -n "$cud64" ]; then
  log "linear / cuDNN softmax time at d = 64, T = 1024 (fwd + bwd): $(awk -v a="$lin64" -v b="$cud64" 'BEGIN{printf "%.2f", a / b}')"
fi

# ---------------------------------------------------------------------------------------------
log "== 6. throughput: d12 uniform vs d12 Prism (prism/schedules/d12_prism.txt), T 1024, random tokens"
if [ "$HOST" = 1 ]; then log "host mode: skipped (timings of the CPU builds mean nothing)"; else
DATA=$OUTDIR/data
mkdir -p "$DATA"
"$PY" - "$DATA" <<'EOF' > "$OUTDIR/data.log" 2>&1
import struct, sys, random
out = sys.argv[1]
rng = random.Random(1337)
for name, n in (("rand_train_000000.bin", 4 * 1024 * 1024), ("rand_val_000000.bin", 80 * 1024)):
    with open(f"{out}/{name}", "wb") as f:
        f.write(struct.pack("<256i", *([20240520, 1, n] + [0] * 253)))
        f.write(struct.pack(f"<{n}H", *(rng.randrange(50257) for _ in range(n))))
EOF
result $? "random token shards (4M train, 80K val tokens)"
STEPS=6
# bench NAME B ARGS...: sets BENCH to "ms tok/s mfu" from the step lines after the first two, or
# "- - -" when the run did not finish (exit status, cut by the budget, no step lines). Not called
# in $(...): run's NOT RUN line and the result counts must reach the summary.
BENCH_ATTN=auto
bench() {
  local name=$1 B=$2 rc
  shift 2
  run "bench_${name}_B$B" 100 ./train_gpt2cu -e d12 "$@" -i "$DATA/rand_train_*.bin" -j "$DATA/rand_val_*.bin" \
    -b "$B" -t 1024 -x $STEPS -v 0 -m 1 -s 0 -l 6e-4 -u 2 -c 0.1 -attn "$BENCH_ATTN"
  rc=$?
  BENCH=
  [ $rc -eq 0 ] && BENCH=$(awk '/^step /{n++; if (n > 2) {for (i = 1; i <= NF; i++) {if ($i == "ms") ms += $(i - 1); if ($i == "bf16") {m = $(i - 1); sub("%", "", m); mfu += m}; if ($i == "tok/s") tok = $(i - 1)}; k++}}
       END{if (k > 0) printf "%.1f %.0f %.1f%%\n", ms / k, tok, mfu / k}' < "$OUTDIR/bench_${name}_B$B.log" 2>/dev/null)
  [ -n "$BENCH" ] || BENCH="- - -"
}
log "    B | uniform ms  tok/s    MFU | Prism ms   tok/s    MFU | Prism/uniform tok/s"
for B in ${GPU_CHECK_BATCHES:-16 64}; do
  bench uniform "$B"
  read -r ums utok umfu <<< "$BENCH"
  bench prism "$B" -prism prism/schedules/d12_prism.txt
  read -r pms ptok pmfu <<< "$BENCH"
  ratio=$(awk -v a="$ptok" -v b="$utok" 'BEGIN{if (b > 0 && a > 0) printf "%.3f", a / b; else print "-"}')
  line=$(printf "  %3d | %8s %8s %6s | %8s %8s %6s | %s" "$B" "$ums" "$utok" "$umfu" "$pms" "$ptok" "$pmfu" "$ratio")
  log "$line"
  [ "$utok" != "-" ] && [ "$ptok" != "-" ]
  result $? "throughput B $B: both runs finished their $STEPS steps (logs bench_*_B$B.log)"
done
grep -h "^attention:" "$OUTDIR"/bench_prism_B16.log 2>/dev/null | sed 's/^/    /' | sumtee
# the new layer kinds at B 16: every layer S-D without LayerNorm, every layer linear
printf '12:sd*12\n' > "$OUTDIR/d12_sd.txt"
printf '12:lin*12\n' > "$OUTDIR/d12_lin.txt"
log "    kind          | ms      tok/s    MFU  (B 16; MFU counts each kind's own FLOPs, llmc/cuda/mfu.h)"
for k in sd lin; do
  label=$k
  extra=(-prism "$OUTDIR/d12_$k.txt")
  if [ "$k" = sd ]; then extra+=(-ln 0); label="sd -ln 0"; fi
  bench "$k" 16 "${extra[@]}"
  read -r kms ktok kmfu <<< "$BENCH"
  log "$(printf "    d12 %-9s | %8s %8s %6s" "$label" "$kms" "$ktok" "$kmfu")"
  [ "$ktok" != "-" ]
  result $? "throughput d12 $k B 16 finished $STEPS steps (log bench_${k}_B16.log)"
done
fi

# ---------------------------------------------------------------------------------------------
# correct answers among the first N examples of TASK in a -scores TSV, by eval_gpt2cu's rules
# (dev/eval_compare.py first_correct); empty when the file has fewer examples
first_correct() {  # tsv task n
  "$PY" -c 'import sys; from dev.eval_compare import first_correct as f
r = f(sys.argv[1], sys.argv[2], int(sys.argv[3])); print("" if r is None else r)' "$@" 2>/dev/null
}
log "== 7. evals on the GPU: a short TinyShakespeare run with -h 1 -ht hellaswag,lambada, then eval_gpt2cu vs eval_gpt2"
TS=dev/data/tinyshakespeare
EV=$OUTDIR/evalrun
if [ -f "$TS/tiny_shakespeare_train.bin" ] && [ -f dev/data/hellaswag/hellaswag_val.bin ] &&
   [ -f dev/data/lambada/lambada_test.bin ]; then
  mkdir -p "$EV"
  printf '2 4:sd 4 4\n' > "$EV/table.txt"   # head sizes 64, 32 (S-D), 32, 32
  # 150 steps (host mode: 2); the last step's eval scores the parameters its checkpoint holds
  run eval_train 60 "$TRAINCU" -e L4C128H4T256 -prism "$EV/table.txt" -i "$TS/tiny_shakespeare_train.bin" \
    -j "$TS/tiny_shakespeare_val.bin" -b 8 -t 256 -x $EVAL_STEPS -l 1e-3 -u 10 -v $EVAL_STEPS -s 0 -n $EVAL_STEPS -h 1 \
    -ht hellaswag,lambada -hn $EVAL_N -o "$EV/run"
  result $? "train_gpt2cu $EVAL_STEPS steps with -h 1 -ht hellaswag,lambada -hn $EVAL_N (log eval_train.log)"
  ck=$EV/run/model_$(printf '%08d' "$EVAL_STEPS").bin
  if [ -f "$ck" ]; then
    # one eval_gpt2cu run serves both comparisons: its -scores rows of the first EVAL_N examples
    # are what a -n EVAL_N run would score (the same chunk, the same batches and shapes)
    run eval_gpt2cu 60 "$EVALCU" -e "$ck" -tasks hellaswag,lambada -n $EVAL_CMP_N -b 8 -t 256 -scores "$EV/gpu.tsv" -json "$EV/gpu.json"
    result $? "eval_gpt2cu -tasks hellaswag,lambada -n $EVAL_CMP_N (log eval_gpt2cu.log)"
    grep '^|' "$OUTDIR/eval_gpt2cu.log" | sed 's/^/    /' | sumtee
    run eval_gpt2 90 env OMP_NUM_THREADS="$(nproc)" ./eval_gpt2 -e "$ck" -tasks hellaswag,lambada -n $EVAL_CMP_N -b 8 -t 256 -scores "$EV/cpu.tsv"
    result $? "eval_gpt2 (CPU fp32 reference) on the same checkpoint (log eval_gpt2.log)"
    grep '^|' "$OUTDIR/eval_gpt2.log" | sed 's/^/    /' | sumtee
    run eval_compare 30 "$PY" dev/eval_compare.py "$EV/cpu.tsv" "$EV/gpu.tsv"
    result $? "eval_compare CPU fp32 vs GPU bf16: $(summary_of "$OUTDIR/eval_compare.log") (log eval_compare.log)"
    sed 's/^/    /' "$OUTDIR/eval_compare.log" | grep -E 'worst|hits|predictions' | sumtee
    # the trainer's own last-step counts against eval_gpt2cu's on the first EVAL_N examples: equal only
    # where both ran every layer on the same path (an inference-only model may put a layer on
    # cuDNN that the trainer keeps on the own kernels, e.g. d 129-256 on SM 8.x)
    if ! cmp -s <(grep '^attention: ' "$OUTDIR/eval_train.log") <(grep '^attention: ' "$OUTDIR/eval_gpt2cu.log"); then
      log "SKIP in-training counts = eval_gpt2cu: the two printed different attention path tables (see both logs)"
    else
    for t in hellaswag lambada; do
      name=$t; [ $t = hellaswag ] && name=HellaSwag
      k=$(grep -E "^$name: [0-9]+/$EVAL_N = " "$OUTDIR/eval_train.log" | tail -n 1 | sed -E 's/^[^:]*: ([0-9]+)\/.*/\1/')
      e=$(first_correct "$EV/gpu.tsv" $t "$EVAL_N")
      [ -n "$k" ] && [ "$k" = "$e" ]
      result $? "in-training $t at step $EVAL_STEPS: ${k:-?}/$EVAL_N = eval_gpt2cu on $(basename "$ck") ${e:-?}/$EVAL_N"
    done
    fi
  else
    result 1 "no checkpoint $ck (see eval_train.log)"
  fi
else
  # host mode runs in make test, where a missing dependency is a failure (make data evals)
  if [ "$HOST" = 1 ]; then result 1 "step 7: TinyShakespeare or the eval files missing under dev/data (make data evals)"
  else log "skipped: copy dev/data (TinyShakespeare and the eval files; doc/gpu.md) along to run it"; fi
fi

# ---------------------------------------------------------------------------------------------
# last, as the least important: the trainer on the project's own attention kernels, the
# register-tile ones (-attn mma), the shared-memory tiled ones (-attn flash) and the materializing
# ones (-attn own), to set against cuDNN (step 6)
log "== 8. throughput with -attn mma, flash and own (B 16; compare with the auto rows of step 6)"
if [ "$HOST" = 1 ]; then log "host mode: skipped"; else
for BENCH_ATTN in mma flash own; do
  for k in uniform prism; do
    extra=()
    [ "$k" = prism ] && extra=(-prism prism/schedules/d12_prism.txt)
    bench "${k}_$BENCH_ATTN" 16 "${extra[@]}"
    read -r kms ktok kmfu <<< "$BENCH"
    # a path refused by its rules on this GPU (e.g. -attn mma training d 256 with 99 KB of shared
    # memory per block) is n/a, not a failure: the trainer's one-line error says which layer and why
    if [ "$ktok" = "-" ] && grep -q "^error: -attn $BENCH_ATTN: layer" "$OUTDIR/bench_${k}_${BENCH_ATTN}_B16.log" 2>/dev/null; then
      log "$(printf "    d12 %-13s | n/a: %s" "$k $BENCH_ATTN" "$(grep -m1 "^error: -attn" "$OUTDIR/bench_${k}_${BENCH_ATTN}_B16.log")")"
      continue
    fi
    log "$(printf "    d12 %-13s | %8s %8s %6s" "$k $BENCH_ATTN" "$kms" "$ktok" "$kmfu")"
    [ "$ktok" != "-" ]
    result $? "throughput d12 $k -attn $BENCH_ATTN B 16 finished $STEPS steps (log bench_${k}_${BENCH_ATTN}_B16.log)"
  done
done
fi

# ---------------------------------------------------------------------------------------------
# last: compute-sanitizer on the project's own tiled kernels in the small dev/cuda checks (B 2,
# T 127, h 2; no cuDNN or cuBLAS kernel runs there, so every report is ours). memcheck: out of
# bounds and misaligned accesses; racecheck: shared-memory hazards between the phases of a block;
# synccheck: barriers not reached by every thread. (initcheck is left out: it does not track
# cuBLASLt's TMA stores, doc/gpu.md "GPU results".)
log "== 9. compute-sanitizer on the register-tile and flash kernels (dev/cuda, d 64 and 128)"
if [ "$HOST" = 1 ]; then log "host mode: skipped"; else
CS=$(command -v compute-sanitizer || echo "$CUDA_HOME/bin/compute-sanitizer")
if [ ! -x "$CS" ]; then result 1 "compute-sanitizer not found (PATH, $CUDA_HOME/bin)"; else
for p in attention_mma attention_flash; do
  [ -x "dev/cuda/$p" ] || continue
  for tool in memcheck racecheck synccheck; do
    for d in 64 128; do
      run "cs_${tool}_${p}_$d" 60 "$CS" --tool "$tool" --error-exitcode 9 "./dev/cuda/$p" -d "$d" -time 0
      rc=$?
      sline=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUTDIR/cs_${tool}_${p}_$d.log" | tail -n 1 | sed 's/^=* *//')
      result $rc "$tool $p d $d: ${sline:-no summary} (log cs_${tool}_${p}_$d.log)"
      [ $rc -eq 0 ] || grep -m 3 -E '^========= (Invalid|Race|Barrier|Error)' "$OUTDIR/cs_${tool}_${p}_$d.log" | sed 's/^/    /' | sumtee
    done
  done
done
fi
fi

log "elapsed ${SECONDS}s of a ${BUDGET}s budget"
log "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
