#!/usr/bin/env bash
# test/test_blas.sh: the BLAS build of the CPU programs (make USE_BLAS=1; here build/blas/, built
# beside the default ones) checked against the default build (doc/verification.md "The BLAS build"):
#   - build/blas/test_gpt2_cpu passes the model-vs-PyTorch checks of test/test_gpt2_cpu.sh (every layer
#     table and kind there, gradients and 10 AdamW steps) with the same tolerances;
#   - 20 training steps of the BLAS trainer follow the default trainer's losses within 1e-4 nats
#     (another summation order; measured about 2e-6);
#   - reproducible at a fixed thread count: two runs give the same step lines and a byte-identical
#     model, and 10 steps straight equal 5 steps + resume for 5 (the model and state files);
#   - the trainer names OpenBLAS's kernel set, with a note naming OPENBLAS_CORETYPE when the set
#     has no AVX2 kernels on a CPU that has AVX2 (forced here with OPENBLAS_CORETYPE=Prescott).
# The BLAS results depend on the thread count (OpenBLAS blocks its work per thread): the runs
# here all use OMP_NUM_THREADS=2.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
root=build/tmp_blas
rm -rf "$root"
mkdir -p "$root"
for b in build/blas/train_gpt2 build/blas/test_gpt2_cpu; do
  if [ ! -x "$b" ]; then
    fail "$b is not built: OpenBLAS is missing (Debian/Ubuntu: apt install libopenblas-openmp-dev), then make test"
    finish
    exit 1
  fi
done
check "build/blas/train_gpt2 links OpenBLAS" bash -c "ldd build/blas/train_gpt2 | grep -q libopenblas"
check "the default train_gpt2 does not" bash -c "! ldd train_gpt2 | grep -q libopenblas"

echo "== the model vs PyTorch (test/test_gpt2_cpu.sh with build/blas/test_gpt2_cpu)"
out=$(TEST_GPT2_BIN=build/blas/test_gpt2_cpu GPT2_STATES_DIR=$root/states bash test/test_gpt2_cpu.sh 2>&1)
summary=$(printf '%s\n' "$out" | tail -n 1)
printf '%s\n' "$out" | grep -E '^FAIL' | head -5
all_passed() { [[ "$1" =~ ^[1-9][0-9]*\ passed,\ 0\ failed$ ]]; }
check "build/blas/test_gpt2_cpu: every check of test_gpt2_cpu.sh passes ($summary)" all_passed "$summary"

export OMP_NUM_THREADS=2
TS=dev/data/tinyshakespeare
printf '1 2 4*2\n' > "$root/prism.txt"
COMMON=(-e tiny -prism "$root/prism.txt" -i "$TS/tiny_shakespeare_train.bin" -j "$TS/tiny_shakespeare_val.bin"
        -b 4 -t 64 -l 1e-3 -u 2 -c 0.1 -v 10 -m 2 -s 0)
steps() { grep -E '^step ' "$1" | sed -E 's/\| [0-9.]+ ms .*$//'; }
losses() { grep -E '^step ' "$1" | awk '{print $2, $5}' | sort; }  # sorted: join's order

./train_gpt2 "${COMMON[@]}" -x 20 -n 0 > "$root/plain.log" 2>&1
build/blas/train_gpt2 "${COMMON[@]}" -x 20 -n 0 > "$root/blas.log" 2>&1
worst=$(join <(losses "$root/plain.log") <(losses "$root/blas.log") |
        awk 'BEGIN{w=-1} {d=$2-$3; if (d<0) d=-d; if (d>w) w=d; n++} END{if (n==20) print w}')
check "20 steps: BLAS losses = default losses within 1e-4 nats (worst ${worst:-missing})" near "${worst:-}" 0 1e-4

build/blas/train_gpt2 "${COMMON[@]}" -x 10 -n 5 -o "$root/A" > "$root/A.log" 2>&1
build/blas/train_gpt2 "${COMMON[@]}" -x 10 -n 5 -o "$root/A2" > "$root/A2.log" 2>&1
check "two BLAS runs at 2 threads: the same step lines" test -n "$(steps "$root/A.log")" -a "$(steps "$root/A.log")" = "$(steps "$root/A2.log")"
check "... and a byte-identical final model" cmp -s "$root/A/model_00000010.bin" "$root/A2/model_00000010.bin"
mkdir -p "$root/B"
cp "$root/A/model_00000005.bin" "$root/A/state_00000005_00000.bin" "$root/A/DONE_00000005" "$root/B/"
build/blas/train_gpt2 "${COMMON[@]}" -x 10 -n 5 -o "$root/B" -y 1 > "$root/B.log" 2>&1
check "BLAS resume from step 5: steps 6-10 equal the uninterrupted run" \
  test -n "$(steps "$root/B.log")" -a "$(steps "$root/A.log" | tail -n 5)" = "$(steps "$root/B.log")"
check "... a byte-identical final model and state" \
  bash -c "cmp -s '$root/A/model_00000010.bin' '$root/B/model_00000010.bin' && cmp -s '$root/A/state_00000010_00000.bin' '$root/B/state_00000010_00000.bin'"

echo "== OpenBLAS's kernel set"
blas_lines() { OPENBLAS_CORETYPE=$1 build/blas/train_gpt2 "${COMMON[@]}" -x 1 -v 0 2>&1 | grep -E '^(blas:|note: OpenBLAS)'; }
out=$(blas_lines Prescott)
check "the trainer prints the kernel set OPENBLAS_CORETYPE chose" \
  bash -c "printf '%s\n' \"\$1\" | grep -q '^blas: OpenBLAS, kernels for Prescott'" _ "$out"
if grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo; then
  want=Haswell
  grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo &&
    grep -qw avx512dq /proc/cpuinfo && want=SkylakeX
  check "SSE3 kernels on an AVX2 CPU: one note naming OPENBLAS_CORETYPE=$want" \
    bash -c "[ \"\$(printf '%s\n' \"\$1\" | grep -c '^note: OpenBLAS uses its Prescott kernels .*OPENBLAS_CORETYPE=$want ')\" = 1 ]" _ "$out"
  check "AVX2 kernels (OPENBLAS_CORETYPE=Haswell): no note" \
    bash -c "! printf '%s\n' \"\$1\" | grep -q '^note: OpenBLAS'" _ "$(blas_lines Haswell)"
else
  check "a CPU without AVX2: no note" bash -c "! printf '%s\n' \"\$1\" | grep -q '^note: OpenBLAS'" _ "$out"
fi
finish
