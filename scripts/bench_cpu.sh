#!/usr/bin/env bash
# scripts/bench_cpu.sh: CPU trainer throughput measured side by side: the arms alternate (A B A B
# ...) so that drift of the machine hits every arm alike, and the result is a ratio, not an
# absolute time.
#
#   bash scripts/bench_cpu.sh [MODEL UNIFORM_SCHEDULE PRISM_SCHEDULE [B T STEPS ROUNDS]]
#       uniform vs Prism of the same shape; default: L8C256H4T256 with
#       prism/schedules/L8C256_{uniform,prism}.txt, B 4, T 256, 8 steps, 3 rounds
#   bash scripts/bench_cpu.sh --blas [CORETYPE ...]
#       the default build vs the BLAS build (build/blas/train_gpt2) on make train's model (the
#       Prism L8C256H4T256, B 4, T 256, 8 steps, 3 rounds): OpenBLAS with the kernel set it picks
#       itself, then with each OPENBLAS_CORETYPE named (e.g. SkylakeX Haswell)
#   bash scripts/bench_cpu.sh --rows [STEPS ROUNDS]
#       llm.c's batches (-rows 0) vs independent rows (-rows 1, doc/formats.md "DataLoader semantics") on the byte
#       preset (L4C128H4T256V256, B 16, T 256, the prose bytes of make prose_bytes), with the BLAS
#       build when it is built; default 8 steps, 3 rounds
#
# Each run's "total average iteration time" (first step excluded) is one sample; the script prints
# every sample, the median per arm, tokens/s, and each arm's tokens/s over the first arm's.
set -euo pipefail
cd "$(dirname "$0")/.."
BLAS_CORES=()
BLAS=0
ROWS=0
case "${1:-}" in
  --help|-h) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  --blas) BLAS=1; shift; BLAS_CORES=("$@"); set -- ;;
  --rows) ROWS=1; shift; set -- L4C128H4T256V256 "" "" 16 256 "${1:-8}" "${2:-3}" ;;
  -*) echo "error: $1: unknown flag (see --help)" >&2; exit 1 ;;
esac
for c in "${BLAS_CORES[@]}"; do
  [[ "$c" =~ ^[A-Za-z0-9]+$ ]] || { echo "error: OPENBLAS_CORETYPE '$c': expected a kernel set name such as SkylakeX" >&2; exit 1; }
done
MODEL=${1:-L8C256H4T256}
UNI=${2:-prism/schedules/L8C256_uniform.txt}
PRI=${3:-prism/schedules/L8C256_prism.txt}
B=${4:-4}
T=${5:-256}
STEPS=${6:-8}
ROUNDS=${7:-3}
TS=dev/data/tinyshakespeare
TRAIN=$TS/tiny_shakespeare_train.bin VAL=$TS/tiny_shakespeare_val.bin
need=(train_gpt2 "$TRAIN" "$UNI" "$PRI")
hint="make train_gpt2 data"
if [ "$BLAS" = 1 ]; then need+=(build/blas/train_gpt2); hint="make train_gpt2 data build/blas/train_gpt2"; fi
if [ "$ROWS" = 1 ]; then
  TRAIN='dev/data/prose_bytes/prose_bytes_train_*.bin' VAL='dev/data/prose_bytes/prose_bytes_val_*.bin'
  UNI=build/bench_rows_table.txt PRI=$UNI
  mkdir -p build && printf '4*4\n' > "$UNI"
  need=(train_gpt2 dev/data/prose_bytes/prose_bytes_val_000000.bin); hint="make train_gpt2 prose_bytes"
fi
for f in "${need[@]}"; do
  [ -e "$f" ] || { echo "error: $f is missing (run $hint)" >&2; exit 1; }
done
for v in B T STEPS ROUNDS; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "error: $v '${!v}': expected a positive integer" >&2; exit 1; }
done
# The arms: a label, the trainer, the schedule, OPENBLAS_CORETYPE ("" = the library's own pick),
# the loader's -rows.
ROWSOF=(0 0)
if [ "$ROWS" = 1 ]; then
  bin=./train_gpt2; [ -x build/blas/train_gpt2 ] && bin=build/blas/train_gpt2
  LABEL=(spans rows); BIN=("$bin" "$bin"); SCHED=("$UNI" "$UNI"); CORE=("" ""); ROWSOF=(0 1)
elif [ "$BLAS" = 0 ]; then
  LABEL=(uniform prism); BIN=(./train_gpt2 ./train_gpt2); SCHED=("$UNI" "$PRI"); CORE=("" "")
else
  LABEL=(default blas); BIN=(./train_gpt2 build/blas/train_gpt2); SCHED=("$PRI" "$PRI"); CORE=("" "")
  for c in "${BLAS_CORES[@]}"; do LABEL+=("blas:$c"); BIN+=(build/blas/train_gpt2); SCHED+=("$PRI"); CORE+=("$c"); ROWSOF+=(0); done
fi
echo "model $MODEL, B $B, T $T, $STEPS steps per run, $ROUNDS rounds, OMP_NUM_THREADS=${OMP_NUM_THREADS:-all} on $(nproc) cores"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run() {  # arm index, round -> ms per step; a failed run stops the script with the trainer's own error
  local k=$1 e=(-u OPENBLAS_CORETYPE)
  [ -z "${CORE[$k]}" ] || e=("OPENBLAS_CORETYPE=${CORE[$k]}")
  if ! env "${e[@]}" "${BIN[$k]}" -e "$MODEL" -prism "${SCHED[$k]}" -i "$TRAIN" -j "$VAL" -rows "${ROWSOF[$k]}" \
      -b "$B" -t "$T" -x "$STEPS" -v 0 -m 1 -s 0 > "$log" 2>&1; then
    echo "error: the trainer failed (${BIN[$k]} -e $MODEL -prism ${SCHED[$k]} -b $B -t $T):" >&2
    grep -E '^(error|warning):' "$log" | head -3 >&2
    exit 1
  fi
  [ "$2" != 1 ] || grep -E '^(blas|note: OpenBLAS)' "$log" | sed "s/^/[${LABEL[$k]}] /" >&2 || true
  local ms
  ms=$(awk '/total average iteration time/ {print $5}' "$log")
  [ -n "$ms" ] || { echo "error: no 'total average iteration time' line (STEPS must be at least 2)" >&2; exit 1; }
  echo "$ms"
}
declare -A samples
for r in $(seq 1 "$ROUNDS"); do
  line="round $r:"
  for k in "${!LABEL[@]}"; do
    ms=$(run "$k" "$r") || exit 1
    samples[$k]+="$ms "
    line+=" ${LABEL[$k]} $ms ms/step,"
  done
  echo "${line%,}"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# shellcheck disable=SC2086  # the samples are space-separated numbers
m0=$(median ${samples[0]})
for k in "${!LABEL[@]}"; do
  # shellcheck disable=SC2086
  mk=$(median ${samples[$k]})
  awk -v l="${LABEL[$k]}" -v m="$mk" -v m0="$m0" -v l0="${LABEL[0]}" -v tok=$((B * T)) -v k="$k" 'BEGIN {
    printf "%-8s %.1f ms/step, %.0f tok/s\n", l ":", m, tok / m * 1000
    if (k > 0) printf "%s / %s tokens/s: %.3f\n", l, l0, m0 / m }'
done
