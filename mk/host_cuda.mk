# mk/host_cuda.mk: the GPU trainer's host code on the CPU (test/host_cuda/README.md).
#
#   build/test_gpt2cu_host    test/test_gpt2_gpu.cu       \  llmc/gpu/gpt2_gpu.cu, llmc/cuda/matmul.cu's mapping,
#   build/train_gpt2cu_host   train_gpt2.cu                > the single-process multi-GPU layer and the
#   build/eval_gpt2cu_host    eval_gpt2.cu                /  cuDNN stub, compiled by the host compiler
# linked with test/host_cuda/kernels_host.cpp (every launcher on the CPU) and cudart_host.cpp (the
# CUDA runtime calls on host memory) instead of the CUDA kernels, cuBLAS(Lt) and libcudart. The
# toolkit's headers are needed (cuda_runtime_api.h, cuda_bf16.h, cublasLt.h), no GPU and no CUDA
# library. Run by `GPU_CHECK_HOST=1 bash dev/gpu_check.sh` and test/test_gpt2_gpu_host.sh (make test).

HOST_CUDA_DIR = build/host_cuda
HOST_CUDA_FLAGS = $(HOST_CXXFLAGS) -fopenmp -DLLMC_HOST_CUDA $(HOST_SAN)
HOST_CUDA_HEADERS = $(GPU_HEADERS) $(FLAVOUR_STAMP)
HOST_CUDA_OBJS = $(addprefix $(HOST_CUDA_DIR)/,gpt2_gpu.o matmul.o multi_gpu.o cudnn.o stages_gpu.o registry_gpu.o \
                   kernels_host.o cudart_host.o warp_emul.o)

$(HOST_CUDA_DIR)/gpt2_gpu.o: llmc/gpu/gpt2_gpu.cu $(HOST_CUDA_HEADERS)
	@mkdir -p $(dir $@)
	$(CXX_HOST) $(HOST_CUDA_FLAGS) -x c++ -c $< -o $@
$(HOST_CUDA_DIR)/matmul.o: llmc/cuda/matmul.cu $(HOST_CUDA_HEADERS)
	@mkdir -p $(dir $@)
	$(CXX_HOST) $(HOST_CUDA_FLAGS) -x c++ -c $< -o $@
$(HOST_CUDA_DIR)/stages_gpu.o: sd_attention/stages_gpu.cu $(HOST_CUDA_HEADERS)
	@mkdir -p $(dir $@)
	$(CXX_HOST) $(HOST_CUDA_FLAGS) -x c++ -c $< -o $@
$(HOST_CUDA_DIR)/registry_gpu.o: kinds/registry_gpu.cu $(HOST_CUDA_HEADERS)
	@mkdir -p $(dir $@)
	$(CXX_HOST) $(HOST_CUDA_FLAGS) -x c++ -c $< -o $@
$(HOST_CUDA_DIR)/multi_gpu.o: llmc/cuda/multi_gpu.cpp $(HOST_CUDA_HEADERS)
	@mkdir -p $(dir $@)
	$(CXX_HOST) $(HOST_CUDA_FLAGS) -c $< -o $@
$(HOST_CUDA_DIR)/cudnn.o: llmc/attention/cudnn.cpp $(HOST_CUDA_HEADERS)
	@mkdir -p $(dir $@)
	$(CXX_HOST) $(HOST_CUDA_FLAGS) -c $< -o $@
$(HOST_CUDA_DIR)/%.o: test/host_cuda/%.cpp $(HOST_CUDA_HEADERS) test/flash_mma_emul.h test/warp_emul.h
	@mkdir -p $(dir $@)
	$(CXX_HOST) $(HOST_CUDA_FLAGS) -c $< -o $@
# the register-tile attention's launchers run its kernels thread by thread (test/warp_emul.h)
$(HOST_CUDA_DIR)/warp_emul.o: test/warp_emul.cpp test/warp_emul.h $(FLAVOUR_STAMP)
	@mkdir -p $(dir $@)
	$(CXX_HOST) $(HOST_CUDA_FLAGS) -c $< -o $@
$(HOST_CUDA_DIR)/main_%.o: %.cu $(HOST_CUDA_HEADERS)
	@mkdir -p $(dir $@)
	$(CXX_HOST) $(HOST_CUDA_FLAGS) -x c++ -c $< -o $@
$(HOST_CUDA_DIR)/main_test_gpt2.o: test/test_gpt2_gpu.cu $(HOST_CUDA_HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(CXX_HOST) $(HOST_CUDA_FLAGS) -x c++ -c $< -o $@

build/%cu_host: $(HOST_CUDA_DIR)/main_%.o $(HOST_CUDA_OBJS)
	$(CXX_HOST) -fopenmp $(HOST_SAN) $^ -lm -o $@

# several processes: multi_gpu.cpp's NCCL variant (rendezvous over -pi fs / tcp) with the NCCL calls
# of test/host_cuda/nccl_host.cpp (a shared file per communicator); needs only the toolkit's nccl.h
$(HOST_CUDA_DIR)/multi_gpu_nccl.o: llmc/cuda/multi_gpu.cpp $(HOST_CUDA_HEADERS)
	@mkdir -p $(dir $@)
	$(CXX_HOST) $(HOST_CUDA_FLAGS) -DMULTI_GPU -I$(NCCL_HOME)/include -c $< -o $@
$(HOST_CUDA_DIR)/nccl_host.o: test/host_cuda/nccl_host.cpp
	@mkdir -p $(dir $@)
	$(CXX_HOST) $(HOST_CUDA_FLAGS) -I$(NCCL_HOME)/include -c $< -o $@
build/train_gpt2cu_host_mg: $(HOST_CUDA_DIR)/main_train_gpt2.o $(filter-out %/multi_gpu.o,$(HOST_CUDA_OBJS)) \
                            $(HOST_CUDA_DIR)/multi_gpu_nccl.o $(HOST_CUDA_DIR)/nccl_host.o
	$(CXX_HOST) -fopenmp $(HOST_SAN) $^ -lm -lpthread -o $@

# the same with MPI as the rendezvous (mpirun -np 2), as the default GPU build links it
$(HOST_CUDA_DIR)/multi_gpu_mpi.o: llmc/cuda/multi_gpu.cpp $(HOST_CUDA_HEADERS)
	@mkdir -p $(dir $@)
	$(CXX_HOST) $(HOST_CUDA_FLAGS) -DMULTI_GPU -DUSE_MPI -I$(NCCL_HOME)/include $(MPI_CFLAGS) -c $< -o $@
build/train_gpt2cu_host_mpi: $(HOST_CUDA_DIR)/main_train_gpt2.o $(filter-out %/multi_gpu.o,$(HOST_CUDA_OBJS)) \
                             $(HOST_CUDA_DIR)/multi_gpu_mpi.o $(HOST_CUDA_DIR)/nccl_host.o
	$(CXX_HOST) -fopenmp $(HOST_SAN) $^ $(MPI_LDFLAGS) -lm -lpthread -o $@

TOOLKIT_TEST_BINS += build/test_gpt2cu_host build/train_gpt2cu_host build/eval_gpt2cu_host build/train_gpt2cu_host_mg \
             build/train_gpt2cu_host_mpi
# keep the objects (pattern-rule intermediates) so that a rebuild compiles only what changed
.SECONDARY: $(HOST_CUDA_OBJS) $(addprefix $(HOST_CUDA_DIR)/,multi_gpu_nccl.o multi_gpu_mpi.o nccl_host.o) $(addprefix $(HOST_CUDA_DIR)/main_,test_gpt2.o train_gpt2.o eval_gpt2.o)
