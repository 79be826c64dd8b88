#!/usr/bin/env bash
# test/test_scripts.sh: the launchers and A/B scripts of scripts/, without a GPU:
#   - run_gpt2.sh --dry-run prints llm.c's recipe for each size and arm (flags, -prism, and -m from
#     the 10*2^20 val-token rule for 1 and 8 processes); the wrappers pass through;
#   - inputs are checked: the missing trainer, data and schedule are named one line each; a
#     batch that does not divide is one error line;
#   - the resume loop runs a fake trainer (a shell script that writes DONE_ markers) until the last
#     step's DONE_ exists, restarts after a failure, and gives up after --max-restarts attempts
#     without progress;
#   - the Slurm (fs, tcp) and multi-node mpirun launchers print each rank's -pn -pr -pg -pi flags;
#   - ab_compare.py on synthetic stdout logs (agree, diverge at a known step, tokens/s ratio,
#     a malformed line), and ab_upstream.sh end to end with fake upstream/our trainers;
#   - dev/gpu_science.sh: its environment settings out of range are one error line each;
#   - ab_report.py --arms uniform,prism on synthetic runs with known mean, std, paired difference
#     and 95% interval (one "within the noise" case, one "excludes 0" case), tokens/s, a diverged
#     seed, --markdown and --json, and its errors;
#   - run_gpt2.sh --data-seed; sd_init_sweep.py --dry-run prints its arms' trainer commands;
#   - sd_claims.py --dry-run of doc/sd_attention.md's small-scale command prints every training
#     and linearization with its log and writes nothing;
#     bench_cpu.sh --help prints its usage, a bad argument or a failing trainer is one error line
#     and a non-zero exit (never "inf tok/s");
#   - sample.py continues a prompt from a checkpoint: the prompt first, the same text for a seed,
#     another for another seed; bad flags and a missing checkpoint are one error line.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
PYTHON=${PYTHON:-/usr/bin/python3}
export PYTHON
d=build/tmp_scripts
rm -rf "$d"; mkdir -p "$d"
export LLMC_RESTART_DELAY=0
# The launchers run in a sandbox copy (scripts/ and prism/schedules/ only), so that what they find
# (no ./train_gpt2cu, no FineWeb, no HellaSwag file) does not depend on what this checkout has
# built or downloaded.
sb=$PWD/$d/repo
mkdir -p "$sb/prism"; cp -r scripts "$sb/"; cp -r prism/schedules "$sb/prism/"
D=$PWD/$d

# ------------------------------------------------------------------------------------------------
# run_gpt2.sh --dry-run
line() { "$sb/scripts/run_gpt2.sh" --dry-run "$@" 2>/dev/null | grep -E '^until' ; }
has() { case " ${1//;/ ;} " in *" $2 "*) return 0 ;; *) return 1 ;; esac; }
l124u=$(line --size 124M --arm uniform)
l124p=$(line --size 124M --arm prism --seed 7)
for f in "-e d12" "-b 64" "-t 1024" "-d 524288" "-x 18865" "-l 6e-4" "-u 700" "-q 0.0" "-c 0.1" "-z 1" \
         "-r 0" "-v 250" "-m 160" "-h 1" "-s 20000" "-g 144" "-n 5000" "-y 1" "-seed 42" \
         "-i 'dev/data/fineweb10B/fineweb_train_*.bin'" "-j 'dev/data/fineweb10B/fineweb_val_*.bin'"; do
  has "$l124u" "$f" || fail "124M uniform dry run lacks '$f': $l124u"
done
check "124M uniform: llm.c's flags, one GPU, -m 160 (10*2^20 / 64*1024), no -prism" \
  bash -c "[[ '$l124u' == 'until [ -e log/gpt2_124M_uniform_seed42/DONE_00018865 ]; do ./train_gpt2cu '* ]] && [[ '$l124u' != *-prism* ]]"
check "124M prism: -prism prism/schedules/d12_prism.txt and -seed 7, its own output dir" \
  bash -c "[[ '$l124p' == *' -seed 7 '* && '$l124p' == *'-prism prism/schedules/d12_prism.txt; done' && '$l124p' == *'-o log/gpt2_124M_prism_seed7 '* ]]"
l8=$(line --size 124M --arm prism --gpus 8)
check "8 GPUs: mpirun -np 8 and -m 20 (llm.c's default val set)" \
  bash -c "[[ '$l8' == *'do mpirun -np 8 ./train_gpt2cu '* && '$l8' == *' -m 20 '* ]]"
l354=$(line --size 354M --arm prism)
check "354M: d24, FineWeb 100B, -x 60000 -l 3e-4 -n 2000, d24_prism.txt" \
  bash -c "[[ '$l354' == *'-e d24 '* && '$l354' == *fineweb100B/* && '$l354' == *'-x 60000 -l 3e-4 '* && '$l354' == *'-n 2000 '* && '$l354' == *d24_prism.txt* ]]"
l757=$("$sb/scripts/run_gpt2_757M.sh" --arm prism --dry-run 2>/dev/null | grep -E '^until')
check "757M wrapper: L24C1536H24, B 32 and -m 320, -x 286102 -l 2.5e-4, L24C1536_prism.txt" \
  bash -c "[[ '$l757' == *'-e L24C1536H24 '* && '$l757' == *'-b 32 '* && '$l757' == *' -m 320 '* && '$l757' == *'-x 286102 -l 2.5e-4 '* && '$l757' == *L24C1536_prism.txt* ]]"
check "the 124M wrapper prints the same command as run_gpt2.sh --size 124M" \
  test "$("$sb/scripts/run_gpt2_124M.sh" --arm prism --seed 7 --dry-run 2>/dev/null | grep '^until')" = "$l124p"
lt=$(line --size 124M --arm table --schedule prism/schedules/controls/d12_reversed.txt)
check "124M table arm (a negative control): -layers FILE, no -prism, its own output dir" \
  bash -c "[[ '$lt' == *'-layers prism/schedules/controls/d12_reversed.txt; done' && '$lt' != *-prism* && '$lt' == *'-o log/gpt2_124M_table_seed42 '* ]]"
expect_error "--arm table without --schedule: one error" "^error: --arm table needs its layer table: --schedule FILE" \
  "$sb/scripts/run_gpt2.sh" --size 124M --arm table --dry-run
lx=$(line --size 124M --arm uniform -- -ge 1)
check "extra trainer flags after -- are appended" bash -c "[[ '$lx' == *' -y 1 -ge 1; done' ]]"
warn=$("$sb/scripts/run_gpt2.sh" --size 124M --arm prism --dry-run 2>&1 >/dev/null)
# (./train_gpt2cu is absent in CI: the test builds no CUDA code; the message says how to get it)
check "--dry-run names the missing CUDA trainer as a warning" \
  bash -c "grep -Eq '^warning: missing input \(a real run stops here\): ./train_gpt2cu: not built: build the CUDA trainer first \(make train_gpt2cu' <<< \"\$1\"" _ "$warn"

# --budget: a fraction of the recipe's steps, with the tokens and GPU-hours printed
dq=$("$sb/scripts/run_gpt2.sh" --size 124M --arm uniform --budget quarter --dry-run 2>/dev/null)
check "--budget quarter: -x 4716 (18865 / 4), said to differ from llm.c's recipe" \
  bash -c "grep -q -- ' -x 4716 ' <<< \"\$1\" && grep -q \"NOT llm.c's recipe: --budget quarter\" <<< \"\$1\"" _ "$dq"
check "... and its budget line: 2.47B tokens and an H200 / A100 GPU-hour estimate" \
  bash -c "grep -Eq '^# budget quarter: 4716 steps x 524288 = 2\.47B tokens; about [0-9.]+ GPU-hours on H200s, [0-9.]+ on A100s' <<< \"\$1\"" _ "$dq"
check "the full recipe prints its budget too (9.89B tokens)" \
  bash -c "grep -q '^# budget full: 18865 steps x 524288 = 9.89B tokens' <<< \"\$1\"" _ "$("$sb/scripts/run_gpt2.sh" --size 124M --dry-run 2>/dev/null)"
expect_error "--budget and --steps together" "^error: --steps and --budget half: give one of them" \
  "$sb/scripts/run_gpt2.sh" --size 124M --budget half --steps 100 --dry-run
expect_error "an unknown --budget" "^error: --budget 'most': expected full, half, quarter or tenth" \
  "$sb/scripts/run_gpt2.sh" --size 124M --budget most --dry-run
# SM 8.x: head size 256 under -attn auto runs on the own kernels; warned before the run
w80=$("$sb/scripts/run_gpt2.sh" --size 124M --arm prism --gpu-arch 8.0 --dry-run 2>&1 >/dev/null)
check "SM 8.0 + d12_prism.txt (256-wide heads): a warning naming the 128-wide preset d12_prism_d.txt" \
  bash -c "grep -q '^warning: SM 8.0 GPU: cuDNN does not train head size 256 there.*--schedule prism/schedules/d12_prism_d.txt' <<< \"\$1\"" _ "$w80"
nw() { ! "$sb/scripts/run_gpt2.sh" "$@" --dry-run 2>&1 >/dev/null | grep -q 'head size 256'; }
check "no such warning on SM 9.0" nw --size 124M --arm prism --gpu-arch 9.0
check "... nor with the 128-wide preset on SM 8.0" nw --size 124M --arm prism --schedule "$sb/prism/schedules/d12_prism_d.txt" --gpu-arch 8.0
check "... nor with an explicit -attn flash" nw --size 124M --arm prism --gpu-arch 8.0 -- -attn flash
check "... nor for the uniform arm" nw --size 124M --arm uniform --gpu-arch 8.0
check "757M on SM 8.6: the warning names the 128-wide preset L24C1536_prism_d.txt" \
  bash -c "'$sb/scripts/run_gpt2.sh' --size 757M --arm prism --gpu-arch 8.6 --dry-run 2>&1 >/dev/null | grep 'schedule prism/schedules/L24C1536_prism_d.txt' > /dev/null"
check "... and no warning for it" nw --size 757M --arm prism --schedule "$sb/prism/schedules/L24C1536_prism_d.txt" --gpu-arch 8.6
expect_error "a non-integer --data-seed" "^error: --data-seed 'x': expected a non-negative integer" \
  "$sb/scripts/run_gpt2.sh" --size 124M --data-seed x --dry-run
expect_error "a malformed --gpu-arch" "^error: --gpu-arch '80': expected a compute capability such as 8.0 or 9.0" \
  "$sb/scripts/run_gpt2.sh" --size 124M --gpu-arch 80 --dry-run

# ------------------------------------------------------------------------------------------------
# input checks and errors
err=$("$sb/scripts/run_gpt2.sh" --size 124M --arm prism --schedule none.txt 2>&1 >/dev/null); rc=$?
check "missing inputs: exit 1, one error line each for the trainer, train and val shards, schedule, HellaSwag" \
  bash -c "[ $rc -eq 1 ] && [ \$(grep -c '^error: ' <<< \"\$1\") -eq 5 ] &&
    grep -q '^error: ./train_gpt2cu: not built: ' <<< \"\$1\" &&
    grep -q '^error: none.txt: layer table not found' <<< \"\$1\" &&
    grep -q '^error: dev/data/hellaswag/hellaswag_val.bin: not found, needed by -h 1' <<< \"\$1\" &&
    grep -q '^error: dev/data/fineweb10B/fineweb_train_\*.bin: no train shard matches (prepare FineWeb: python dev/data/fineweb.py -t classic -v 10B)' <<< \"\$1\"" _ "$err"
expect_error "a batch that does not divide over 16 GPUs" \
  '^error: -d 524288 is not a multiple of B\*T\*processes = 64\*1024\*16 = 1048576 \(use --micro-batch 32' \
  "$sb/"scripts/run_gpt2.sh --size 124M --gpus 16 --dry-run
expect_error "val tokens that are not whole batches" '^error: 10\*2\^20 val tokens are not a whole number' \
  "$sb/"scripts/run_gpt2.sh --size 124M --gpus 3 --total-batch 196608 --dry-run
expect_error "unknown arm" "^error: --arm 'mixed': expected uniform, prism or table" "$sb/scripts/run_gpt2.sh" --size 124M --arm mixed
expect_error "unknown size" "^error: --size '1B': expected 124M, 354M or 757M" "$sb/scripts/run_gpt2.sh" --size 1B
expect_error "--schedule with the uniform arm" '^error: --schedule x.txt: only with --arm prism' \
  "$sb/"scripts/run_gpt2.sh --size 124M --schedule x.txt

# a complete set of inputs: fake shards and a fake trainer that writes DONE_ markers
data=$D/fineweb10B; mkdir -p "$data"
touch "$data/fineweb_train_000001.bin" "$data/fineweb_val_000000.bin"
cat > "$d/fake_trainer.sh" <<'EOF'
#!/usr/bin/env bash
# fake train_gpt2cu: logs its call; attempt 1 writes DONE_ of step 2 and fails, attempt 2 finishes
out=""; steps=""
while [ $# -gt 0 ]; do case "$1" in -o) out=$2 ;; -x) steps=$2 ;; esac; shift 2; done
mkdir -p "$out"; echo call >> "$out/calls"
if [ "$(wc -l < "$out/calls")" -eq 1 ]; then touch "$out/DONE_00000002"; exit 1; fi
touch "$out/DONE_$(printf %08d "$steps")"
EOF
cat > "$d/failing_trainer.sh" <<'EOF'
#!/usr/bin/env bash
exit 3
EOF
chmod +x "$d/fake_trainer.sh" "$d/failing_trainer.sh"
COMMON=(--size 124M --arm prism --data "$data" --steps 5 --hellaswag 0)
out=$("$sb/scripts/run_gpt2.sh" "${COMMON[@]}" --bin "$D/fake_trainer.sh" --check-only 2>&1); rc=$?
check "--check-only with every input present: exit 0 ($out)" bash -c "[ $rc -eq 0 ] && [[ \"\$1\" == 'inputs present: '* ]]" _ "$out"
expect_error "a missing schedule alone is exactly one error line" '^error: nope.txt: layer table not found' \
  "$sb/scripts/run_gpt2.sh" "${COMMON[@]}" --bin "$D/fake_trainer.sh" --schedule nope.txt --check-only
"$sb/scripts/run_gpt2.sh" "${COMMON[@]}" --bin "$D/fake_trainer.sh" --out "$D/run" > "$d/run.log" 2>&1; rc=$?
check "resume loop: a failed attempt that wrote a checkpoint is restarted, the second finishes (exit $rc)" \
  bash -c "[ $rc -eq 0 ] && [ \$(wc -l < $d/run/calls) -eq 2 ] && [ -e $d/run/DONE_00000005 ] &&
           grep -q 'resuming from the last checkpoint' $d/run.log && grep -q '^done: $D/run/DONE_00000005' $d/run.log"
expect_error "no progress: give up after --max-restarts attempts" \
  "^error: $D/failing_trainer.sh exited 3; 2 attempts in a row wrote no new checkpoint" \
  bash -c "$sb/scripts/run_gpt2.sh ${COMMON[*]} --bin $D/failing_trainer.sh --out $D/fail --max-restarts 2 > /dev/null"

# ------------------------------------------------------------------------------------------------
# multi-node launchers
fs=$(bash "$sb/scripts/multi_node/run_gpt2_fs.sbatch" --size 124M --arm prism --micro-batch 32 --fs-dir /shared/nccl --dry-run 2>/dev/null)
check "Slurm fs: the srun loop removes the stale NCCL id first" \
  bash -c "grep -q '^until \[ -e log/gpt2_124M_prism_seed42/DONE_00018865 \]; do rm -f /shared/nccl/ncclUniqueId.\\*.sync; srun --kill-on-bad-exit=1 bash scripts/run_gpt2.sh ' <<< \"\$1\"" _ "$fs"
check "Slurm fs: 16 ranks (2 nodes x 8), rank 13 runs with -pn 16 -pr 13 -pg 8 -pi fs -pf /shared/nccl and -m 20" \
  bash -c "[ \$(grep -c '^./train_gpt2cu ' <<< \"\$1\") -eq 16 ] && grep -q '^./train_gpt2cu .* -m 20 .* -pn 16 -pr 13 -pg 8 -pi fs -pf /shared/nccl$' <<< \"\$1\"" _ "$fs"
tcp=$(SLURM_NTASKS=4 SLURM_NTASKS_PER_NODE='2(x2)' bash "$sb/scripts/multi_node/run_gpt2_tcp.sbatch" --size 354M --micro-batch 128 --server-ip 10.1.2.3 --dry-run 2>/dev/null)
check "Slurm tcp: 4 ranks, -pg 2 from '2(x2)', -pi tcp -ps 10.1.2.3" \
  bash -c "[ \$(grep -c '^./train_gpt2cu ' <<< \"\$1\") -eq 4 ] && grep -q ' -pn 4 -pr 3 -pg 2 -pi tcp -ps 10.1.2.3$' <<< \"\$1\"" _ "$tcp"
expect_error "Slurm outside a job without --dry-run" '^error: not inside a Slurm job' \
  env -u SLURM_JOB_ID bash "$sb/scripts/multi_node/run_gpt2_fs.sbatch" --size 124M
mpi=$("$sb/scripts/multi_node/run_gpt2_mpi.sh" --hosts a:8,b:8 --size 124M --micro-batch 32 --dry-run 2>/dev/null | grep '^until')
check "mpirun over 2 hosts: -np 16 --host a:8,b:8, NCCL settings forwarded with -x" \
  bash -c "[[ '$mpi' == *'do mpirun -np 16 --host a:8,b:8 '*'-x NCCL_IB_DISABLE'*' ./train_gpt2cu '* ]]"
expect_error "mpirun launcher: bad --hosts" "^error: --hosts 'a,b': expected host:slots" \
  "$sb/scripts/multi_node/run_gpt2_mpi.sh" --hosts a,b --size 124M

# ------------------------------------------------------------------------------------------------
# ab_compare.py on synthetic stdout logs (llm.c's step line and ours)
steps() {  # file, loss offset at step >= $3, ms
  for s in 1 2 3 4 5 6; do
    loss=$(awk -v s=$s -v k="$3" -v o="$2" 'BEGIN { printf "%.6f", 10 - 0.5 * s + (s >= k ? o : 0) }')
    printf 'step %4d/6 | loss %s (+0.00z)| norm 1.0000 (+0.00z)| lr 6.00e-04 | %s ms | 40.0%% bf16 MFU | 1000 tok/s\n' "$s" "$loss" "$4"
    [ "$s" = 3 ] && echo "val loss 8.500000"
  done > "$1"
}
steps "$d/ref.log" 0 99 100.00
steps "$d/same.log" 0.004 1 80.00
steps "$d/diff.log" 0.05 4 100.00
$PYTHON scripts/ab_compare.py "$d/ref.log" "$d/same.log" --tokens-per-step 65536 --json "$d/cmp.json" > "$d/cmp.out" 2>&1; rc=$?
check "ab_compare: losses within 0.01 at all 6 steps -> AGREE, exit 0" \
  bash -c "[ $rc -eq 0 ] && grep -q '^AGREE: the train losses match within 0.01 nats at all 6 common steps' $d/cmp.out"
check "ab_compare: tokens/s from the median step time after warm-up: 65536/0.1 and 65536/0.08, ratio 1.250" \
  grep -q 'upstream 100.00 ms = 655,360 tok/s, ours 80.00 ms = 819,200 tok/s, ours/upstream = 1.250' "$d/cmp.out"
check "ab_compare: JSON written" $PYTHON -c "import json; j = json.load(open('$d/cmp.json')); assert j['agree'] and len(j['steps']) == 6"
$PYTHON scripts/ab_compare.py "$d/ref.log" "$d/diff.log" > "$d/cmp2.out" 2>&1; rc=$?
check "ab_compare: a 0.05 jump from step 4 -> DIFFER at step 4, exit 2" \
  bash -c "[ $rc -eq 2 ] && grep -q 'first differ by more than 0.01 nats at step 4' $d/cmp2.out"
printf 'step    1/6 | loss 9.5 (+0.00z)| norm 1.0 | lr 1e-4 | 100.00 ms\nstep 2 of 6: loss 9\n' > "$d/bad.log"
expect_error "ab_compare: a malformed step line" "^error: $d/bad.log:2: expected 'step N/M" \
  $PYTHON scripts/ab_compare.py "$d/ref.log" "$d/bad.log"

# ab_upstream.sh end to end with fakes: both "trainers" print the same steps and record their flags
mkdir -p "$d/llmc"
cat > "$d/llmc/train_gpt2cu" <<EOF
#!/usr/bin/env bash
printf '%s\n' "\$@" | grep -v '^$d/ab/' > "\$(dirname "\$0")/args_\$(basename "\$(dirname "\$0")")"
cat "$PWD/$d/ref.log"
EOF
mkdir -p "$d/ours"; cp "$d/llmc/train_gpt2cu" "$d/ours/train_gpt2cu"; chmod +x "$d/llmc/train_gpt2cu" "$d/ours/train_gpt2cu"
$PYTHON train_gpt2.py --model tiny --write_model "$d/tiny.bin" > /dev/null 2>&1
scripts/ab_upstream.sh "$d/llmc" --ours "$d/ours/train_gpt2cu" --init "$d/tiny.bin" -t 64 -b 4 --steps 6 --out "$d/ab" > "$d/abu.out" 2>&1; rc=$?
check "ab_upstream: fake upstream and ours -> AGREE (exit $rc)" bash -c "[ $rc -eq 0 ] && grep -q '^AGREE' $d/abu.out"
check "ab_upstream: both trainers got the same flags (-e $d/tiny.bin -b 4 -t 64 -x 6 ...), ours also -start_over 1" \
  bash -c "diff -q $d/llmc/args_llmc <(sed '/^-start_over\$/{N;d}' $d/ours/args_ours) > /dev/null && [ \$(grep -c -- '^-start_over\$' $d/ours/args_ours) -eq 1 ] && grep -qx -- '-x' $d/llmc/args_llmc && tr '\n' ' ' < $d/llmc/args_llmc | grep -q -- '-e $d/tiny.bin -b 4 -t 64 -d 256 -x 6 '"
err=$(scripts/ab_upstream.sh "$d/nowhere" --ours "$d/nowhere/ours" 2>&1 >/dev/null); rc=$?
check "ab_upstream: an unbuilt upstream is named, with no build recipe" \
  bash -c "[ $rc -eq 1 ] && grep -q '^error: $d/nowhere/train_gpt2cu: not built: build upstream llm.c.s train_gpt2cu first, following its own README' <<< \"\$1\"" _ "$err"
printf '1 2 4*2\n' > "$d/p.txt"
$PYTHON train_gpt2.py --model tiny --prism "$d/p.txt" --write_model "$d/tiny_prism.bin" > /dev/null 2>&1
expect_error "ab_upstream: a Prism init (version 103) is refused: upstream reads only uniform files" \
  "^error: $d/tiny_prism.bin: header\[1\] version 103: upstream llm.c reads only uniform" \
  scripts/ab_upstream.sh "$d/llmc" --ours "$d/ours/train_gpt2cu" --init "$d/tiny_prism.bin"

# ab_upstream.sh --cpu: a fake upstream CPU train_gpt2 that runs build/upstream_cpu_loop in the run
# folder (so it reads the same linked files), and one that changes the loss of step 5
mkdir -p "$d/llmc_cpu" "$d/llmc_cpu_off"
printf '#!/usr/bin/env bash\nexec "%s/build/upstream_cpu_loop"\n' "$PWD" > "$d/llmc_cpu/train_gpt2"
printf '#!/usr/bin/env bash\n"%s/build/upstream_cpu_loop" | sed "s/^step 5: train loss [0-9.]*/step 5: train loss 1.000000/"\n' \
  "$PWD" > "$d/llmc_cpu_off/train_gpt2"
chmod +x "$d/llmc_cpu/train_gpt2" "$d/llmc_cpu_off/train_gpt2"
scripts/ab_upstream.sh "$d/llmc_cpu" --cpu --init "$d/tiny.bin" --out "$d/abc" > "$d/abc.out" 2>&1; rc=$?
check "ab_upstream --cpu: the same loop on both sides -> AGREE on 41 steps (exit $rc)" \
  bash -c "[ $rc -eq 0 ] && grep -q '^AGREE: .* at all 41 common steps' $d/abc.out && [ \$(grep -c '^val loss' $d/abc/upstream.log) -eq 5 ]"
check "ab_upstream --cpu: the run folder links upstream's fixed paths to our files" \
  bash -c "[ \"\$(readlink $d/abc/run/gpt2_124M.bin)\" = $PWD/$d/tiny.bin ] && [ -L $d/abc/run/dev/data/tinyshakespeare/tiny_shakespeare_train.bin ]"
scripts/ab_upstream.sh "$d/llmc_cpu_off" --cpu --init "$d/tiny.bin" --out "$d/abc2" > "$d/abc2.out" 2>&1; rc=$?
check "ab_upstream --cpu: one step's loss changed -> DIFFER at step 5, exit 2 (exit $rc)" \
  bash -c "[ $rc -eq 2 ] && grep -q 'first differ by more than 0.001 nats at step 5' $d/abc2.out"
$PYTHON train_gpt2.py --model tiny --write_model "$d/tiny_bf16.bin" --write_dtype bf16 > /dev/null 2>&1
expect_error "ab_upstream --cpu: a bf16 init (version 5) is refused: upstream's CPU code reads fp32 only" \
  "^error: $d/tiny_bf16.bin: header\[1\] version 5: upstream's CPU train_gpt2 reads only fp32" \
  scripts/ab_upstream.sh "$d/llmc_cpu" --cpu --init "$d/tiny_bf16.bin"
expect_error "ab_upstream --cpu: a GPU-run flag is refused (the CPU demo's settings are fixed)" \
  "^error: --steps does not apply with --cpu" scripts/ab_upstream.sh "$d/llmc_cpu" --cpu --steps 5
expect_error "ab_upstream --cpu: an unbuilt upstream train_gpt2 is named, with no build recipe" \
  "^error: $d/nowhere/train_gpt2: not built: build upstream llm.c's CPU train_gpt2 first" \
  scripts/ab_upstream.sh "$d/nowhere" --cpu --init "$d/tiny.bin"
expect_error "upstream_cpu_loop: -x not an integer" "^error: -x '4x': expected an integer in \[0, 1000000000\]" \
  build/upstream_cpu_loop -e "$d/tiny.bin" -x 4x
expect_error "upstream_cpu_loop: an unknown flag" "^error: -b: unknown flag" build/upstream_cpu_loop -b 4
expect_error "upstream_cpu_loop: a Prism init (upstream trains uniform models only)" \
  "^error: $d/tiny_prism.bin: upstream llm.c trains only uniform standard models" \
  build/upstream_cpu_loop -e "$d/tiny_prism.bin"
printf 'step 0: train loss 10.5 (took 3.0 ms)\nval loss 10.4\nstep 1: train loss 10.2 (took 3.5 ms)\n' > "$d/cpu.log"
check "ab_compare: reads the CPU demo's step lines (step N: train loss L (took T ms))" \
  $PYTHON -c "from scripts import ab_compare as a; l = a.parse_stdout('$d/cpu.log'); assert l['steps'] == {0: {'loss': 10.5, 'ms': 3.0}, 1: {'loss': 10.2, 'ms': 3.5}} and l['val'] == [10.4]"

# the Slurm launcher's own flags (a dry run outside Slurm: 2 nodes x 8 tasks)
check "slurm_run.sh fs --dry-run: the srun loop and rank 0's command" \
  bash -c "bash scripts/multi_node/slurm_run.sh fs --fs-dir $d/nccl --dry-run --size 124M --micro-batch 32 | grep -q '^until \[ -e log/gpt2_124M_uniform_seed42/DONE_00018865 \]; do .* srun --kill-on-bad-exit=1 bash scripts/run_gpt2.sh'"
expect_error "slurm_run.sh: --max-restarts not an integer" "^error: --max-restarts 'abc': expected a non-negative integer$" \
  bash scripts/multi_node/slurm_run.sh fs --max-restarts abc --dry-run
expect_error "slurm_run.sh: a rendezvous other than fs or tcp" "^error: rendezvous 'bogus': expected fs or tcp" \
  bash scripts/multi_node/slurm_run.sh bogus
expect_error "slurm_run.sh: a flag without its value" "^error: --fs-dir: expected a value after the flag$" \
  bash scripts/multi_node/slurm_run.sh fs --fs-dir

# ------------------------------------------------------------------------------------------------
# ab_report.py on a uniform vs Prism A/B of synthetic runs (--arms uniform,prism: uniform is the
# reference; the runs' stdout gives tokens/s; floors.json puts every run below the bigram floor)
mkrun() {  # dir arm seed final_val
  mkdir -p "$1/$2_seed$3"
  printf 's:0 tel:10.8\ns:0 trl:10.7 lr:0.001 norm:1.0\ns:1 trl:9.0 lr:0.001 norm:1.0\ns:2 tel:%s\n' "$4" > "$1/$2_seed$3/main.log"
  printf 'batch: B 4 x T 128 x 1 micro-steps = 512 tokens per step, 2 steps\ntotal average iteration time: %s ms\n' \
    "$([ "$2" = prism ] && echo 500.0 || echo 512.0)" > "$1/$2_seed$3.log"
}
mkfloors() {  # dir
  printf '{"unigram": 6.0, "bigram": 4.0, "bigram_lambda": 0.6, "targets": 1000, "train_tokens": 100000, "B": 4, "T": 128, "batches": 2}\n' > "$1/floors.json"
}
s1=$d/sum1; mkrun $s1 uniform 1 3.00; mkrun $s1 uniform 2 3.10; mkrun $s1 uniform 3 3.05
mkrun $s1 prism 1 2.98; mkrun $s1 prism 2 3.07; mkrun $s1 prism 3 3.04; mkfloors $s1
$PYTHON scripts/ab_report.py $s1 --arms uniform,prism --plots 0 --markdown $s1/md/ab.md --json $s1/md/ab.json > $s1/out 2>&1; rc=$?
# diffs -0.02 -0.03 -0.01: mean -0.02, sd 0.01, se 0.01/sqrt(3) = 0.005774, t(0.975, 2) = 4.303
# -> half width 0.024843, CI [-0.0448, +0.0048] contains 0
export -f near
js() { $PYTHON -c "import json,sys; s=json.load(open(sys.argv[1]))['summary']; print($2)" "$1"; }
check "ab_report (uniform, prism): per-arm mean and std (uniform 3.0500 +- 0.0500) (exit $rc)" \
  bash -c "[ $rc -eq 0 ] && grep -q '^| uniform | 3 | 3.0500 | 0.0500 |' $s1/out"
check "ab_report (uniform, prism): paired differences and 95% CI [-0.0448, +0.0048] (t 4.303, se 0.0058)" \
  bash -c "grep -q '^| prism | -0.0200 \[-0.0448, +0.0048\] (n 3) |' $s1/out && near $(js $s1/md/ab.json "s['vs_reference']['prism']['val']['se']") 0.0057735 1e-6 && near $(js $s1/md/ab.json "(s['vs_reference']['prism']['val']['ci95'][1] - s['vs_reference']['prism']['val']['mean']) / s['vs_reference']['prism']['val']['se']") 4.303 1e-9"
check "ab_report (uniform, prism): says the difference is within the noise" \
  grep -q '^prism - uniform = -0.0200 +- 0.0058 (se) nats over 3 paired seeds: within the noise (95% interval \[-0.0448, +0.0048\] contains 0)' $s1/out
check "ab_report (uniform, prism): tokens/s 1000 vs 1024, ratio 1.024" \
  bash -c "grep -q '^| uniform | 3 | .* | 1000 | n/a |$' $s1/out && grep -q '^| prism | 3 | .* | 1024 | n/a |$' $s1/out && grep -q '^| prism | .* | 1.024 |' $s1/out"
check "ab_report --markdown, --json: written there, with the paired differences by seed (2: 3.07 - 3.10 = -0.0300)" \
  bash -c "grep -q '^- prism - uniform by seed: 1: -0.0200, 2: -0.0300, 3: -0.0100$' $s1/md/ab.md && near $(js $s1/md/ab.json "s['vs_reference']['prism']['val']['mean']") -0.02 1e-12 && [ ! -e $s1/summary.md ] && [ ! -e $s1/summary.json ]"
s2=$d/sum2; mkrun $s2 uniform 1 3.000; mkrun $s2 uniform 2 3.100; mkrun $s2 uniform 3 3.050
mkrun $s2 prism 1 2.980; mkrun $s2 prism 2 3.079; mkrun $s2 prism 3 3.031; mkfloors $s2
# diffs -0.020 -0.021 -0.019: sd 0.001, half width 0.0025 -> CI [-0.0225, -0.0175] excludes 0
$PYTHON scripts/ab_report.py $s2 --arms uniform,prism --plots 0 > $s2/out 2>&1
check "ab_report (uniform, prism): a consistent -0.02 (sd 0.001) is reported as Prism lower, CI excludes 0" \
  grep -q "^prism's final val loss is lower (better) than uniform's by 0.0200 nats .* \[-0.0225, -0.0175\] excludes 0" $s2/out
s3=$d/sum3; mkrun $s3 uniform 1 3.00; mkrun $s3 uniform 2 3.10; mkrun $s3 prism 1 2.98; mkrun $s3 prism 2 nan; mkfloors $s3
sed -i 's/^s:1 trl:9.0/s:1 trl:nan/' $s3/prism_seed2/main.log
$PYTHON scripts/ab_report.py $s3 --arms uniform,prism > $s3/out 2>&1; rc=$?
check "ab_report (uniform, prism): a diverged seed (trl:nan, tel:nan) is summarized and plotted, its statistics n/a (exit $rc)" \
  bash -c "[ $rc -eq 0 ] && grep -q '^| prism | 2 | n/a | n/a |' $s3/out && grep -q '^| uniform | 2 | 3.0500 |' $s3/out && grep -q '^prism: no conclusion: a final val loss is NaN' $s3/out && [ -s $s3/loss.png ]"
printf 's:0 tel:10.8\ns:0 trl:10.7 lr:0.001 norm:1.0\ns:1 trl:9.0 lr:0.001 norm:1.0\n' > $s2/prism_seed3/main.log
expect_error "ab_report (uniform, prism): an unfinished run is an error" "^error: $s2/prism_seed3/main.log: unfinished run" \
  $PYTHON scripts/ab_report.py $s2 --arms uniform,prism
expect_error "ab_report: an empty directory is an error" "^error: $d/ab: no <arm>_seed<S>/main.log runs" \
  $PYTHON scripts/ab_report.py $d/ab

# ------------------------------------------------------------------------------------------------
# run_gpt2.sh's data order, sd_init_sweep.py's arms
check "run_gpt2.sh --data-seed 7: -data_seed 7 on the trainer's line; none by default" \
  bash -c "grep -q -- ' -data_seed 7; done' <<< \"\$1\" && ! grep -q -- '-data_seed' <<< \"\$2\"" _ \
  "$("$sb/scripts/run_gpt2.sh" --size 124M --data-seed 7 --dry-run 2>/dev/null)" "$("$sb/scripts/run_gpt2.sh" --size 124M --dry-run 2>/dev/null)"
# sd_init_sweep.py: the arms' trainer commands (the sweep itself is an experiment, not a test)
sw=$("$PYTHON" sd_attention/sd_init_sweep.py --dry-run --steps 7 --out "$d/sweep" 2>&1)
check "sd_init_sweep --dry-run: 8 arms, each -ln 0 on 4:sd*4 with its own S-D options and lr" \
  bash -c "[ \$(grep -c '^./train_gpt2 -e L4C128H4T128 -layers $d/sweep/table.txt -ln 0 ' <<< \"\$1\") -eq 8 ] &&
           grep -q -- '-sd_init_s 0.0 -sd_decay_s 0 -sd_init_u 1.0 .* -l 0.003 .*-o $d/sweep/zero_init_lr3e-3 -y 1$' <<< \"\$1\" &&
           grep -q -- '-sd_decay_s 1 .*-x 7 .*-o $d/sweep/decay -y 1$' <<< \"\$1\"" _ "$sw"
expect_error "sd_init_sweep --steps 0" "^error: --steps 0: expected a positive integer" "$PYTHON" sd_attention/sd_init_sweep.py --steps 0

# ------------------------------------------------------------------------------------------------
# sd_claims.py --dry-run of doc/sd_attention.md's small-scale command, bench_cpu.sh's arguments
out=$("$PYTHON" sd_attention/sd_claims.py --sizes small --data shakespeare --steps 400 --arms sd_noln,mha --out "$d/sdx" --dry-run 2>&1); rc=$?
n_train=$(grep -c "^OMP_NUM_THREADS=[0-9]* ./train_gpt2 -e L8C256H4T256 .* -i dev/data/tinyshakespeare/tiny_shakespeare_train.bin .* -b 4 -t 128 -x 400 .* > $d/sdx/small/seed1/[a-z_]*.train.log$" <<< "$out")
n_surg=$(grep -c "^OMP_NUM_THREADS=[0-9]* ./sd_surgery .* -op linearize -k [1-7] .* > $d/sdx/small/seed1/[a-z_]*.lin[1-7].log$" <<< "$out")
check "sd_claims --dry-run (small, TinyShakespeare, 400 steps, sd_noln and mha): exit 0, 2 trainings and 14 linearizations printed with their logs ($rc, $n_train, $n_surg)" \
  test "$rc" = 0 -a "$n_train" = 2 -a "$n_surg" = 14
check "sd_claims --dry-run writes nothing" test ! -e "$d/sdx"
out=$(scripts/bench_cpu.sh --help 2>&1); rc=$?
check "bench_cpu --help: usage, exit 0" bash -c "[ $rc = 0 ] && grep -q 'bash scripts/bench_cpu.sh \[MODEL' <<< \"\$1\"" _ "$out"
expect_error "bench_cpu: an unknown flag" "^error: --foo: unknown flag" scripts/bench_cpu.sh --foo
expect_error "bench_cpu --blas: a kernel-set name with a space" "^error: OPENBLAS_CORETYPE 'Sky lakeX': expected a kernel set name" \
  scripts/bench_cpu.sh --blas 'Sky lakeX'
check "bench_cpu --help: the --blas form" bash -c "grep -q 'bash scripts/bench_cpu.sh --blas \[CORETYPE' <<< \"\$1\"" _ "$(scripts/bench_cpu.sh --help 2>&1)"
check "bench_cpu --help: the --rows form" bash -c "grep -q 'bash scripts/bench_cpu.sh --rows \[STEPS ROUNDS\]' <<< \"\$1\"" _ "$(scripts/bench_cpu.sh --help 2>&1)"
out=$(scripts/check_learning.sh --help 2>&1); rc=$?
check "check_learning --help: usage, exit 0" bash -c "[ $rc = 0 ] && grep -q 'bash scripts/check_learning.sh \[--bin TRAINER\]' <<< \"\$1\"" _ "$out"
expect_error "check_learning: --rows 2" "^error: --rows '2': expected 0 or 1" scripts/check_learning.sh --rows 2
expect_error "check_learning: an unknown argument" "^error: --fast: unknown argument" scripts/check_learning.sh --fast
expect_error "bench_cpu: a non-numeric STEPS" "^error: STEPS 'x': expected a positive integer" \
  scripts/bench_cpu.sh L2C64H2 prism/schedules/L8C256_uniform.txt prism/schedules/L8C256_prism.txt 4 16 x 1
out=$(scripts/bench_cpu.sh L2C64H2 prism/schedules/L8C256_uniform.txt prism/schedules/L8C256_prism.txt 4 16 2 1 2>&1); rc=$?
check "bench_cpu: a trainer error stops it with the trainer's message, no tok/s line (exit $rc)" \
  bash -c "[ $rc != 0 ] && grep -q 'the model has 2' <<< \"\$1\" && ! grep -q 'tok/s' <<< \"\$1\"" _ "$out"

# ------------------------------------------------------------------------------------------------
# sample.py: a prompt continued from a checkpoint
./train_gpt2 -e tiny -i dev/data/tinyshakespeare/tiny_shakespeare_train.bin -j dev/data/tinyshakespeare/tiny_shakespeare_val.bin \
  -b 1 -t 16 -x 1 -v 0 -m 1 -s 0 -n 1 -o "$d/sample_run" > "$d/sample_run.log" 2>&1
ck=$d/sample_run/model_00000001.bin
s1=$("$PYTHON" scripts/sample.py -e "$ck" --prompt "ROMEO:" -n 6 --top_k 20 2>&1); rc=$?
s2=$("$PYTHON" scripts/sample.py -e "$ck" --prompt "ROMEO:" -n 6 --top_k 20 2>&1)
s3=$("$PYTHON" scripts/sample.py -e "$ck" --prompt "ROMEO:" -n 6 --top_k 20 --seed 7 2>&1)
check "sample.py: exit 0, a header line and the prompt first (rc $rc: $(tail -n 1 <<< "$s1"))" \
  bash -c "[ $rc = 0 ] && [[ \"\$(sed -n 1p <<< \"\$1\")\" == '--- sample 1 (6 tokens, seed 1337, temperature 1, top_k 20)' ]] && [[ \"\$(sed -n 2p <<< \"\$1\")\" == ROMEO:* ]]" _ "$s1"
check "sample.py: the same seed gives the same text, another seed another" test -n "$s1" -a "$s1" = "$s2" -a "$s1" != "$s3"
expect_error "sample.py: -n 0" "^error: -n 0: expected at least 1 token" "$PYTHON" scripts/sample.py -e "$ck" -n 0
expect_error "sample.py: a missing checkpoint" "^error: -e $d/none.bin: no such checkpoint" "$PYTHON" scripts/sample.py -e "$d/none.bin"
# dev/gpu_science.sh: each environment setting out of range is one line, before anything runs
rm -rf "$d/gs_bad"
for setting in "GPU_SCIENCE_BUDGET=abc|GPU_SCIENCE_BUDGET=abc: expected a positive integer" \
               "GPU_SCIENCE_THREADS=0|GPU_SCIENCE_THREADS=0: expected a positive integer" \
               "GPU_SCIENCE_DATA=fineweb|GPU_SCIENCE_DATA=fineweb: expected prose or shakespeare" \
               "GPU_SCIENCE_HOST=2|GPU_SCIENCE_HOST=2: expected 0 or 1" \
               "GPU_SCIENCE_ASSUME=1 2 3|GPU_SCIENCE_ASSUME='1 2 3': expected five integers"; do
  expect_error "gpu_science.sh: ${setting%%|*}" "^error: ${setting#*|}" \
    env "${setting%%|*}" GPU_SCIENCE_OUT="$d/gs_bad" bash dev/gpu_science.sh
done
check "gpu_science.sh: the refused settings wrote nothing" test ! -e "$d/gs_bad"
finish
