#!/usr/bin/env bash
# test/test_gpu_build.sh: the GPU binaries that `make test` builds (build/gpu_compile_check lists
# them: train_gpt2cu for {cuDNN, no cuDNN} x {NCCL + MPI, single GPU}, test_gpt2cu, eval_gpt2cu, the dev/cuda
# attention, S-D fold and linear-attention checks), checked without running any GPU code:
#   - every binary holds SASS for sm_80 and sm_90 and PTX for compute_90 (read from the fatbins
#     of its .nv_fatbin section; no cuobjdump needed);
#   - the libraries each variant links: libcudnn + libnvrtc only with cuDNN, libnccl + libmpi
#     only with multi-GPU, NVML never (doc/formats.md "Build facts", "Upstream weak spots" #10);
#   - --help runs on a machine without a GPU and lists -attn (generated from llmc/args.h);
#   - bad flags and impossible requests are one error line and a non-zero exit, before any GPU
#     work: an unknown -attn value, -attn cudnn in a build without cuDNN, -pn 2 with -pi mpi
#     outside mpirun, -pn 2 in a single-GPU build, a build without MPI under an MPI launcher;
#   - without a GPU, a training run stops with one "error:" line (a CUDA error), not a crash;
#   - the build's own checks (mk/cuda.mk): a CUDNN_HOME without libcudnn stops a cuDNN build with
#     one line before any compile, and leaves builds without cuDNN alone; the cuDNN frontend
#     search; the architectures from nvidia-smi; the multiarch library folders.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
PYTHON=${PYTHON:-/usr/bin/python3}
list=build/gpu_compile_check
if [ ! -f "$list" ]; then
  fail "$list is missing: run make build/gpu_compile_check"
  finish
  exit 1
fi

archs() {  # binary -> "kind:arch" entries of every embedded fatbin, sorted and unique
  $PYTHON - "$1" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
magic = struct.pack("<I", 0xBA55ED50)
found = set()
i = data.find(magic)
while i >= 0:
    version, header, size = struct.unpack_from("<HHQ", data, i + 4)
    off, end = i + header, i + header + size
    while off + 32 <= end and off + 32 <= len(data):
        kind, _, ehdr, padded = struct.unpack_from("<HHII", data, off)
        arch = struct.unpack_from("<I", data, off + 28)[0]
        if kind not in (1, 2) or ehdr == 0:
            break
        found.add(("ptx" if kind == 1 else "sm") + "_" + str(arch))
        off += ehdr + padded
    i = data.find(magic, i + 4)
print(" ".join(sorted(found)))
EOF
}

while read -r bin; do
  name=$(basename "$bin")
  if [ ! -x "$bin" ]; then fail "$bin: not built"; continue; fi
  a=$(archs "$bin")
  [ "$a" = "ptx_90 sm_80 sm_90" ] && pass "$name: SASS sm_80 + sm_90, PTX compute_90, nothing else ($a)" \
    || fail "$name: expected exactly 'ptx_90 sm_80 sm_90', found '$a'"
  libs=$(ldd "$bin" 2>/dev/null)
  has() { printf '%s' "$libs" | grep -q "$1"; }
  # Every dynamically linked binary lists libc: without it ldd said nothing useful, and each
  # "not linked" check below would pass on an empty list.
  if ! has 'libc\.so'; then fail "$name: ldd lists no libraries (not even libc)"; continue; fi
  case $name in
    *cudnn*) has libcudnn && has libnvrtc && pass "$name links libcudnn and libnvrtc" || fail "$name: libcudnn/libnvrtc missing" ;;
    *) has libcudnn && fail "$name links libcudnn without cuDNN" || pass "$name: no libcudnn" ;;
  esac
  case $name in
    *_mpi) has libnccl && has libmpi && pass "$name links NCCL and MPI" || fail "$name: libnccl/libmpi missing" ;;
    *_single|eval_gpt2cu_*|attention_*|sd_fold_check|linear_attention_check)
      has libnccl || has libmpi && fail "$name links NCCL/MPI" || pass "$name: no NCCL, no MPI" ;;
  esac
  has libnvidia-ml && fail "$name links NVML" || pass "$name: NVML not linked"
done < "$list"

d=build/gpu_variants
for v in cudnn_mpi stub_single; do
  b=$d/train_gpt2cu_$v
  out=$($b --help 2>&1)
  rc=$?
  [ $rc -eq 0 ] && printf '%s' "$out" | grep -q -- '-attn .*{auto|cudnn|own|flash|mma}' && pass "$v: --help without a GPU lists -attn" \
    || fail "$v: --help (exit $rc)"
  expect_error "$v: -attn bogus" "^error: -attn 'bogus': expected one of \{auto\|cudnn\|own\|flash\|mma\}$" $b -attn bogus
done
expect_error "stub build: -attn cudnn" "^error: -attn cudnn: this binary was built without cuDNN" $d/train_gpt2cu_stub_single -attn cudnn
expect_error "MPI build: -pn 2 outside mpirun" "^error: -pi mpi with -pn 2: start the processes with mpirun" \
  env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u PMIX_RANK $d/train_gpt2cu_cudnn_mpi -pn 2
expect_error "single-GPU build under mpirun -np 2 (not N copies of one run)" \
  "^error: -pi mpi: started by an MPI launcher with 2 processes, but this binary was built without MPI" \
  env OMPI_COMM_WORLD_SIZE=2 $d/train_gpt2cu_stub_single
expect_error "single-GPU build: -pn 2" "^error: -pn 2: this binary was built with NO_MULTI_GPU=1" \
  $d/train_gpt2cu_stub_single -pn 2 -pi fs -pf build
expect_error "test_gpt2cu without arguments" "^usage: " $d/test_gpt2cu_cudnn_mpi
# the GPU evaluator: the CPU program's front end (llmc/eval_cli.h), so its flags and its checks of
# the task files come before any GPU work
e=$d/eval_gpt2cu_cudnn
out=$($e --help 2>&1)
rc=$?
[ $rc -eq 0 ] && printf '%s' "$out" | grep -q -- '-tasks' && printf '%s' "$out" | grep -q -- '-scores' \
  && pass "eval_gpt2cu --help without a GPU lists -tasks and -scores" || fail "eval_gpt2cu --help (exit $rc)"
expect_error "eval_gpt2cu without -e" "^error: -e: a model is required" $e -tasks piqa
expect_error "eval_gpt2cu: a missing eval file, before any GPU work" \
  "^error: build/no_such_dir/piqa/piqa_val.bin: eval file not found \(-dir build/no_such_dir, working directory $PWD; make evals writes the five; or: python dev/data/piqa.py\)$" \
  $e -e tiny -tasks piqa -dir build/no_such_dir
expect_error "dev/cuda flags: a zero batch, before any GPU work" "^error: -B '0': expected an integer 1\.\.1000000$" \
  $d/attention_flash -B 0
expect_error "dev/cuda flags: -time takes 0 or 1" "^error: -time '2': expected an integer 0\.\.1$" $d/sd_fold_check -time 2
# dev/gpu_check.sh runs only on a GPU machine, where a syntax error would cost the whole run
bash -n dev/gpu_check.sh && pass "dev/gpu_check.sh parses (bash -n)" || fail "dev/gpu_check.sh: bash -n"
if ! nvidia-smi -L >/dev/null 2>&1; then
  for v in cudnn_mpi stub_single; do
    expect_error "$v without a GPU" "^error: .*CUDA" $d/train_gpt2cu_$v -e tiny -b 2 -t 32
  done
  if [ -f dev/data/piqa/piqa_val.bin ]; then
    expect_error "eval_gpt2cu without a GPU" "^error: .*CUDA" $e -e tiny -tasks piqa -n 2
  else
    fail "dev/data/piqa/piqa_val.bin missing (make evals)"
  fi
  for p in attention_own attention_flash attention_mma sd_fold_check linear_attention_check; do
    expect_error "$p without a GPU" "^error: .*CUDA" $d/$p -time 0
  done
else
  echo "NOTE a GPU is present: the no-GPU error checks are skipped; the GPU checks are dev/gpu_check.sh's"
fi
# cuDNN installed from apt (headers in /usr/include, CUDNN_HOME=/usr): the cuDNN object's compile
# command must not put /usr/include on the -isystem list (that broke libstdc++'s <cstdlib>), and
# that command compiles here
cmd=$(make -s -n -B build/cuda/cudnn_att_cudnn.o CUDNN_HOME=/usr 2>/dev/null | grep 'cudnn.cpp')
check "apt's cuDNN layout: no -isystem /usr/include in the cuDNN compile" test -n "$cmd" -a -z "$(printf '%s' "$cmd" | grep -e '-isystem /usr/include\( \|$\)')"
syntax=$(printf '%s' "$cmd" | sed -e 's/ -c / -fsyntax-only /' -e 's/ -o [^ ]*//')
check "apt's cuDNN layout: the cuDNN code compiles with it" bash -c "$syntax"

# A CUDNN_HOME with include/cudnn.h but no libcudnn.so*: a cuDNN build stops at once with one
# line naming CUDNN_HOME and the folders searched (it used to link with an empty -L and -rpath,
# and nvcc died with "Unknown option '-rpath'"); builds without cuDNN are not affected
nolib=$PWD/build/tmp_gpu_build_nolib
rm -rf "$nolib" && mkdir -p "$nolib/include" && : > "$nolib/include/cudnn.h"
multiarch=$(make -s gpu_config | sed -n 's/^machine: \([^;]*\);.*/\1/p')
expect_error "USE_CUDNN=1 with a CUDNN_HOME without libcudnn: one line, before any compile" \
  "\*\*\* CUDNN_HOME=$nolib: no libcudnn\.so\* in $nolib/lib64, $nolib/lib or /usr/lib/$multiarch " \
  make -n train_gpt2cu USE_CUDNN=1 CUDNN_HOME="$nolib"
out=$(make -n train_gpt2cu USE_CUDNN=1 CUDNN_HOME="$nolib" 2>/dev/null)
check "USE_CUDNN=1 without libcudnn: nothing would be compiled first" test -z "$(printf '%s' "$out" | grep nvcc)"
expect_error "gpu_compile_check (always links cuDNN) with that CUDNN_HOME: the same line at the link" \
  "\*\*\* CUDNN_HOME=$nolib: no libcudnn\.so\*" make -n -B build/gpu_variants/eval_gpt2cu_cudnn CUDNN_HOME="$nolib"
check "that CUDNN_HOME without USE_CUDNN=1: make -n train_gpt2cu still works" \
  bash -c "make -n train_gpt2cu CUDNN_HOME='$nolib' > /dev/null"
check "that CUDNN_HOME and USE_CUDNN=1: make -n train_gpt2 (the CPU trainer) still works" \
  bash -c "make -n train_gpt2 USE_CUDNN=1 CUDNN_HOME='$nolib' > /dev/null"

# Finding the cuDNN frontend (mk/cudnn_frontend.sh): the active environment first, then llm.c's
# ~/cudnn-frontend, then the system Pythons; a frontend older than 1.13.0 is one line
fe=$PWD/build/tmp_gpu_build_fe
rm -rf "$fe" && mkdir -p "$fe"
mkfront() {  # dir version -> a fake include dir with cudnn_frontend.h and a version header
  mkdir -p "$1"
  : > "$1/cudnn_frontend.h"
  IFS=. read -r ma mi pa <<< "$2"
  printf '#define CUDNN_FRONTEND_MAJOR_VERSION %s\n#define CUDNN_FRONTEND_MINOR_VERSION %s\n#define CUDNN_FRONTEND_PATCH_VERSION %s\n' "$ma" "$mi" "$pa" > "$1/cudnn_frontend_version.h"
}
fakepy() {  # path include-dir -> a "python" that reports include-dir as its pip package's
  mkdir -p "$(dirname "$1")"
  printf '#!/bin/sh\ncat > /dev/null\necho %s\n' "$2" > "$1"
  chmod +x "$1"
}
mkfront "$fe/venv_fe" 1.32.0; mkfront "$fe/home/cudnn-frontend/include" 1.20.0; mkfront "$fe/sys_fe" 1.32.0
mkfront "$fe/old" 1.12.1
fakepy "$fe/venv/bin/python" "$fe/venv_fe"; fakepy "$fe/sys/python3" "$fe/sys_fe"
found=$(cd "$fe" && HOME=$fe/home VIRTUAL_ENV=$fe/venv bash "$OLDPWD/mk/cudnn_frontend.sh" find "$fe/sys/python3")
check "frontend search: the active virtualenv's package first ($found)" test "$found" = "$fe/venv_fe"
found=$(cd "$fe" && HOME=$fe/home env -u VIRTUAL_ENV -u CONDA_PREFIX bash "$OLDPWD/mk/cudnn_frontend.sh" find "$fe/sys/python3")
check "frontend search: then ~/cudnn-frontend/include, llm.c's place ($found)" test "$found" = "$fe/home/cudnn-frontend/include"
found=$(cd "$fe" && HOME=$fe/nohome env -u VIRTUAL_ENV CONDA_PREFIX=$fe/noconda bash "$OLDPWD/mk/cudnn_frontend.sh" find "$fe/sys/python3")
check "frontend search: then the given Pythons' packages ($found)" test "$found" = "$fe/sys_fe"
check "frontend 1.32.0 passes the version check" bash mk/cudnn_frontend.sh check "$fe/venv_fe"
expect_error "frontend 1.12.1: one line, older than 1.13.0" "^error: $fe/old: cudnn_frontend 1\.12\.1 is older than 1\.13\.0 \(no SDPA set_generate_stats\): pip install nvidia-cudnn-frontend==1\.32\.0" \
  bash mk/cudnn_frontend.sh check "$fe/old"
expect_error "no frontend found: one line naming the places searched" "^error: cudnn_frontend\.h not found \(searched the active environment" \
  bash mk/cudnn_frontend.sh check ""
out=$(g++ -std=c++17 -fsyntax-only -DENABLE_CUDNN -isystem "$fe/old" -I/usr/local/cuda/include llmc/attention/cudnn.cpp 2>&1)
check "cudnn.cpp against frontend 1.12.1: the compile stops with its own #error" \
  bash -c "grep -q 'cudnn_frontend is older than 1.13.0' <<< \"\$1\"" _ "$out"
# Architectures from nvidia-smi (a stand-in here): a GPU newer than the toolkit builds the
# toolkit's newest arch as SASS + PTX, one older than sm_80 is left out, each with a note; a given
# GPU_COMPUTE_CAPABILITY the project or nvcc cannot build is an error
mkdir -p "$fe/smi"
printf '#!/bin/sh\nprintf "%%s\\n" $FAKE_CC\n' > "$fe/smi/nvidia-smi"
chmod +x "$fe/smi/nvidia-smi"
newest=$(make -s gpu_config | sed -n 's/.*nvcc targets: \(.*\); Python.*/\1/p' | tr ' ' '\n' | grep . | sort -n | tail -n 1)
out=$(FAKE_CC="9.0 99.9" PATH=$fe/smi:$PATH make -s gpu_config 2>&1)
check "nvidia-smi reports sm_90 and an sm_999 this nvcc lacks: archs 90 $newest, with a note" \
  bash -c "grep -q 'archs: 90 $newest (check' <<< \"\$1\" && grep -q '^note: nvidia-smi reports sm_999, which .* cannot target: building for sm_$newest (SASS and PTX' <<< \"\$1\"" _ "$out"
out=$(FAKE_CC="7.5 8.6" PATH=$fe/smi:$PATH make -s gpu_config 2>&1)
check "nvidia-smi reports sm_75 and sm_86: archs 86, sm_75 left out with a note" \
  bash -c "grep -q 'archs: 86 (check' <<< \"\$1\" && grep -q '^note: nvidia-smi reports sm_75: older than sm_80' <<< \"\$1\"" _ "$out"
expect_error "GPU_COMPUTE_CAPABILITY=75: pre-Ampere is an error" "GPU_COMPUTE_CAPABILITY=75: '75' is not 80 or newer" \
  make -s gpu_config GPU_COMPUTE_CAPABILITY=75
expect_error "GPU_COMPUTE_CAPABILITY=95: an arch nvcc lacks is an error naming the ones it has" \
  "GPU_COMPUTE_CAPABILITY=95: .*nvcc cannot target '95' \(it targets .*90" make -s gpu_config GPU_COMPUTE_CAPABILITY=95
# library paths follow the machine (aarch64 on GH200); a build without mpi.h says so
printf '#!/bin/sh\n[ "$1" = -print-multiarch ] && echo aarch64-linux-gnu\n' > "$fe/smi/fakecc"
chmod +x "$fe/smi/fakecc"
check "the multiarch directory comes from the compiler (aarch64-linux-gnu)" \
  bash -c "make -s gpu_config CC=$fe/smi/fakecc | grep '^machine: aarch64-linux-gnu;' > /dev/null"
check "no mpi.h: the multi-GPU line says NCCL with tcp/fs only, and why" \
  bash -c "make -s gpu_config OPENMPI_DIR=$fe/nompi | grep 'multi-GPU: nccl .*note: no mpi.h under OPENMPI_DIR=$fe/nompi: NCCL with -pi tcp/fs only' > /dev/null"
finish
