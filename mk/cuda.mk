# mk/cuda.mk: the CUDA trainer train_gpt2cu, its test test_gpt2cu, and the compile check of every
# GPU build variant (doc/gpu.md). Included by the top Makefile (CC, CFLAGS, PYTHON, HEADERS).
#
#   make train_gpt2cu [USE_CUDNN=1] [NO_MULTI_GPU=1] [NO_USE_MPI=1] [GPU_COMPUTE_CAPABILITY=90]
#   make test_gpt2cu  (same variables)
#   make eval_gpt2cu  the zero-shot evaluator on the GPU (same variables; never MPI)
#   make gpu_compile_check   sm_80 + sm_90 builds of {cuDNN on, off} x {NCCL + MPI, single GPU}
#
# Variables (all overridable; `make gpu_config` prints what was found):
#   GPU_COMPUTE_CAPABILITY  e.g. 90 or "80 90"; default: the GPUs nvidia-smi reports, else 80 90.
#                        Always explicit: llm.c's auto-detection was dead code and nvcc then built
#                        sm_75 PTX for a JIT on every start (doc/formats.md 17).
#   USE_CUDNN=1          cuDNN flash attention (needs libcudnn 9 and the frontend headers)
#   CUDNN_FRONTEND_PATH  include dir holding cudnn_frontend.h; default: the pip package
#                        nvidia-cudnn-frontend (pinned 1.32.0 in CI), else ./cudnn-frontend/include
#   CUDNN_HOME           dir with include/cudnn.h and lib*/libcudnn*; default: the CUDA toolkit,
#                        else PyTorch's site-packages nvidia/cudnn
#   NO_MULTI_GPU=1       no NCCL (one process); NO_USE_MPI=1: NCCL with tcp/fs rendezvous only
#   NCCL_HOME, OPENMPI_DIR   where nccl.h / mpi.h live when not in the standard places
#   PRECISION            BF16 only (the GPU trainer is bf16 with fp32 master weights)
# NVML is never linked: -lg reports memory through the CUDA runtime (doc/formats.md 18 #10).

NVCC ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
# The GPU tests need the CUDA toolkit (nvcc, and its headers for the host build of the GPU
# trainer); without it `make test` runs every CPU test and says which GPU checks it skipped.
HAVE_CUDA_TOOLKIT := $(if $(wildcard $(NVCC)),$(if $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),1,),)
TOOLKIT_TESTS = gpu_build gpt2cu_host gpu_check_host
CXX_HOST ?= g++
PRECISION ?= BF16
ifneq ($(PRECISION),BF16)
$(error PRECISION=$(PRECISION): the GPU trainer is bf16-only (fp32 master weights with -w 1))
endif

GPU_COMPUTE_CAPABILITY ?= $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d . | sort -u | tr '\n' ' ')
GPU_ARCHS := $(strip $(if $(strip $(GPU_COMPUTE_CAPABILITY)),$(GPU_COMPUTE_CAPABILITY),80 90))
GPU_CHECK_ARCHS := 80 90
# SASS for every listed arch, plus PTX of the newest so that later GPUs can JIT it
gencode = $(foreach a,$(1),-gencode arch=compute_$(a),code=sm_$(a)) \
          -gencode arch=compute_$(lastword $(1)),code=compute_$(lastword $(1))
archtag = sm$(subst $(eval) ,_,$(strip $(1)))

NVCC_FLAGS = -std=c++17 -O3 --use_fast_math --threads 0 -Xcompiler -Wall,-Wextra,-fopenmp \
             -I$(CUDA_HOME)/include
HOST_CXXFLAGS = -std=c++17 -O2 -Wall -Wextra -D_GNU_SOURCE -I$(CUDA_HOME)/include

# cuDNN: the toolkit's, or PyTorch's wheel (nvidia/cudnn: headers, libcudnn.so.9 without the
# unversioned link, hence -l:libcudnn.so.9 and an rpath)
PY_SITE = $(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" 2>/dev/null)
CUDNN_HOME ?= $(if $(wildcard $(CUDA_HOME)/include/cudnn.h),$(CUDA_HOME),$(if $(wildcard /usr/include/cudnn.h),/usr,$(PY_SITE)/nvidia/cudnn))
# cuDNN from apt has its headers in /usr/include, which the compiler searches already: passing it as
# -isystem reorders the system directories and breaks libstdc++'s #include_next <stdlib.h>
CUDNN_INC = $(if $(filter /usr /usr/,$(CUDNN_HOME)),,-isystem $(CUDNN_HOME)/include)
CUDNN_LIBDIR = $(firstword $(wildcard $(CUDNN_HOME)/lib64/libcudnn.so* $(CUDNN_HOME)/lib/libcudnn.so* /usr/lib/x86_64-linux-gnu/libcudnn.so*))
CUDNN_LIB = $(if $(wildcard $(dir $(CUDNN_LIBDIR))libcudnn.so),-lcudnn,-l:libcudnn.so.9)
# the frontend's experimental engines compile kernels with NVRTC: -lnvrtc (doc/formats.md 15.3)
CUDNN_LDFLAGS = -L$(dir $(CUDNN_LIBDIR)) -Xlinker -rpath -Xlinker $(dir $(CUDNN_LIBDIR)) $(CUDNN_LIB) -lnvrtc
CUDNN_FRONTEND_PATH ?= $(firstword $(wildcard $(shell $(PYTHON) -m pip show nvidia-cudnn-frontend 2>/dev/null | sed -n 's/^Location: //p')/include) $(wildcard ./cudnn-frontend/include) $(wildcard $(HOME)/cudnn-frontend/include))

# NCCL and MPI
NCCL_HOME ?= $(if $(wildcard $(CUDA_HOME)/include/nccl.h),$(CUDA_HOME),$(if $(wildcard /usr/include/nccl.h),/usr,$(PY_SITE)/nvidia/nccl))
NCCL_LIBFILE = $(firstword $(wildcard $(NCCL_HOME)/lib64/libnccl.so* $(NCCL_HOME)/lib/libnccl.so* /usr/lib/x86_64-linux-gnu/libnccl.so*))
NCCL_LDFLAGS = -L$(dir $(NCCL_LIBFILE)) -Xlinker -rpath -Xlinker $(dir $(NCCL_LIBFILE)) \
               $(if $(wildcard $(dir $(NCCL_LIBFILE))libnccl.so),-lnccl,-l:libnccl.so.2)
OPENMPI_DIR ?= $(if $(wildcard /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h),/usr/lib/x86_64-linux-gnu/openmpi,/usr/lib/openmpi)
MPI_CFLAGS = -isystem $(OPENMPI_DIR)/include -isystem $(OPENMPI_DIR)/include/openmpi
MPI_LDFLAGS = -L$(OPENMPI_DIR)/lib -lmpi

HAVE_NCCL := $(if $(wildcard $(NCCL_HOME)/include/nccl.h),1,)
HAVE_MPI := $(if $(wildcard $(OPENMPI_DIR)/include/mpi.h),1,)
MG_VARIANT := $(if $(NO_MULTI_GPU)$(if $(HAVE_NCCL),,x),single,$(if $(NO_USE_MPI)$(if $(HAVE_MPI),,x),nccl,mpi))
CUDNN_VARIANT := $(if $(filter 1,$(USE_CUDNN)),cudnn,stub)

GPU_LIBS = -lcublas -lcublasLt -Xcompiler -fopenmp
mg_ldflags = $(if $(filter mpi,$(1)),$(NCCL_LDFLAGS) $(MPI_LDFLAGS),$(if $(filter nccl,$(1)),$(NCCL_LDFLAGS),))
cudnn_ldflags = $(if $(filter cudnn,$(1)),$(CUDNN_LDFLAGS),)

# nvcc's objects do not depend on the flavour stamp (SANITIZE=1 leaves them as they are)
GPU_HEADERS = $(SRC_HEADERS) $(wildcard llmc/*/*.cuh sd_attention/*.cuh kinds/*.cuh)
GPU_KERNEL_SRCS = llmc/cuda/kernels.cu llmc/cuda/matmul.cu llmc/attention/own.cu llmc/attention/flash.cu \
                  llmc/attention/mma.cu sd_attention/sd_fold.cu sd_attention/linear_scan.cu \
                  sd_attention/stages_gpu.cu kinds/registry_gpu.cu llmc/gpu/gpt2_gpu.cu
GPU_OBJDIR = build/cuda

# Device objects, once per arch set, named after their sources: build/cuda/sm80_90/llmc/cuda/kernels.o
define gpu_objects
$(GPU_OBJDIR)/$(call archtag,$(1))/%.o: %.cu $(GPU_HEADERS) $(TEST_HEADERS)
	@mkdir -p $$(dir $$@)
	$(NVCC) $(NVCC_FLAGS) $(call gencode,$(1)) -c $$< -o $$@
endef
$(eval $(call gpu_objects,$(GPU_ARCHS)))
ifneq ($(call archtag,$(GPU_ARCHS)),$(call archtag,$(GPU_CHECK_ARCHS)))
$(eval $(call gpu_objects,$(GPU_CHECK_ARCHS)))
endif
gpu_obj = $(addprefix $(GPU_OBJDIR)/$(call archtag,$(1))/,$(2:.cu=.o))
model_objs = $(call gpu_obj,$(1),$(GPU_KERNEL_SRCS))

# Host-only objects, arch-independent: the cuDNN frontend code (slow to compile: once) and the
# three multi-GPU variants
$(GPU_OBJDIR)/cudnn_att_cudnn.o: llmc/attention/cudnn.cpp llmc/attention/cudnn.h
	@mkdir -p $(dir $@)
	@test -n "$(CUDNN_FRONTEND_PATH)" || { echo "error: cudnn_frontend.h not found: pip install nvidia-cudnn-frontend==1.32.0 or set CUDNN_FRONTEND_PATH" >&2; exit 1; }
	$(CXX_HOST) $(HOST_CXXFLAGS) -DENABLE_CUDNN -isystem $(CUDNN_FRONTEND_PATH) $(CUDNN_INC) -c $< -o $@
$(GPU_OBJDIR)/cudnn_att_stub.o: llmc/attention/cudnn.cpp llmc/attention/cudnn.h
	@mkdir -p $(dir $@)
	$(CXX_HOST) $(HOST_CXXFLAGS) -c $< -o $@
$(GPU_OBJDIR)/multi_gpu_single.o: llmc/cuda/multi_gpu.cpp llmc/cuda/multi_gpu.h $(SRC_HEADERS)
	@mkdir -p $(dir $@)
	$(CXX_HOST) $(HOST_CXXFLAGS) -c $< -o $@
$(GPU_OBJDIR)/multi_gpu_nccl.o: llmc/cuda/multi_gpu.cpp llmc/cuda/multi_gpu.h $(SRC_HEADERS)
	@mkdir -p $(dir $@)
	$(CXX_HOST) $(HOST_CXXFLAGS) -DMULTI_GPU -I$(NCCL_HOME)/include -c $< -o $@
$(GPU_OBJDIR)/multi_gpu_mpi.o: llmc/cuda/multi_gpu.cpp llmc/cuda/multi_gpu.h $(SRC_HEADERS)
	@mkdir -p $(dir $@)
	$(CXX_HOST) $(HOST_CXXFLAGS) -DMULTI_GPU -DUSE_MPI -I$(NCCL_HOME)/include $(MPI_CFLAGS) -c $< -o $@

# $(1) arch set, $(2) cudnn|stub, $(3) mpi|nccl|single
link_objs = $(call model_objs,$(1)) $(GPU_OBJDIR)/cudnn_att_$(2).o $(GPU_OBJDIR)/multi_gpu_$(3).o
link_flags = $(call cudnn_ldflags,$(2)) $(call mg_ldflags,$(3)) $(GPU_LIBS)

.PHONY: gpu_compile_check gpu_config
.PHONY: FORCE_GPU_VARIANT
# The root binaries follow the variables of this make call: a marker file names the variant, so
# switching USE_CUDNN or NO_MULTI_GPU relinks.
GPU_VARIANT_TAG := $(call archtag,$(GPU_ARCHS))-$(CUDNN_VARIANT)-$(MG_VARIANT)
$(GPU_OBJDIR)/variant: FORCE_GPU_VARIANT
	@mkdir -p $(dir $@)
	@echo '$(GPU_VARIANT_TAG)' | cmp -s - $@ || echo '$(GPU_VARIANT_TAG)' > $@

# the arch flags at link time too: nvcc's link step otherwise adds a stub for its default arch
train_gpt2cu: $(call gpu_obj,$(GPU_ARCHS),train_gpt2.cu) $(call link_objs,$(GPU_ARCHS),$(CUDNN_VARIANT),$(MG_VARIANT)) $(GPU_OBJDIR)/variant
	$(NVCC) $(call gencode,$(GPU_ARCHS)) $(filter %.o,$^) -o $@ $(call link_flags,$(GPU_ARCHS),$(CUDNN_VARIANT),$(MG_VARIANT))
	@echo "built $@: $(GPU_VARIANT_TAG) (archs $(GPU_ARCHS))"

# the GPU evaluator: one process, so never MPI (NCCL unused but linked when the variant has it)
eval_gpt2cu: $(call gpu_obj,$(GPU_ARCHS),eval_gpt2.cu) $(call link_objs,$(GPU_ARCHS),$(CUDNN_VARIANT),single) $(GPU_OBJDIR)/variant
	$(NVCC) $(call gencode,$(GPU_ARCHS)) $(filter %.o,$^) -o $@ $(call link_flags,$(GPU_ARCHS),$(CUDNN_VARIANT),single)
	@echo "built $@: $(call archtag,$(GPU_ARCHS))-$(CUDNN_VARIANT) (archs $(GPU_ARCHS))"

test_gpt2cu: $(call gpu_obj,$(GPU_ARCHS),test/test_gpt2.cu) $(call link_objs,$(GPU_ARCHS),$(CUDNN_VARIANT),$(MG_VARIANT)) $(GPU_OBJDIR)/variant
	$(NVCC) $(call gencode,$(GPU_ARCHS)) $(filter %.o,$^) -o $@ $(call link_flags,$(GPU_ARCHS),$(CUDNN_VARIANT),$(MG_VARIANT))

# The compile check: every variant for sm_80 and sm_90 (device code is compiled once per arch
# set; the variants differ in two host objects), plus test_gpt2cu with cuDNN.
CHECK_TAG := $(call archtag,$(GPU_CHECK_ARCHS))
CHECK_DIR = build/gpu_variants
CHECK_BINS = $(foreach c,cudnn stub,$(foreach g,mpi single,$(CHECK_DIR)/train_gpt2cu_$(c)_$(g))) \
             $(CHECK_DIR)/test_gpt2cu_cudnn_mpi $(CHECK_DIR)/eval_gpt2cu_cudnn
$(CHECK_DIR)/train_gpt2cu_%: $(call gpu_obj,$(GPU_CHECK_ARCHS),train_gpt2.cu) $(call model_objs,$(GPU_CHECK_ARCHS)) \
                             $(GPU_OBJDIR)/cudnn_att_cudnn.o $(GPU_OBJDIR)/cudnn_att_stub.o \
                             $(GPU_OBJDIR)/multi_gpu_mpi.o $(GPU_OBJDIR)/multi_gpu_single.o
	@mkdir -p $(dir $@)
	$(NVCC) $(call gencode,$(GPU_CHECK_ARCHS)) $(call gpu_obj,$(GPU_CHECK_ARCHS),train_gpt2.cu) $(call link_objs,$(GPU_CHECK_ARCHS),$(word 1,$(subst _, ,$*)),$(word 2,$(subst _, ,$*))) -o $@ \
	  $(call link_flags,$(GPU_CHECK_ARCHS),$(word 1,$(subst _, ,$*)),$(word 2,$(subst _, ,$*)))
$(CHECK_DIR)/test_gpt2cu_cudnn_mpi: $(call gpu_obj,$(GPU_CHECK_ARCHS),test/test_gpt2.cu) $(call link_objs,$(GPU_CHECK_ARCHS),cudnn,mpi)
	@mkdir -p $(dir $@)
	$(NVCC) $(call gencode,$(GPU_CHECK_ARCHS)) $^ -o $@ $(call link_flags,$(GPU_CHECK_ARCHS),cudnn,mpi)

$(CHECK_DIR)/eval_gpt2cu_cudnn: $(call gpu_obj,$(GPU_CHECK_ARCHS),eval_gpt2.cu) $(call link_objs,$(GPU_CHECK_ARCHS),cudnn,single)
	@mkdir -p $(dir $@)
	$(NVCC) $(call gencode,$(GPU_CHECK_ARCHS)) $^ -o $@ $(call link_flags,$(GPU_CHECK_ARCHS),cudnn,single)

# dev/cuda: the standalone attention checks (dev/cuda/attention_check.cu), one per path (own,
# cudnn, and flash: the tiled kernels of llmc/attention/flash.cu, -attn flash), and the
# checks of the S-D fold and the linear attention (CPU references from sd_attention/sd_cpu.h, linear_cpu.h)
DEV_CUDA_HEADERS = $(wildcard dev/cuda/*.h) $(TEST_HEADERS)
GPU_BASE_SRCS = llmc/cuda/matmul.cu llmc/cuda/kernels.cu
dev_attn_objs = $(call gpu_obj,$(1),llmc/attention/own.cu $(GPU_BASE_SRCS))
dev_flash_objs = $(call gpu_obj,$(1),llmc/attention/flash.cu $(GPU_BASE_SRCS))
dev_mma_objs = $(call gpu_obj,$(1),llmc/attention/mma.cu llmc/attention/flash.cu $(GPU_BASE_SRCS))
dev_sd_objs = $(call gpu_obj,$(1),sd_attention/sd_fold.cu $(GPU_BASE_SRCS))
dev_lin_objs = $(call gpu_obj,$(1),sd_attention/linear_scan.cu $(GPU_BASE_SRCS))
define dev_attention
$(2)/attention_own: dev/cuda/attention_check.cu $(DEV_CUDA_HEADERS) $(GPU_HEADERS) $(call dev_attn_objs,$(1))
	@mkdir -p $(2)
	$(NVCC) $(NVCC_FLAGS) $(call gencode,$(1)) $$< $(call dev_attn_objs,$(1)) -o $$@ -lcublas -lcublasLt
$(2)/attention_cudnn: dev/cuda/attention_check.cu $(DEV_CUDA_HEADERS) $(GPU_HEADERS) $(call dev_attn_objs,$(1)) $(GPU_OBJDIR)/cudnn_att_cudnn.o
	@mkdir -p $(2)
	$(NVCC) $(NVCC_FLAGS) -DCHECK_CUDNN $(call gencode,$(1)) $$< $(call dev_attn_objs,$(1)) $(GPU_OBJDIR)/cudnn_att_cudnn.o \
	  -o $$@ -lcublas -lcublasLt $(CUDNN_LDFLAGS)
$(2)/attention_flash: dev/cuda/attention_check.cu $(DEV_CUDA_HEADERS) $(GPU_HEADERS) $(call dev_flash_objs,$(1))
	@mkdir -p $(2)
	$(NVCC) $(NVCC_FLAGS) -DCHECK_FLASH $(call gencode,$(1)) $$< $(call dev_flash_objs,$(1)) -o $$@ -lcublas -lcublasLt
$(2)/attention_mma: dev/cuda/attention_check.cu $(DEV_CUDA_HEADERS) $(GPU_HEADERS) $(call dev_mma_objs,$(1))
	@mkdir -p $(2)
	$(NVCC) $(NVCC_FLAGS) -DCHECK_FLASH_MMA $(call gencode,$(1)) $$< $(call dev_mma_objs,$(1)) -o $$@ -lcublas -lcublasLt
$(2)/sd_fold_check: dev/cuda/sd_fold_check.cu $(DEV_CUDA_HEADERS) $(GPU_HEADERS) $(call dev_sd_objs,$(1))
	@mkdir -p $(2)
	$(NVCC) $(NVCC_FLAGS) $(call gencode,$(1)) $$< $(call dev_sd_objs,$(1)) -o $$@ $(GPU_LIBS)
$(2)/linear_attention_check: dev/cuda/linear_attention_check.cu $(DEV_CUDA_HEADERS) $(GPU_HEADERS) $(call dev_lin_objs,$(1))
	@mkdir -p $(2)
	$(NVCC) $(NVCC_FLAGS) $(call gencode,$(1)) $$< $(call dev_lin_objs,$(1)) -o $$@ $(GPU_LIBS)
endef
$(eval $(call dev_attention,$(GPU_ARCHS),dev/cuda))
$(eval $(call dev_attention,$(GPU_CHECK_ARCHS),$(CHECK_DIR)))
CHECK_BINS += $(CHECK_DIR)/attention_own $(CHECK_DIR)/attention_cudnn $(CHECK_DIR)/attention_flash $(CHECK_DIR)/attention_mma \
              $(CHECK_DIR)/sd_fold_check \
              $(CHECK_DIR)/linear_attention_check

build/gpu_compile_check: $(CHECK_BINS)
	@printf '%s\n' $(CHECK_BINS) > $@
gpu_compile_check: build/gpu_compile_check

gpu_config:
	@echo "NVCC=$(NVCC) CUDA_HOME=$(CUDA_HOME) archs: $(GPU_ARCHS) (check: $(GPU_CHECK_ARCHS))"
	@echo "USE_CUDNN=$(USE_CUDNN) -> $(CUDNN_VARIANT); CUDNN_HOME=$(CUDNN_HOME) lib: $(CUDNN_LIBDIR)"
	@echo "CUDNN_FRONTEND_PATH=$(CUDNN_FRONTEND_PATH)"
	@echo "multi-GPU: $(MG_VARIANT) (NCCL_HOME=$(NCCL_HOME) have=$(HAVE_NCCL); OPENMPI_DIR=$(OPENMPI_DIR) have=$(HAVE_MPI))"

# test_gpu_emul: the device routines of the S-D fold and the linear scan, run on the CPU;
# test_flash_emul: the flash attention's block routines, run on the CPU;
# test_flash_mma_emul: the register-tile attention kernels, every thread a coroutine with PTX's
# warp instructions (test/warp_emul.cpp)
TEST_BINS += build/test_gpu_host build/test_gpu_emul build/test_flash_emul build/test_flash_mma_emul
TOOLKIT_TEST_BINS += build/gpu_compile_check
build/test_gpu_emul: dev/cuda/check_common.h
build/test_flash_emul: dev/cuda/check_common.h dev/cuda/attention_ref.h
build/test_flash_mma_emul: test/test_flash_mma_emul.cpp test/warp_emul.cpp test/warp_emul.h test/flash_mma_emul.h llmc/attention/mma.h \
    llmc/attention/flash.h dev/cuda/check_common.h dev/cuda/attention_ref.h $(HEADERS) | build
	g++ -std=c++17 -O2 -march=native -Wall -Wextra -Wno-unknown-pragmas -D_GNU_SOURCE -fopenmp $(HOST_SAN) \
	  test/test_flash_mma_emul.cpp test/warp_emul.cpp -o $@ -lm

.PHONY: clean_gpu
clean: clean_gpu
clean_gpu:
	rm -f train_gpt2cu test_gpt2cu eval_gpt2cu dev/cuda/attention_own dev/cuda/attention_cudnn dev/cuda/attention_flash \
	  dev/cuda/attention_mma \
	  dev/cuda/sd_fold_check \
	  dev/cuda/linear_attention_check

# The cuDNN frontend headers for a GPU machine without pip access (no network): copy them under
# build/ here and build/cudnn_frontend along to that machine; dev/gpu_check.sh finds them.
# `make gpu_frontend_copy`
.PHONY: gpu_frontend_copy
gpu_frontend_copy:
	@test -n "$(CUDNN_FRONTEND_PATH)" -a -f "$(CUDNN_FRONTEND_PATH)/cudnn_frontend.h" || \
	  { echo "error: cudnn_frontend.h not found (pip install nvidia-cudnn-frontend==1.32.0, or set CUDNN_FRONTEND_PATH)" >&2; exit 1; }
	rm -rf build/cudnn_frontend && mkdir -p build/cudnn_frontend
	cp -r "$(CUDNN_FRONTEND_PATH)" build/cudnn_frontend/include
	@echo "copied $(CUDNN_FRONTEND_PATH) to build/cudnn_frontend/include ($$(du -sh build/cudnn_frontend | cut -f1))"
