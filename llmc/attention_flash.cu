/*
 * llmc/attention_flash.cu: the kernels of the tiled causal attention (interface in
 * llmc/attention_flash.cuh). The arithmetic lives in llmc/flash_attention.h, shared with the CPU
 * emulation test (test/test_flash_emul.c); this file launches it:
 *   forward  one block per (sequence-head, query tile), key tiles up to the diagonal
 *   dK, dV   one block per (sequence-head, key tile), query tiles from the diagonal on
 *   dQ       one block per (sequence-head, query tile), key tiles up to the diagonal
 * BLK rows per tile (64 for d <= 64, else 32), BLK/16 warps. The grids put the longest blocks
 * first (the last query tiles, the first key tiles), so the short ones fill the tail.
 * Shared memory exceeds the 48 KiB default: each kernel opts in once per context and size.
 */
#include <stdint.h>

#include "attention_flash.cuh"
#include "flash_attention.h"
#include "utils.h"

/* grid (B h, tiles): blocks start x-fastest, so every sequence-head's longest tile goes first */
__global__ void __launch_bounds__(128) flash_fwd_kernel(FlashArgs a) {
    extern __shared__ __align__(128) char smem[];
    flash_fwd_block(&a, (int)(gridDim.y - 1 - blockIdx.y), (int)blockIdx.x, smem, (int)threadIdx.x, (int)blockDim.x);
}

__global__ void __launch_bounds__(128) flash_dkdv_kernel(FlashArgs a) {
    extern __shared__ __align__(128) char smem[];
    flash_dkdv_block(&a, (int)blockIdx.y, (int)blockIdx.x, smem, (int)threadIdx.x, (int)blockDim.x);
}

__global__ void __launch_bounds__(128) flash_dq_kernel(FlashArgs a) {
    extern __shared__ __align__(128) char smem[];
    flash_dq_block(&a, (int)(gridDim.y - 1 - blockIdx.y), (int)blockIdx.x, smem, (int)threadIdx.x, (int)blockDim.x);
}

int attention_flash_supported(int d, const GpuCtx *ctx, char *why, size_t cap) {
    if (ctx->sm < 80) {
        snprintf(why, cap, "SM %d.%d: the flash kernels need bf16 tensor cores (SM 8.0+)", ctx->sm / 10, ctx->sm % 10);
        return 0;
    }
    return flash_choose(d, ctx->smem_optin, why, cap) != 0;
}

static void check_aligned(const void *p, const char *name) {
    if ((uintptr_t)p % 16 != 0) llmc_die("flash attention: %s is not 16-byte aligned (the kernels load 8 bf16 at once)", name);
}

/* The arguments of one layer's call; dies with the reason when the shape cannot run. */
static FlashArgs flash_args(const floatX *qkv, int B, int T, int h, int d, const GpuCtx *ctx) {
    char why[256];
    if (!attention_flash_supported(d, ctx, why, sizeof(why))) llmc_die("flash attention: %s", why);
    if (ceil_div((size_t)T, 32) > 65535) llmc_die("flash attention: T = %d: more than 65535 tiles", T);
    check_aligned(qkv, "qkv");
    FlashArgs a;
    memset(&a, 0, sizeof(a));
    a.qkv = reinterpret_cast<const uint16_t *>(qkv);
    a.B = B;
    a.T = T;
    a.h = h;
    a.d = d;
    a.BLK = flash_choose(d, ctx->smem_optin, why, sizeof(why));
    a.scale = 1.0f / sqrtf((float)d); /* the own path's and the CPU reference's expression */
    return a;
}

/* Raise a kernel's dynamic shared-memory limit to `bytes` once per context (a host-side
 * attribute, not stream work). */
static void allow_smem(const void *kernel, int kind, size_t bytes, const GpuCtx *ctx) {
    if (bytes <= ctx->flash_smem_set[kind]) return;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    ctx->flash_smem_set[kind] = bytes;
}

void attention_flash_forward(floatX *out, float *lse, const floatX *qkv, int B, int T, int h, int d,
                             const GpuCtx *ctx) {
    FlashArgs a = flash_args(qkv, B, T, h, d, ctx);
    a.o = reinterpret_cast<uint16_t *>(out);
    a.lse = lse;
    const size_t bytes = flash_smem_bytes(FLASH_FWD, a.BLK, d);
    allow_smem((const void *)flash_fwd_kernel, FLASH_FWD, bytes, ctx);
    const dim3 grid((unsigned)(B * h), (unsigned)ceil_div((size_t)T, (size_t)a.BLK));
    flash_fwd_kernel<<<grid, 2 * a.BLK, bytes, ctx->stream>>>(a);
    CUDA_CHECK_LAUNCH();
}

void attention_flash_backward(floatX *dqkv, const floatX *dout, const floatX *qkv, const floatX *out,
                              const float *lse, int B, int T, int h, int d, const GpuCtx *ctx) {
    FlashArgs a = flash_args(qkv, B, T, h, d, ctx);
    check_aligned(dout, "dout");
    check_aligned(out, "out");
    check_aligned(dqkv, "dqkv");
    a.out = reinterpret_cast<const uint16_t *>(out);
    a.dout = reinterpret_cast<const uint16_t *>(dout);
    a.lse = const_cast<float *>(lse); /* read only in the backward */
    a.dqkv = reinterpret_cast<uint16_t *>(dqkv);
    const dim3 grid((unsigned)(B * h), (unsigned)ceil_div((size_t)T, (size_t)a.BLK));
    const size_t b_kv = flash_smem_bytes(FLASH_DKDV, a.BLK, d), b_q = flash_smem_bytes(FLASH_DQ, a.BLK, d);
    allow_smem((const void *)flash_dkdv_kernel, FLASH_DKDV, b_kv, ctx);
    allow_smem((const void *)flash_dq_kernel, FLASH_DQ, b_q, ctx);
    flash_dkdv_kernel<<<grid, 2 * a.BLK, b_kv, ctx->stream>>>(a);
    CUDA_CHECK_LAUNCH();
    flash_dq_kernel<<<grid, 2 * a.BLK, b_q, ctx->stream>>>(a);
    CUDA_CHECK_LAUNCH();
}
