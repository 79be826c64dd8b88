/*
 * llmc/attention/flash.cu: the kernels of the tiled causal attention (interface in
 * llmc/attention/flash.cuh). The arithmetic lives in llmc/attention/flash.h, shared with the CPU
 * emulation test (test/test_flash_emul.c); this file launches it:
 *   forward  one block per (sequence-head, query tile), key tiles up to the diagonal
 *   D        one thread per row: D = dO . O, read by both backward kernels
 *   dK, dV   one block per (sequence-head, key tile), query tiles from the diagonal on
 *   dQ       one block per (sequence-head, query tile), key tiles up to the diagonal
 * BLK rows per tile (64 for d <= 64, else 32), BLK/16 warps. The grids put the longest blocks
 * first (the last query tiles, the first key tiles), so the short ones fill the tail.
 * Shared memory exceeds the 48 KiB default: each kernel opts in once per context and size
 * (gpu_allow_smem).
 */
#include <stdint.h>

#include "flash.cuh"
#include "flash.h"
#include "paths.h"
#include "../utils.h"

/* grid (B h, tiles): blocks start x-fastest, so every sequence-head's longest tile goes first.
 * __launch_bounds__(128, 2): at most 128 threads, at least 2 blocks per SM (what the shared memory
 * allows anyway); without the second figure ptxas capped the registers low enough to spill the
 * grouped accumulators of flash_wmma (ptxas -v: 4-36 bytes; none with it, 116-134 registers). */
__global__ void __launch_bounds__(128, 2) flash_fwd_kernel(FlashArgs a) {
    extern __shared__ __align__(128) char smem[];
    flash_fwd_block(&a, (int)(gridDim.y - 1 - blockIdx.y), (int)blockIdx.x, smem, (int)threadIdx.x, (int)blockDim.x);
}

__global__ void __launch_bounds__(128, 2) flash_dkdv_kernel(FlashArgs a) {
    extern __shared__ __align__(128) char smem[];
    flash_dkdv_block(&a, (int)blockIdx.y, (int)blockIdx.x, smem, (int)threadIdx.x, (int)blockDim.x);
}

__global__ void __launch_bounds__(128, 2) flash_dq_kernel(FlashArgs a) {
    extern __shared__ __align__(128) char smem[];
    flash_dq_block(&a, (int)(gridDim.y - 1 - blockIdx.y), (int)blockIdx.x, smem, (int)threadIdx.x, (int)blockDim.x);
}

/* D = dO . O, one thread per row of the (B, h, T) rows */
static __global__ void flash_delta_kernel(FlashArgs a) {
    const size_t rows = (size_t)a.B * a.h * a.T;
    for (size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += (size_t)gridDim.x * blockDim.x)
        flash_delta_row(&a, r);
}

void flash_delta(const FlashArgs *a, cudaStream_t stream) {
    const size_t rows = (size_t)a->B * a->h * a->T;
    flash_delta_kernel<<<grid_stride_blocks(rows, 256), 256, 0, stream>>>(*a);
    CUDA_CHECK_LAUNCH();
}

static void check_aligned(const void *p, const char *name) {
    if ((uintptr_t)p % 16 != 0) llmc_die("flash attention: %s is not 16-byte aligned (the kernels load 8 bf16 at once)", name);
}

/* The arguments of one layer's call (llmc/attention/paths.h flash_args_init); dies with the reason when the
 * shape cannot run. */
static FlashArgs flash_args(const floatX *qkv, int B, int T, int h, int d, const GpuCtx *ctx) {
    char why[256];
    const AttnEnv env = {ctx->sm, 0, 0, ctx->smem_optin};
    FlashArgs a;
    if (!flash_args_init(&a, reinterpret_cast<const uint16_t *>(qkv), B, T, h, d, &env, why, sizeof(why)))
        llmc_die("flash attention: %s", why);
    check_aligned(qkv, "qkv");
    return a;
}

void attention_flash_forward(floatX *out, float *lse, const floatX *qkv, int B, int T, int h, int d,
                             const GpuCtx *ctx) {
    FlashArgs a = flash_args(qkv, B, T, h, d, ctx);
    a.o = reinterpret_cast<uint16_t *>(out);
    a.lse = lse;
    const size_t bytes = flash_smem_bytes(FLASH_FWD, a.BLK, d);
    gpu_allow_smem((const void *)flash_fwd_kernel, bytes, &ctx->flash_smem_set[FLASH_FWD]);
    const dim3 grid((unsigned)(B * h), (unsigned)ceil_div((size_t)T, (size_t)a.BLK));
    flash_fwd_kernel<<<grid, 2 * a.BLK, bytes, ctx->stream>>>(a);
    CUDA_CHECK_LAUNCH();
}

void attention_flash_backward(floatX *dqkv, float *D, const floatX *dout, const floatX *qkv, const floatX *out,
                              const float *lse, int B, int T, int h, int d, const GpuCtx *ctx) {
    FlashArgs a = flash_args(qkv, B, T, h, d, ctx);
    check_aligned(dout, "dout");
    check_aligned(out, "out");
    check_aligned(dqkv, "dqkv");
    a.out = reinterpret_cast<const uint16_t *>(out);
    a.dout = reinterpret_cast<const uint16_t *>(dout);
    a.lse = const_cast<float *>(lse); /* read only in the backward */
    a.dqkv = reinterpret_cast<uint16_t *>(dqkv);
    a.D = D;
    flash_delta(&a, ctx->stream);
    const dim3 grid((unsigned)(B * h), (unsigned)ceil_div((size_t)T, (size_t)a.BLK));
    const size_t b_kv = flash_smem_bytes(FLASH_DKDV, a.BLK, d), b_q = flash_smem_bytes(FLASH_DQ, a.BLK, d);
    gpu_allow_smem((const void *)flash_dkdv_kernel, b_kv, &ctx->flash_smem_set[FLASH_DKDV]);
    gpu_allow_smem((const void *)flash_dq_kernel, b_q, &ctx->flash_smem_set[FLASH_DQ]);
    flash_dkdv_kernel<<<grid, 2 * a.BLK, b_kv, ctx->stream>>>(a);
    CUDA_CHECK_LAUNCH();
    flash_dq_kernel<<<grid, 2 * a.BLK, b_q, ctx->stream>>>(a);
    CUDA_CHECK_LAUNCH();
}
