#!/usr/bin/env bash
# test/test_sd_stability.sh: train small S-D models with the CPU trainer (all four layers sd,
# no per-block LayerNorm, a high learning rate so that S and theta move far from init), then check
# the spectrum of every head's L with build/test_sd_stability. The -sd_sign 1 run is the negative
# control. Also: the checkpoint round-trips the table and flags, and training lowers the loss.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
d=build/tmp_sd_stability
rm -rf "$d"; mkdir -p "$d"
printf '1x32:sd 2x16:sd 4:sd*2\n' > "$d/sd.txt"
TS=dev/data/tinyshakespeare
RUN=(./train_gpt2 -e tiny -prism "$d/sd.txt" -ln 0 -i "$TS/tiny_shakespeare_train.bin" -j "$TS/tiny_shakespeare_val.bin"
     -b 4 -t 32 -x 30 -l 3e-3 -u 3 -v 30 -m 2 -s 0 -n 30)
"${RUN[@]}" -o "$d/stable" > "$d/stable.log" 2>&1
check "S-D model without LayerNorm trained 30 steps" test -f "$d/stable/DONE_00000030"
first=$(grep -E '^step +1/' "$d/stable.log" | awk '{print $5}')
last=$(grep -E '^step +30/' "$d/stable.log" | awk '{print $5}')
check "its loss falls by more than 1 ($first -> $last)" awk -v a="$first" -v b="$last" 'BEGIN { exit !(a != "" && b != "" && b + 0 < a - 1.0) }'
check "the start-up table shows the S-D layers and -ln 0" grep -q "no per-block LayerNorm, S-D logits u (S - D) u^T" "$d/stable.log"
run_sub ./build/test_sd_stability "$d/stable/model_00000030.bin" stable
"${RUN[@]}" -sd_sign 1 -o "$d/plus" > "$d/plus.log" 2>&1
run_sub ./build/test_sd_stability "$d/plus/model_00000030.bin" unstable
finish
