#!/usr/bin/env bash
# test/test_gpt2_cpu.sh: the C trainer's model vs the PyTorch reference on debug states written by
# train_gpt2.py from random init, for three layer tables of the tiny model (4 layers, C 64):
#   uniform (4 heads of 16), random tokens, T 32;
#   Prism 1-2-4-4 (head sizes 64, 32, 16), TinyShakespeare tokens, T 64;
#   explicit head sizes 1x96 2x48 4x16 4x16 (attention width != C), random tokens, T 32;
#   every attention kind (sd, sdlin, lin, mha; doc/methods.md "Formulation A", "ELU+1 causal linear attention"), default options (S = 0);
#   S-D without LayerNorm (-ln 0), linear prescale, S init 0.5, U init 0.3, decay on S,
#   TinyShakespeare, T 64;
#   S-D with explicit sizes, scalar D, the +D sign, S init 0.1, theta 0.5;
#   the byte vocabulary: L2C64H2T64V256 (V 256, Vp 256), random tokens, T 64;
#   no LayerNorm at the input scale 35.36 (-emb_scale: F (wte[x] + wpe[t]) into the blocks),
#   TinyShakespeare, T 64.
# build/test_gpt2_cpu checks init, logits, loss, every gradient and the 10-step AdamW losses. The
# linear layers are an independent check: C computes the O(T^2) normalized form, PyTorch the
# prefix-sum form. TEST_GPT2_BIN and GPT2_STATES_DIR run another build of test_gpt2_cpu in its own
# folder (test/test_blas.sh: the BLAS build).
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
PYTHON=${PYTHON:-/usr/bin/python3}
dir=${GPT2_STATES_DIR:-build/tmp_gpt2_states}
bin=${TEST_GPT2_BIN:-./build/test_gpt2_cpu}
mkdir -p "$dir"
printf '# tiny Prism schedule: head sizes 64, 32, 16\n1 2 4*2\n' > "$dir/prism.txt"
printf '1x96 2x48 4x16*2\n' > "$dir/explicit.txt"
printf '4:sd 4:sdlin 4:lin 4\n' > "$dir/kinds.txt"
printf '4:sd*2 4:sdlin 4:lin\n' > "$dir/sd_noln.txt"
printf '2x24:sd 2x24:sd 4x8:sdlin 4x16\n' > "$dir/sd_explicit.txt"
val=dev/data/tinyshakespeare/tiny_shakespeare_val.bin

run_case() {  # name, extra python args, extra test args[, model descriptor (default tiny)]
  local name=$1 pyargs=$2 targs=$3 model=${4:-tiny}
  echo "== $name"
  if ! $PYTHON train_gpt2.py --model $model $pyargs --write_model "$dir/$name.bin" \
       --debug_state "$dir/${name}_state.bin" > "$dir/$name.py.log" 2>&1; then
    fail "train_gpt2.py could not write the $name debug state: $(tail -1 "$dir/$name.py.log")"
    return
  fi
  run_sub "$bin" "$dir/$name.bin" "$dir/${name}_state.bin" $targs
}
run_case uniform "--B 4 --T 32" "-init tiny"
run_case prism "--prism $dir/prism.txt --B 2 --T 64 --data $val" "-init tiny -prism $dir/prism.txt"
run_case explicit "--prism $dir/explicit.txt --B 4 --T 32" "-init tiny -prism $dir/explicit.txt"
run_case kinds "--prism $dir/kinds.txt --B 4 --T 32" "-init tiny -prism $dir/kinds.txt"
run_case sd_noln "--prism $dir/sd_noln.txt --ln 0 --lin_prescale 1 --sd_init_s 0.5 --sd_init_u 0.3 --sd_decay_s 1 --B 2 --T 64 --data $val" \
  "-init tiny -prism $dir/sd_noln.txt -sd_init_s 0.5 -sd_init_u 0.3"
run_case sd_explicit "--prism $dir/sd_explicit.txt --sd_scalar_d 1 --sd_sign 1 --sd_init_s 0.1 --sd_init_theta 0.5 --B 4 --T 32" \
  "-init tiny -prism $dir/sd_explicit.txt -sd_init_s 0.1 -sd_init_theta 0.5"
run_case bytes "--B 4 --T 64" "-init L2C64H2T64V256" L2C64H2T64V256
run_case emb_scale "--ln 0 --emb_scale 35.36 --B 2 --T 64 --data $val" "-init tiny"
finish
