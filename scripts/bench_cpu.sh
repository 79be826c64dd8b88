#!/usr/bin/env bash
# scripts/bench_cpu.sh: CPU trainer throughput, uniform vs Prism of the same shape, measured side by
# side: the two arms alternate (U P U P ...) so that drift of the machine hits both alike, and the
# result is a ratio, not an absolute time.
#
#   bash scripts/bench_cpu.sh [MODEL UNIFORM_SCHEDULE PRISM_SCHEDULE [B T STEPS ROUNDS]]
#   default: L8C256H4T256 with prism/schedules/L8C256_{uniform,prism}.txt, B 4, T 256, 8 steps, 3 rounds
#
# Each run's "total average iteration time" (first step excluded) is one sample; the script prints
# every sample, the median per arm, tokens/s, and Prism/uniform.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in --help|-h) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; -*) echo "error: $1: unknown flag (see --help)" >&2; exit 1 ;; esac
MODEL=${1:-L8C256H4T256}
UNI=${2:-prism/schedules/L8C256_uniform.txt}
PRI=${3:-prism/schedules/L8C256_prism.txt}
B=${4:-4}
T=${5:-256}
STEPS=${6:-8}
ROUNDS=${7:-3}
TS=dev/data/tinyshakespeare
for f in train_gpt2 "$TS/tiny_shakespeare_train.bin" "$UNI" "$PRI"; do
  [ -e "$f" ] || { echo "error: $f is missing (run make train_gpt2 data)" >&2; exit 1; }
done
for v in B T STEPS ROUNDS; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "error: $v '${!v}': expected a positive integer" >&2; exit 1; }
done
echo "model $MODEL, B $B, T $T, $STEPS steps per run, $ROUNDS rounds, OMP_NUM_THREADS=${OMP_NUM_THREADS:-all} on $(nproc) cores"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run() {  # schedule -> ms per step; a failed run stops the script with the trainer's own error
  if ! ./train_gpt2 -e "$MODEL" -prism "$1" -i "$TS/tiny_shakespeare_train.bin" -j "$TS/tiny_shakespeare_val.bin" \
      -b "$B" -t "$T" -x "$STEPS" -v 0 -m 1 -s 0 > "$log" 2>&1; then
    echo "error: the trainer failed (-e $MODEL -prism $1 -b $B -t $T):" >&2
    grep -E '^(error|warning):' "$log" | head -3 >&2
    exit 1
  fi
  local ms
  ms=$(awk '/total average iteration time/ {print $5}' "$log")
  [ -n "$ms" ] || { echo "error: no 'total average iteration time' line (STEPS must be at least 2)" >&2; exit 1; }
  echo "$ms"
}
u=(); p=()
for r in $(seq 1 "$ROUNDS"); do
  ms=$(run "$UNI") || exit 1
  u+=("$ms")
  ms=$(run "$PRI") || exit 1
  p+=("$ms")
  echo "round $r: uniform ${u[-1]} ms/step, prism ${p[-1]} ms/step"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
mu=$(median "${u[@]}"); mp=$(median "${p[@]}")
awk -v mu="$mu" -v mp="$mp" -v tok=$((B * T)) 'BEGIN {
  printf "uniform: %.1f ms/step, %.0f tok/s\n", mu, tok / mu * 1000
  printf "prism:   %.1f ms/step, %.0f tok/s\n", mp, tok / mp * 1000
  printf "prism / uniform tokens/s: %.3f\n", mu / mp }'
