#!/usr/bin/env bash
# scripts/check_learning.sh: does the trainer still learn as fast as it did? Trains the byte
# preset's LayerNorm model (L4C128H4T256V256, 4 heads x 4 layers, the prose bytes of make
# prose_bytes) with the recipe of doc/sd_attention.md (independent rows, lr 1e-3 after 100 warmup
# steps, cosine to 0.1 over 600 steps, weight decay 0.1, seed 1) and holds its val losses at steps
# 150, 300, 450 and 600 to the curve recorded below. A change that makes the model learn slower
# (llm.c's one-passage batches, a wrong gradient that still descends, a schedule off by a step)
# ends above the curve.
#
#   bash scripts/check_learning.sh [--bin TRAINER]     # default build/blas/train_gpt2 if built,
#                                                      # else ./train_gpt2; about 4 minutes on 2
#                                                      # idle cores with the BLAS build
#   bash scripts/check_learning.sh --rows 0            # llm.c's batches: the control that fails
#
# Exit status 0 when every val loss is at most TOL above the recorded one, 1 otherwise; a loss
# more than TOL below it is a note to record the new curve. The default build repeats its numbers
# exactly on any thread count; the BLAS build agrees with it to about 1e-6 nats
# (doc/verification.md). It is a script, not a test: 600 steps take minutes, too long for CI.
set -euo pipefail
cd "$(dirname "$0")/.."
# step -> val loss (recorded with this script and the BLAS build, 2026-12-07)
RECORDED=(150:2.5693 300:2.5180 450:2.4833 600:2.4474)
TOL=0.02
BIN=""
ROWS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --help|-h) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --bin) BIN=${2:?--bin needs a trainer}; shift 2 ;;
    --rows) ROWS=${2:?--rows needs 0 or 1}; shift 2 ;;
    *) echo "error: $1: unknown argument (see --help)" >&2; exit 1 ;;
  esac
done
[[ "$ROWS" =~ ^[01]$ ]] || { echo "error: --rows '$ROWS': expected 0 or 1" >&2; exit 1; }
if [ -z "$BIN" ]; then BIN=./train_gpt2; [ -x build/blas/train_gpt2 ] && BIN=build/blas/train_gpt2; fi
for f in "$BIN" dev/data/prose_bytes/prose_bytes_val_000000.bin bytes_tokenizer.bin; do
  [ -e "$f" ] || { echo "error: $f is missing (make train_gpt2 prose_bytes)" >&2; exit 1; }
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '4*4\n' > "$dir/table.txt"
echo "$BIN: L4C128H4T256V256, 600 steps of 16 x 256 bytes, -rows $ROWS (val every 150 steps)"
"$BIN" -e L4C128H4T256V256 -layers "$dir/table.txt" -seed 1 -data_seed 1 -rows "$ROWS" \
  -i 'dev/data/prose_bytes/prose_bytes_train_*.bin' -j 'dev/data/prose_bytes/prose_bytes_val_*.bin' \
  -tok bytes_tokenizer.bin -b 16 -t 256 -x 600 -l 0.001 -u 100 -q 0.1 -c 0.1 -v 150 -m 16 -s 0 \
  -o "$dir/run" > "$dir/log" 2>&1 || { echo "error: the trainer failed:" >&2; grep -E '^error' "$dir/log" >&2; exit 1; }
bad=0
for rec in "${RECORDED[@]}"; do
  step=${rec%%:*} want=${rec#*:}
  got=$(awk -v s="$step" -F'[: ]' '$1 == "s" && $2 == s && $3 == "tel" {print $4}' "$dir/run/main.log")
  verdict=$(awk -v g="${got:-nan}" -v w="$want" -v t="$TOL" 'BEGIN {
    if (g == "nan" || g == "") print "missing"; else if (g > w + t) print "slower"; else if (g < w - t) print "faster"; else print "ok" }')
  printf 'step %4d: val %s, recorded %s (%s)\n' "$step" "${got:-missing}" "$want" "$verdict"
  case "$verdict" in slower|missing) bad=1 ;; faster) echo "note: faster than recorded; record the new curve in $0" ;; esac
done
if [ "$bad" = 1 ]; then echo "learning check: FAILED (a val loss more than $TOL above the recorded curve)"; exit 1; fi
echo "learning check: ok (every val loss within $TOL of the recorded curve or below it)"
