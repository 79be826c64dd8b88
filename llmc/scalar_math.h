/*
 * llmc/scalar_math.h: what code compiled both by nvcc (device) and by gcc (the CPU tests) needs,
 * so that the same source of a device routine can be run on the CPU without a GPU.
 *
 * Defines:
 *   LLMC_HD            __host__ __device__ under nvcc, nothing under a C compiler
 *   LLMC_BLOCK_SYNC()  __syncthreads() in device code; a no-op on the host, where a "block" is
 *                      run by one thread that executes every phase in order (nthreads = 1)
 *   LLMC_WARP_SYNC()   __syncwarp() in device code (a warp's lanes see each other's shared-memory
 *                      writes); a no-op on the host, where one "lane" runs a warp's work
 *   bf16_to_f32 / f32_to_bf16   bf16 bits <-> float, round to nearest even, NaN kept quiet
 *                      (bit-identical to torch and to __float2bfloat16_rn): the project's only
 *                      conversion, used by the checkpoints (llmc/checkpoint.h), the device
 *                      routines and the tests (test/test_scalar_math.c checks it)
 *   gelu_tanhf, gelu_tanh_gradf   GPT-2's GELU (tanh approximation) and its derivative
 *   GemmDesc           a cuBLAS strided-batched GEMM call as data
 *   The scalar formulas are written once here so that the CPU reference (llmc/cpu/kernels.h) and
 *   the device routines compute exactly the same expression.
 *
 * Why: no GPU is available to develop on; routines written once against these macros
 * (sd_attention/sd_fold.h, sd_attention/linear_scan.h) are executed by the CUDA kernels and, block by block, by
 * test/test_sd_fold_emul.c on the CPU against the fp32 reference (llmc/cpu/kernels.h). What the CPU
 * run cannot show is what only many threads do: races between phases. Each routine separates
 * its phases with LLMC_BLOCK_SYNC and every shared value is written in one phase and read in a
 * later one (said at each routine).
 */
#ifndef LLMC_SCALAR_MATH_H
#define LLMC_SCALAR_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef LLMC_HD
#if defined(__CUDACC__)
#define LLMC_HD __host__ __device__
#else
#define LLMC_HD
#endif
#endif

#if defined(__CUDA_ARCH__)
#define LLMC_BLOCK_SYNC() __syncthreads()
#define LLMC_WARP_SYNC() __syncwarp()
#else
#define LLMC_BLOCK_SYNC() ((void)0)
#define LLMC_WARP_SYNC() ((void)0)
#endif

static inline LLMC_HD float bf16_to_f32(uint16_t b) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float((uint32_t)b << 16);
#else
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

/* Round to nearest even: add 0x7fff plus the lowest kept bit, then truncate. A NaN is kept a
 * (quiet) NaN instead of letting the rounding carry turn it into infinity. */
static inline LLMC_HD uint16_t f32_to_bf16(float f) {
#if defined(__CUDA_ARCH__)
    const uint32_t u = __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, 4);
#endif
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* cuBLAS's column-major strided-batched GEMM as data: C_i = op(A_i) op(B_i), A_i = A + i strideA,
 * ...; op = transpose when trans* is 1; C is m x n, op(A) m x k, op(B) k x n. The CUDA code passes
 * it to cublasGemmStridedBatchedEx, the CPU tests and test/host_cuda run it with loops, so the
 * operand mapping of a call is checked without a GPU (sd_attention/sd_fold.h, llmc/attention/own_seq.h). */
typedef struct {
    int transa, transb;
    int m, n, k;
    long long lda, ldb, ldc;
    long long strideA, strideB, strideC;
    int batch;
} GemmDesc;

/* GELU, tanh approximation (GPT-2's, the CPU model's): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 * and its derivative; the GELU kernels of llmc/cuda/kernels.cu and test/host_cuda run these */
static inline LLMC_HD float gelu_tanhf(float x) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}
static inline LLMC_HD float gelu_tanh_gradf(float x) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    const float th = tanhf(u);
    const float du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}

#endif /* LLMC_SCALAR_MATH_H */
