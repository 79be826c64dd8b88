/*
 * llmc/attention_flash_mma.cu: the kernel of the register-tile attention forward (interface in
 * llmc/attention_flash_mma.cuh; the routine, its layout and its math in llmc/flash_mma.h).
 * Grid (B h, query tiles of 64) with the last (longest) tiles first, 128 threads, one kernel per
 * head size (the output accumulators are registers: their count is a template parameter).
 */
#include <stdint.h>

#include "attention_flash_mma.cuh"
#include "flash_mma.h"
#include "utils.h"

template <int D>
__global__ void __launch_bounds__(FMMA_THREADS) fmma_fwd_kernel(FlashArgs a) {
    extern __shared__ __align__(16) char smem[];
    fmma_fwd_block<D>(&a, (int)(gridDim.y - 1 - blockIdx.y), (int)blockIdx.x, smem, (int)threadIdx.x);
}

int attention_flash_mma_supports(int d, const GpuCtx *ctx, char *why, size_t cap) {
    return fmma_supports(d, ctx->sm, ctx->smem_optin, why, cap);
}

/* The kernel of head size D with its shared memory opted in (once per process and size: this
 * path is run by the dev/cuda check, one device per process). */
template <int D>
static void launch(const FlashArgs &a, cudaStream_t stream) {
    static size_t opted = 0;
    const size_t bytes = fmma_smem_bytes(D);
    gpu_allow_smem((const void *)fmma_fwd_kernel<D>, bytes, &opted);
    const dim3 grid((unsigned)(a.B * a.h), (unsigned)ceil_div((size_t)a.T, (size_t)FMMA_BQ));
    fmma_fwd_kernel<D><<<grid, FMMA_THREADS, bytes, stream>>>(a);
    CUDA_CHECK_LAUNCH();
}

void attention_flash_mma_forward(floatX *out, float *lse, const floatX *qkv, int B, int T, int h, int d,
                                 const GpuCtx *ctx) {
    char why[256];
    if (!attention_flash_mma_supports(d, ctx, why, sizeof(why))) llmc_die("register-tile attention: %s", why);
    if ((uintptr_t)qkv % 16 != 0) llmc_die("register-tile attention: qkv is not 16-byte aligned");
    if (ceil_div((size_t)T, (size_t)FMMA_BQ) > 65535) llmc_die("register-tile attention: T = %d: too many tiles", T);
    FlashArgs a;
    memset(&a, 0, sizeof(a));
    a.qkv = reinterpret_cast<const uint16_t *>(qkv);
    a.o = reinterpret_cast<uint16_t *>(out);
    a.lse = lse;
    a.B = B;
    a.T = T;
    a.h = h;
    a.d = d;
    a.BLK = FMMA_BQ;
    a.scale = 1.0f / sqrtf((float)d);
    switch (d) {
#define FMMA_LAUNCH(D) \
    case D: launch<D>(a, ctx->stream); break;
        FMMA_LAUNCH(16) FMMA_LAUNCH(32) FMMA_LAUNCH(48) FMMA_LAUNCH(64) FMMA_LAUNCH(80) FMMA_LAUNCH(96)
        FMMA_LAUNCH(112) FMMA_LAUNCH(128) FMMA_LAUNCH(144) FMMA_LAUNCH(160) FMMA_LAUNCH(176) FMMA_LAUNCH(192)
        FMMA_LAUNCH(208) FMMA_LAUNCH(224) FMMA_LAUNCH(240) FMMA_LAUNCH(256)
#undef FMMA_LAUNCH
    default: llmc_die("register-tile attention: head size %d", d);
    }
}
