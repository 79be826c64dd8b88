/*
 * llmc/gpu_shared.h: what code compiled both by nvcc (device) and by gcc (the CPU tests) needs,
 * so that the same source of a device routine can be run on the CPU without a GPU.
 *
 * Defines:
 *   LLMC_HD            __host__ __device__ under nvcc, nothing under a C compiler
 *   LLMC_BLOCK_SYNC()  __syncthreads() in device code; a no-op on the host, where a "block" is
 *                      run by one thread that executes every phase in order (nthreads = 1)
 *   hd_bf16_to_f32 / hd_f32_to_bf16   bf16 bits <-> float, round to nearest even, NaN kept
 *                      (bit-identical to __float2bfloat16_rn and to checkpoint.h f32_to_bf16)
 *
 * Why: no GPU is available to develop on; routines written once against these macros
 * (llmc/sd_fold.h, llmc/linear_scan.h) are executed by the CUDA kernels and, block by block, by
 * test/test_gpu_emul.c on the CPU against the fp32 reference (llmc/cpu_kernels.h). What the CPU
 * run cannot show is what only many threads do: races between phases. Each routine separates
 * its phases with LLMC_BLOCK_SYNC and every shared value is written in one phase and read in a
 * later one (said at each routine).
 */
#ifndef LLMC_GPU_SHARED_H
#define LLMC_GPU_SHARED_H

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
#else
#define LLMC_BLOCK_SYNC() ((void)0)
#endif

static inline LLMC_HD float hd_bf16_to_f32(uint16_t b) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float((uint32_t)b << 16);
#else
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

static inline LLMC_HD uint16_t hd_f32_to_bf16(float f) {
#if defined(__CUDA_ARCH__)
    const uint32_t u = __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, 4);
#endif
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#endif /* LLMC_GPU_SHARED_H */
