# Makefile: build the trainers and tests, prepare the offline data, run the main job and tests.
#
#   make deps         install the dependencies (Debian packages, pinned PyPI list; mk/deps.sh):
#                     once per machine, idempotent
#   make train        TinyShakespeare + tokenizer from ../shared/data, build, train a small Prism
#                     model on the CPU (a few minutes on 2 cores)
#   make test         every test; ends with "N passed, N failed"
#   make bench_cpu    tokens/s of uniform vs Prism, measured side by side
#   make prose        the offline prose corpus as token shards (runs larger than TinyShakespeare)
#   make prose_bytes  the same corpus as byte-level shards (V 256) + bytes_tokenizer.bin
#   make test SANITIZE=1   the same suite on programs and tests built with AddressSanitizer and
#                     UndefinedBehaviorSanitizer (any report fails the test that triggered it)
#
# Variables: NO_OMP=1 (single-threaded build), PYTHON=... (a Python 3 with torch and numpy),
# CC=... (default gcc), SANITIZE=1 (see above; `make` without it rebuilds the plain programs),
# USE_BLAS=1 (the CPU matmuls through OpenBLAS: faster, reproducible at a fixed thread count;
# Debian's libopenblas-openmp-dev; doc/verification.md "The BLAS build").

ifeq ($(origin CC),default)
CC = gcc
endif
PYTHON ?= $(shell command -v /usr/bin/python3 2>/dev/null || command -v python3)

# -ffast-math minus -ffinite-math-only: reassociation lets the compiler vectorize the reductions,
# while isfinite()/INFINITY keep working (the trainer checks for a non-finite grad norm).
MATHFLAGS = -fno-math-errno -fassociative-math -fno-signed-zeros -fno-trapping-math -freciprocal-math
ifeq ($(SANITIZE),1)
CFLAGS ?= -O2 -march=native
else
CFLAGS ?= -O3 -march=native
endif
CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra $(MATHFLAGS)
# The finite-difference test must see exact IEEE arithmetic.
CFLAGS_EXACT = -O2 -march=native -std=c11 -D_GNU_SOURCE -Wall -Wextra
LDLIBS = -lm
# SANITIZE=1: ASan + UBSan on every program the host compilers build (the CPU programs and tests,
# the GPU trainer's host build in build/host_cuda); nvcc's objects and the GPU build checks are
# left as they are. build/flavour names the flavour the binaries were built as: a switch rebuilds.
SAN_FLAGS = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g
ifeq ($(SANITIZE),1)
FLAVOUR = sanitize
CFLAGS += $(SAN_FLAGS)
CFLAGS_EXACT += $(SAN_FLAGS)
HOST_SAN = $(SAN_FLAGS)
else
FLAVOUR = plain
HOST_SAN =
endif
# USE_BLAS=1: cblas_sgemm for the CPU matmuls (llmc/cpu/kernels.h). OpenBLAS's OpenMP build, so
# that its threads are the program's OpenMP threads (OMP_NUM_THREADS); the rpath keeps that
# build when the system's libopenblas.so.0 alternative points at the pthreads one. The
# build/blas/ programs (test/test_blas.sh; scripts/ab_upstream.sh --cpu --ours
# build/blas/upstream_cpu_loop) are always built this way.
BLAS_PC = $(firstword $(foreach p,openblas-openmp openblas,$(shell pkg-config --exists $(p) 2>/dev/null && echo $(p))))
BLAS_MISSING = USE_BLAS=1: OpenBLAS not found by pkg-config (Debian/Ubuntu: apt install libopenblas-openmp-dev)
BLAS_CFLAGS = -DUSE_BLAS $(shell pkg-config --cflags $(BLAS_PC))
BLAS_LDLIBS = $(shell pkg-config --libs $(BLAS_PC)) \
              $(foreach d,$(patsubst -L%,%,$(filter -L%,$(shell pkg-config --libs $(BLAS_PC)))),-Wl,-rpath,$(d))
ifeq ($(USE_BLAS),1)
$(if $(BLAS_PC),,$(error $(BLAS_MISSING)))
CFLAGS += $(BLAS_CFLAGS)
LDLIBS += $(BLAS_LDLIBS)
FLAVOUR := $(FLAVOUR)-blas
endif
FLAVOUR_STAMP = build/flavour
$(shell mkdir -p build; [ "$$(cat $(FLAVOUR_STAMP) 2>/dev/null)" = $(FLAVOUR) ] || echo $(FLAVOUR) > $(FLAVOUR_STAMP))
ifneq ($(NO_OMP),1)
CFLAGS += -fopenmp
CFLAGS_EXACT += -fopenmp
else
CFLAGS += -Wno-unknown-pragmas
CFLAGS_EXACT += -Wno-unknown-pragmas
endif

SRC_HEADERS = $(wildcard llmc/*.h llmc/*/*.h prism/*.h sd_attention/*.h kinds/*.h)
# what every host-compiled program depends on: the headers and the flavour it is built as
HEADERS = $(SRC_HEADERS) $(FLAVOUR_STAMP)
TEST_HEADERS = $(wildcard test/*.h)
C_TESTS = test_gpt2_cpu test_schedulers test_layer_table test_kernels_fd test_param_layout test_rand test_checkpoint test_tokenizer test_vocab \
          test_dataloader test_headers_cxx test_scalar_math
TEST_BINS = $(addprefix build/,$(C_TESTS))
TOOLKIT_TEST_BINS =

TS_DIR = dev/data/tinyshakespeare
TS_DATA = $(TS_DIR)/tiny_shakespeare_train.bin $(TS_DIR)/tiny_shakespeare_val.bin
# the same text as bytes (V 256), on which the test suites train their small models
TS_BYTES = $(TS_DIR)/tiny_shakespeare_bytes_train.bin $(TS_DIR)/tiny_shakespeare_bytes_val.bin
TOKENIZER = gpt2_tokenizer.bin
BYTES_TOKENIZER = bytes_tokenizer.bin

.PHONY: all deps train test data bench_cpu clean

all: train_gpt2

# Module fragments add their programs to ALL_BINS and their test binaries to TEST_BINS.
ALL_BINS = train_gpt2
include $(sort $(wildcard mk/*.mk))

train_gpt2: train_gpt2.c $(HEADERS)
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

deps:
	bash mk/deps.sh

build:
	mkdir -p build

build/test_kernels_fd: test/test_kernels_fd.c $(HEADERS) $(TEST_HEADERS) | build
	$(CC) $(CFLAGS_EXACT) $< -o $@ $(LDLIBS)

# a layer kind added outside llmc/ (test/toy_kind.h, doc/design.md): finite differences, so exact
TEST_BINS += build/test_layer_kind
build/test_layer_kind: test/test_layer_kind.c $(HEADERS) $(TEST_HEADERS) | build
	$(CC) $(CFLAGS_EXACT) $< -o $@ $(LDLIBS)

# the CPU model's logits and greedy tokens for a file of token windows, which the Hugging Face
# export's test compares with transformers (test/test_export_hf.py, doc/export.md)
TEST_BINS += build/dump_logits

# upstream llm.c's CPU demo run on this project's model (scripts/ab_upstream.sh --cpu)
build/upstream_cpu_loop: dev/cpu/upstream_cpu_loop.c $(HEADERS) | build
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)
TEST_BINS += build/upstream_cpu_loop

# The BLAS build of the CPU programs, beside the default ones (test/test_blas.sh compares them)
BLAS_BINS = build/blas/train_gpt2 build/blas/test_gpt2_cpu build/blas/upstream_cpu_loop
# (not under SANITIZE=1, which skips the blas suite)
TEST_BINS += $(if $(filter 1,$(SANITIZE)),,$(if $(BLAS_PC),$(BLAS_BINS)))
build/blas/train_gpt2: train_gpt2.c $(HEADERS)
build/blas/test_gpt2_cpu: test/test_gpt2_cpu.c $(HEADERS) $(TEST_HEADERS)
build/blas/upstream_cpu_loop: dev/cpu/upstream_cpu_loop.c $(HEADERS)
$(BLAS_BINS):
	@$(if $(BLAS_PC),,echo "error: $(BLAS_MISSING)" >&2; exit 1)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -DUSE_BLAS,$(CFLAGS)) $(BLAS_CFLAGS) $< -o $@ $(LDLIBS) $(BLAS_LDLIBS)

# Every llmc/ and prism/ header must compile as C++17 too: train_gpt2.cu includes them unchanged.
build/test_headers_cxx: test/test_headers_cxx.cpp $(HEADERS) | build
	g++ -std=c++17 -O1 -Wall -Wextra -Wno-unknown-pragmas -D_GNU_SOURCE $(HOST_SAN) $< -o $@ $(LDLIBS)

build/%: test/%.c $(HEADERS) $(TEST_HEADERS) | build
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

$(TS_DATA):
	$(PYTHON) dev/data/tinyshakespeare.py

$(TS_BYTES):
	$(PYTHON) dev/data/tinyshakespeare.py --bytes

$(TOKENIZER):
	$(PYTHON) dev/data/gpt2_tokenizer.py

data: $(TS_DATA) $(TS_BYTES) $(TOKENIZER) $(BYTES_TOKENIZER)

# The offline English prose corpus (18.5M train + 1.0M val tokens) for runs larger than
# TinyShakespeare: dev/data/prose/prose_{val,train}_*.bin (dev/data/prose.py; about 15 s)
PROSE_VAL = dev/data/prose/prose_val_000000.bin
$(PROSE_VAL):
	$(PYTHON) dev/data/prose.py
prose: $(PROSE_VAL)
.PHONY: prose

# The same corpus as byte-level shards (token = byte, V 256, EOT 0; doc/formats.md "The byte vocabulary and its shards"):
# dev/data/prose_bytes/prose_bytes_{val,train}_*.bin (82.3M train + 4.5M val tokens) and the
# tokenizer file for -tok, bytes_tokenizer.bin (dev/data/prose_bytes.py; 4-15 s)
PROSE_BYTES_VAL = dev/data/prose_bytes/prose_bytes_val_000000.bin
$(PROSE_BYTES_VAL):
	$(PYTHON) dev/data/prose_bytes.py
$(BYTES_TOKENIZER):
	$(PYTHON) dev/data/bytes_tokenizer.py
prose_bytes: $(PROSE_BYTES_VAL) $(BYTES_TOKENIZER)
.PHONY: prose_bytes

# The main job: a small Prism GPT (8 layers, C 256, heads 1-1-2-2-4-4-4-4, i.e. head sizes
# 256/128/64) on TinyShakespeare, 300 steps of 512 tokens, val loss every 50 steps, a sample every
# 100, a checkpoint every 50 steps in out/shakespeare_prism (the last two kept). -y 1: `make train`
# again resumes the run (after Ctrl-C, which writes a checkpoint first), or ends at once if done.
train: train_gpt2 data
	./train_gpt2 -e L8C256H4T256 -prism prism/schedules/L8C256_prism.txt \
	  -i '$(TS_DIR)/tiny_shakespeare_train.bin' -j '$(TS_DIR)/tiny_shakespeare_val.bin' \
	  -b 4 -t 128 -x 300 -l 1e-3 -u 20 -q 0.1 -c 0.1 -v 50 -m 8 -s 100 -g 64 \
	  -n 50 -nk 2 -y 1 -o out/shakespeare_prism

# Without the CUDA toolkit (no nvcc, or NVCC=/nonexistent/nvcc) the tests that build GPU code are
# skipped with one line saying so; under CI=true that is an error, so CI builds every GPU variant.
# SANITIZE=1 runs the suites of the C and C++ programs and skips, in one line: the Python suites
# (data, bytes_data, reference, layout, spectrum_numpy, import_hf, export_hf, import_heads, prescribe, plots,
# floors, routing_null: no sanitized code of their own; spectrum_grad: sd_spectrum's gradient mode, the
# CPU model's forward and backward that gpt2_vs_pytorch runs sanitized),
# gpu_build (nvcc's binaries, not sanitized), fuzz (built with the sanitizers already), and the
# suites whose C code others run sanitized, at 10-60 times their plain cost under ASan:
# gpu_check_host (the host GPU binaries of gpt2cu_host in 21 more configurations), flash_mma_emul
# (the register-tile kernels, which gpt2cu_host runs with -attn mma), attention_fd, sd_fd and
# sd_stability (finite differences and 30 steps of the layers gpt2_vs_pytorch checks), evals
# (eval_gpt2's reader and scoring: evalloader, fuzz and train's -h evals), scripts (shell
# around the trainer, plus upstream llm.c's CPU loop), ab, search and sd_claims (the experiment drivers:
# short trainings and the analysis tools, which their own suites run sanitized), fresh_clone (the
# drivers' own make builds plain programs in a copy of the tree), blas (the model code
# gpt2_vs_pytorch runs, with OpenBLAS's matmuls) and gpu_science_host (dev/gpu_science.sh on the
# CPU: shell around short runs of train_gpt2, sd_spectrum, sd_surgery and attn_distance, which
# their own suites run sanitized; under ASan its runs would pass the suite's 60 s).
SAN_SKIP_TESTS = data bytes_data reference layout spectrum_numpy import_hf export_hf import_heads prescribe plots floors routing_null \
                 spectrum_grad gpu_build fuzz gpu_check_host \
                 flash_mma_emul attention_fd sd_fd sd_stability evals lm_eval scripts ab search sd_claims blas fresh_clone \
                 gpu_science_host
# Every report goes to a file under build/logs/sanitizer/ (whatever a test does with a program's
# stderr), and test/run_all.sh fails the test during which one appeared.
SAN_REPORTS = $(CURDIR)/build/logs/sanitizer
SAN_ENV = SANITIZER_REPORTS=$(SAN_REPORTS) \
          ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:exitcode=86:log_path=$(SAN_REPORTS)/asan \
          UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=87:log_path=$(SAN_REPORTS)/ubsan
ifeq ($(HAVE_CUDA_TOOLKIT),1)
TEST_PREREQS = $(ALL_BINS) $(TEST_BINS) $(TOOLKIT_TEST_BINS) data evals
else
TEST_PREREQS = $(ALL_BINS) $(TEST_BINS) data evals
NO_TOOLKIT_SKIP = $(TOOLKIT_TESTS)
NO_TOOLKIT_WHY = no CUDA toolkit (nvcc not found at $(NVCC)); install it or set NVCC=/path/to/nvcc
endif
ifeq ($(SANITIZE),1)
TEST_ENV = $(SAN_ENV) SKIP_TESTS="$(sort $(NO_TOOLKIT_SKIP) $(SAN_SKIP_TESTS))" \
           SKIP_REASON="SANITIZE=1 (the plain make test runs them)$(if $(NO_TOOLKIT_WHY),; $(NO_TOOLKIT_WHY))"
else ifneq ($(NO_TOOLKIT_SKIP),)
TEST_ENV = SKIP_TESTS="$(NO_TOOLKIT_SKIP)" SKIP_REASON="$(NO_TOOLKIT_WHY)"
endif
test: $(TEST_PREREQS)
	@if [ "$(HAVE_CUDA_TOOLKIT)" != 1 ] && [ "$(CI)" = true ]; then \
	  echo "error: CI=true and no CUDA toolkit (nvcc not found at $(NVCC)): CI builds and checks every GPU variant" >&2; \
	  exit 1; fi
	PYTHON=$(PYTHON) $(TEST_ENV) bash test/run_all.sh

bench_cpu: train_gpt2 data
	bash scripts/bench_cpu.sh

clean:
	rm -rf build $(ALL_BINS)
