# mk/cuda.mk: the CUDA trainer train_gpt2cu, its test test_gpt2cu, and the compile check of every
# GPU build variant (doc/gpu.md). Included by the top Makefile (CC, CFLAGS, PYTHON, HEADERS).
#
#   make train_gpt2cu [USE_CUDNN=1] [NO_MULTI_GPU=1] [NO_USE_MPI=1] [GPU_COMPUTE_CAPABILITY=90]
#   make test_gpt2cu  (same variables)
#   make eval_gpt2cu  the zero-shot evaluator on the GPU (same variables; never MPI)
#   make gpu_compile_check   sm_80 + sm_90 builds of {cuDNN on, off} x {NCCL + MPI, single GPU}
#
# Variables (all overridable; `make gpu_config` prints what was found):
#   GPU_COMPUTE_CAPABILITY  e.g. 90 or "80 90" (8.0 or newer, and one this nvcc can target);
#                        default: the GPUs nvidia-smi reports, else 80 90. A reported GPU newer than
#                        the toolkit gets the newest arch it has, as SASS + PTX for the driver to
#                        compile, with a note; an older one than 8.0 is left out with a note.
#                        Always explicit: llm.c's auto-detection was dead code and nvcc then built
#                        sm_75 PTX for a JIT on every start (doc/formats.md "Build facts").
#   USE_CUDNN=1          cuDNN flash attention (needs libcudnn 9 and the frontend headers)
#   CUDNN_FRONTEND_PATH  include dir holding cudnn_frontend.h (1.13.0 or newer; 1.32.0 tested);
#                        default: mk/cudnn_frontend.sh's search (the active venv/conda's pip package
#                        nvidia-cudnn-frontend, ~/cudnn-frontend/include, ./cudnn-frontend/include,
#                        then the pip package of python3 and of PYTHON)
#   CUDNN_HOME           dir with include/cudnn.h and lib*/libcudnn*; default: the CUDA toolkit,
#                        else /usr (apt), else the nvidia/cudnn wheel of the active Python; a cuDNN
#                        build without libcudnn.so* there stops with one line naming the folders
#   NO_MULTI_GPU=1       no NCCL (one process); NO_USE_MPI=1: NCCL with tcp/fs rendezvous only
#   NCCL_HOME, OPENMPI_DIR   where nccl.h / mpi.h live when not in the standard places
#   PRECISION            BF16 only (the GPU trainer is bf16 with fp32 master weights)
# NVML is never linked: -lg reports memory through the CUDA runtime (doc/formats.md "Upstream weak spots" #10).

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

# The archs this nvcc can target (compute_75 ... compute_121 for CUDA 13), ascending
NVCC_ARCHS := $(shell $(NVCC) --list-gpu-arch 2>/dev/null | sed -n 's/^compute_\([0-9][0-9]*\)$$/\1/p' | sort -n | tr '\n' ' ')
# ascending and unique (the newest arch comes last: gencode adds its PTX)
numsort = $(strip $(shell printf '%s\n' $(1) | sort -un | tr '\n' ' '))
# the newest arch of NVCC_ARCHS not newer than $(1) (empty when the toolkit has none)
arch_floor = $(lastword $(foreach t,$(NVCC_ARCHS),$(if $(shell [ $(t) -le $(1) ] && echo y),$(t))))
ifneq ($(origin GPU_COMPUTE_CAPABILITY),undefined)
# given: every arch must be one the project supports and this nvcc targets
$(foreach a,$(GPU_COMPUTE_CAPABILITY),$(if $(shell [ "$(a)" -ge 80 ] 2>/dev/null && echo y),,\
  $(error GPU_COMPUTE_CAPABILITY=$(GPU_COMPUTE_CAPABILITY): '$(a)' is not 80 or newer (the GPU trainer needs bf16 tensor cores: Ampere, compute capability 8.0, or later))))
$(if $(NVCC_ARCHS),$(foreach a,$(GPU_COMPUTE_CAPABILITY),$(if $(filter $(a),$(NVCC_ARCHS)),,\
  $(error GPU_COMPUTE_CAPABILITY=$(GPU_COMPUTE_CAPABILITY): $(NVCC) cannot target '$(a)' (it targets $(strip $(NVCC_ARCHS)))))))
GPU_ARCHS := $(call numsort,$(GPU_COMPUTE_CAPABILITY))
else
# detected: what nvidia-smi reports, mapped onto what this nvcc can build
GPU_DETECTED := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d . | sort -un | tr '\n' ' ')
GPU_OLD := $(strip $(foreach a,$(GPU_DETECTED),$(if $(shell [ $(a) -lt 80 ] && echo y),$(a))))
GPU_NEW := $(strip $(if $(NVCC_ARCHS),$(foreach a,$(filter-out $(GPU_OLD),$(GPU_DETECTED)),$(if $(filter $(a),$(NVCC_ARCHS)),,$(a)))))
GPU_ARCHS := $(call numsort,$(foreach a,$(filter-out $(GPU_OLD),$(GPU_DETECTED)),$(if $(filter $(a),$(GPU_NEW)),$(call arch_floor,$(a)),$(a))))
$(if $(GPU_OLD),$(info note: nvidia-smi reports $(addprefix sm_,$(GPU_OLD)): older than sm_80 (no bf16 tensor cores), not supported; left out of the build))
$(foreach a,$(GPU_NEW),$(info note: nvidia-smi reports sm_$(a), which $(NVCC) cannot target: building for sm_$(call arch_floor,$(a)) (SASS and PTX; the driver compiles the PTX for the card at first start). A newer CUDA toolkit builds it natively.))
GPU_ARCHS := $(if $(GPU_ARCHS),$(GPU_ARCHS),80 90)
endif
GPU_CHECK_ARCHS := 80 90
# SASS for every listed arch, plus PTX of the newest so that later GPUs can JIT it
gencode = $(foreach a,$(1),-gencode arch=compute_$(a),code=sm_$(a)) \
          -gencode arch=compute_$(lastword $(1)),code=compute_$(lastword $(1))
archtag = sm$(subst $(eval) ,_,$(strip $(1)))

NVCC_FLAGS = -std=c++17 -O3 --use_fast_math --threads 0 -Xcompiler -Wall,-Wextra,-fopenmp \
             -I$(CUDA_HOME)/include
HOST_CXXFLAGS = -std=c++17 -O2 -Wall -Wextra -D_GNU_SOURCE -I$(CUDA_HOME)/include

# Library directories of this machine's Debian/Ubuntu multiarch layout: x86_64-linux-gnu, or
# aarch64-linux-gnu on Grace (GH200) and other Arm servers
MULTIARCH := $(or $(shell $(CC) -print-multiarch 2>/dev/null),$(shell uname -m)-linux-gnu)
# The Python whose wheels (nvidia/cudnn, nvidia/nccl) are searched: the active virtualenv or conda
# environment, else PYTHON
PKG_PYTHON := $(firstword $(wildcard $(VIRTUAL_ENV)/bin/python $(CONDA_PREFIX)/bin/python) $(PYTHON))

# cuDNN: the toolkit's, apt's, or PyTorch's wheel (nvidia/cudnn: headers, libcudnn.so.9 without the
# unversioned link, hence -l:libcudnn.so.9 and an rpath)
PY_SITE = $(shell $(PKG_PYTHON) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" 2>/dev/null)
CUDNN_HOME ?= $(if $(wildcard $(CUDA_HOME)/include/cudnn.h),$(CUDA_HOME),$(if $(wildcard /usr/include/cudnn.h),/usr,$(PY_SITE)/nvidia/cudnn))
# cuDNN from apt has its headers in /usr/include, which the compiler searches already: passing it as
# -isystem reorders the system directories and breaks libstdc++'s #include_next <stdlib.h>
CUDNN_INC = $(if $(filter /usr /usr/,$(CUDNN_HOME)),,-isystem $(CUDNN_HOME)/include)
CUDNN_LIBDIR = $(firstword $(wildcard $(CUDNN_HOME)/lib64/libcudnn.so* $(CUDNN_HOME)/lib/libcudnn.so* /usr/lib/$(MULTIARCH)/libcudnn.so*))
CUDNN_LIB = $(if $(wildcard $(dir $(CUDNN_LIBDIR))libcudnn.so),-lcudnn,-l:libcudnn.so.9)
# Without a libcudnn.so* the link line would get an empty -L and -rpath, and nvcc would stop with
# "Unknown option '-rpath'" after every object is compiled: a cuDNN link stops with this line
# instead, and a cuDNN build asked for by name stops before anything is compiled (below).
# CUDNN_LDFLAGS must be expanded only in the recipes that link cuDNN ($$ inside a define), so that
# a machine without cuDNN still builds everything else.
CUDNN_NO_LIB = CUDNN_HOME=$(CUDNN_HOME): no libcudnn.so* in $(CUDNN_HOME)/lib64, $(CUDNN_HOME)/lib or /usr/lib/$(MULTIARCH) (a cuDNN build links it: set CUDNN_HOME to the folder whose lib64/ or lib/ holds libcudnn.so*, or build without USE_CUDNN=1)
# the frontend's experimental engines compile kernels with NVRTC: -lnvrtc (doc/gpu.md "cuDNN version and build facts")
CUDNN_LDFLAGS = $(if $(CUDNN_LIBDIR),-L$(dir $(CUDNN_LIBDIR)) -Xlinker -rpath -Xlinker $(dir $(CUDNN_LIBDIR)) $(CUDNN_LIB) -lnvrtc,$(error $(CUDNN_NO_LIB)))
# searched once, when first used (mk/cudnn_frontend.sh: the order is in its header)
ifeq ($(origin CUDNN_FRONTEND_PATH),undefined)
CUDNN_FRONTEND_PATH = $(eval CUDNN_FRONTEND_PATH := $(shell bash mk/cudnn_frontend.sh find $(shell command -v python3 2>/dev/null) $(PYTHON)))$(CUDNN_FRONTEND_PATH)
endif

# NCCL and MPI
NCCL_HOME ?= $(if $(wildcard $(CUDA_HOME)/include/nccl.h),$(CUDA_HOME),$(if $(wildcard /usr/include/nccl.h),/usr,$(PY_SITE)/nvidia/nccl))
NCCL_LIBFILE = $(firstword $(wildcard $(NCCL_HOME)/lib64/libnccl.so* $(NCCL_HOME)/lib/libnccl.so* /usr/lib/$(MULTIARCH)/libnccl.so*))
NCCL_LDFLAGS = -L$(dir $(NCCL_LIBFILE)) -Xlinker -rpath -Xlinker $(dir $(NCCL_LIBFILE)) \
               $(if $(wildcard $(dir $(NCCL_LIBFILE))libnccl.so),-lnccl,-l:libnccl.so.2)
# Open MPI: Debian/Ubuntu's multiarch directory, /usr/lib/openmpi, Fedora's /usr/lib64/openmpi,
# else the prefix of the mpicc on PATH
OPENMPI_DIR ?= $(or $(patsubst %/include/mpi.h,%,$(firstword $(wildcard /usr/lib/$(MULTIARCH)/openmpi/include/mpi.h \
                 /usr/lib/openmpi/include/mpi.h /usr/lib64/openmpi/include/mpi.h))),$(patsubst %/bin/mpicc,%,$(shell command -v mpicc 2>/dev/null)),/usr/lib/openmpi)
MPI_CFLAGS = -isystem $(OPENMPI_DIR)/include -isystem $(OPENMPI_DIR)/include/openmpi
MPI_LDFLAGS = -L$(OPENMPI_DIR)/lib -lmpi

HAVE_NCCL := $(if $(wildcard $(NCCL_HOME)/include/nccl.h),1,)
HAVE_MPI := $(if $(wildcard $(OPENMPI_DIR)/include/mpi.h),1,)
MG_VARIANT := $(if $(NO_MULTI_GPU)$(if $(HAVE_NCCL),,x),single,$(if $(NO_USE_MPI)$(if $(HAVE_MPI),,x),nccl,mpi))
CUDNN_VARIANT := $(if $(filter 1,$(USE_CUDNN)),cudnn,stub)
# USE_CUDNN=1 and a goal that links it (the GPU trainer, its test, the evaluator): no libcudnn is
# an error now, not after minutes of compiling. Other goals (the CPU programs, `make -n` of them,
# gpu_config) read this file too and are left alone.
ifeq ($(CUDNN_VARIANT),cudnn)
ifneq ($(filter train_gpt2cu test_gpt2cu eval_gpt2cu,$(MAKECMDGOALS)),)
ifeq ($(CUDNN_LIBDIR),)
$(error $(CUDNN_NO_LIB))
endif
endif
endif
# why the multi-GPU variant is what it is; printed when train_gpt2cu links, so that a machine
# without mpi.h (or nccl.h) does not get a build without MPI (or NCCL) unannounced
MG_REASON = $(if $(NO_MULTI_GPU),NO_MULTI_GPU=1: one process,$(if $(HAVE_NCCL),$(if $(NO_USE_MPI),NO_USE_MPI=1: NCCL with -pi tcp/fs,$(if $(HAVE_MPI),NCCL + MPI,note: no mpi.h under OPENMPI_DIR=$(OPENMPI_DIR): NCCL with -pi tcp/fs only (set OPENMPI_DIR for mpirun launches; NO_USE_MPI=1 says this is intended))),note: no nccl.h under NCCL_HOME=$(NCCL_HOME): one process only (set NCCL_HOME for several GPUs; NO_MULTI_GPU=1 says this is intended)))

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
	@bash mk/cudnn_frontend.sh check "$(CUDNN_FRONTEND_PATH)"
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
	@echo "built $@: $(GPU_VARIANT_TAG) (archs $(GPU_ARCHS); $(MG_REASON))"

# the GPU evaluator: one process, so never MPI (NCCL unused but linked when the variant has it)
eval_gpt2cu: $(call gpu_obj,$(GPU_ARCHS),eval_gpt2.cu) $(call link_objs,$(GPU_ARCHS),$(CUDNN_VARIANT),single) $(GPU_OBJDIR)/variant
	$(NVCC) $(call gencode,$(GPU_ARCHS)) $(filter %.o,$^) -o $@ $(call link_flags,$(GPU_ARCHS),$(CUDNN_VARIANT),single)
	@echo "built $@: $(call archtag,$(GPU_ARCHS))-$(CUDNN_VARIANT) (archs $(GPU_ARCHS))"

test_gpt2cu: $(call gpu_obj,$(GPU_ARCHS),test/test_gpt2_gpu.cu) $(call link_objs,$(GPU_ARCHS),$(CUDNN_VARIANT),$(MG_VARIANT)) $(GPU_OBJDIR)/variant
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
$(CHECK_DIR)/test_gpt2cu_cudnn_mpi: $(call gpu_obj,$(GPU_CHECK_ARCHS),test/test_gpt2_gpu.cu) $(call link_objs,$(GPU_CHECK_ARCHS),cudnn,mpi)
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
	  -o $$@ -lcublas -lcublasLt $$(CUDNN_LDFLAGS)
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
	@echo "CUDNN_FRONTEND_PATH=$(CUDNN_FRONTEND_PATH) (version $$(bash mk/cudnn_frontend.sh version '$(CUDNN_FRONTEND_PATH)'))"
	@echo "multi-GPU: $(MG_VARIANT) (NCCL_HOME=$(NCCL_HOME) have=$(HAVE_NCCL); OPENMPI_DIR=$(OPENMPI_DIR) have=$(HAVE_MPI)); $(MG_REASON)"
	@echo "machine: $(MULTIARCH); nvcc targets: $(NVCC_ARCHS); Python for wheels: $(PKG_PYTHON)"

# test_sd_fold_emul: the device routines of the S-D fold and the linear scan, run on the CPU;
# test_flash_emul: the flash attention's block routines, run on the CPU;
# test_mma_emul: the register-tile attention kernels, every thread a coroutine with PTX's
# warp instructions (test/warp_emul.cpp)
TEST_BINS += build/test_paths build/test_cuda_host build/test_sd_fold_emul build/test_flash_emul build/test_mma_emul
TOOLKIT_TEST_BINS += build/gpu_compile_check
build/test_sd_fold_emul: dev/cuda/check_common.h
build/test_flash_emul: dev/cuda/check_common.h dev/cuda/attention_ref.h
build/test_mma_emul: test/test_mma_emul.cpp test/warp_emul.cpp test/warp_emul.h test/flash_mma_emul.h llmc/attention/mma.h \
    llmc/attention/flash.h dev/cuda/check_common.h dev/cuda/attention_ref.h $(HEADERS) | build
	g++ -std=c++17 -O2 -march=native -Wall -Wextra -Wno-unknown-pragmas -D_GNU_SOURCE -fopenmp $(HOST_SAN) \
	  test/test_mma_emul.cpp test/warp_emul.cpp -o $@ -lm

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
	@bash mk/cudnn_frontend.sh check "$(CUDNN_FRONTEND_PATH)"
	rm -rf build/cudnn_frontend && mkdir -p build/cudnn_frontend
	cp -r "$(CUDNN_FRONTEND_PATH)" build/cudnn_frontend/include
	@echo "copied $(CUDNN_FRONTEND_PATH) to build/cudnn_frontend/include ($$(du -sh build/cudnn_frontend | cut -f1))"
