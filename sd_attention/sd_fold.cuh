/*
 * sd_attention/sd_fold.cuh: the S-D fold on the GPU (doc/methods.md "Realization with the standard attention kernels"; sd_attention/sd_fold.cu), the CUDA kernels
 * around the routines of sd_attention/sd_fold.h.
 *
 * One S-D layer with h heads of size d (A = h d), N = B T rows:
 *   forward   uv (N, 2A) = x W^T + b (the caller's matmul; W holds U rows then V rows)
 *             sd_gpu_scatter_uv:      qkv (N, 3A) <- U | . | V
 *             sd_gpu_build_generator: L (h, d, d) fp32 <- packed S, theta (bf16 parameters)
 *             sd_gpu_fold_forward:    K' slot <- U L^T; then any softmax or linear attention
 *   backward  sd_gpu_fold_backward:   duv (N, 2A) <- dQ + dK' L | dV,  dL (h, d, d) fp32 <- dK'^T U
 *                                 summed over the N rows (cuBLAS, fp32 output, reproducible)
 *             sd_gpu_params_backward: packed dS, dtheta += from dL (bf16 gradients accumulate)
 *             then the caller's matmul backward of the uv projection from duv
 * Every launch runs on the context's stream; indices are 64-bit; no atomics.
 */
#ifndef LLMC_SD_GPU_CUH
#define LLMC_SD_GPU_CUH

#include "../llmc/cuda/cuda_common.cuh"

/* dst (N rows of stride ldd), columns [0, width) <- src (N rows of stride lds). */
void copy_columns(floatX *dst, size_t ldd, const floatX *src, size_t lds, size_t N, int width,
                  cudaStream_t stream);

void sd_gpu_scatter_uv(floatX *qkv, const floatX *uv, size_t N, int A, cudaStream_t stream);
void sd_gpu_build_generator(float *L, const floatX *skew, const floatX *theta, int h, int d, int scalar_d,
                        int sign, cudaStream_t stream);
void sd_gpu_fold_forward(floatX *qkv, const float *L, size_t N, int h, int d, cudaStream_t stream);
void sd_gpu_fold_backward(floatX *duv, float *dL, const floatX *dqkv, const floatX *qkv, const float *L,
                      size_t N, int h, int d, const GpuCtx *ctx);
void sd_gpu_params_backward(floatX *dskew, floatX *dtheta, const float *dL, const floatX *theta, int h,
                        int d, int scalar_d, int sign, cudaStream_t stream);

#endif /* LLMC_SD_GPU_CUH */
