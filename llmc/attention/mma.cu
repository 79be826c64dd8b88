/*
 * llmc/attention/mma.cu: the kernels of the register-tile attention (interface in
 * llmc/attention/mma.cuh; the routines, their layout and math in llmc/attention/mma.h):
 *   forward  grid (B h, query tiles of BLK rows), the last (longest) tiles first
 *   D        D = dO . O per row (flash_delta of llmc/attention/flash.cu, shared with that path)
 *   dK, dV   grid (B h, key tiles of BLK rows), the first (longest) tiles first
 *   dQ       grid (B h, query tiles of BLK rows), the last tiles first
 * BLK = 128 (two 16-row groups per warp) up to d = FMMA_RW2_MAX_D, else 64. 128 threads per
 * block; one kernel per head size and tile (the accumulators are registers: their count is a
 * template parameter). Nothing is summed across blocks: deterministic, no atomics. The _bq entry
 * points take the tile (64 or 128 rows) so that dev/cuda times both side by side; the trainer's
 * calls take fmma_block_rows(d).
 */
#include <stdint.h>

#include "flash.cuh" /* flash_delta */
#include "mma.cuh"
#include "mma.h"
#include "paths.h"
#include "../utils.h"

template <int D, int RW>
__global__ void __launch_bounds__(FMMA_THREADS) fmma_fwd_kernel(FlashArgs a) {
    extern __shared__ __align__(16) char smem[];
    fmma_fwd_block<D, RW>(&a, (int)(gridDim.y - 1 - blockIdx.y), (int)blockIdx.x, smem, (int)threadIdx.x);
}

template <int D, int PARTS, int RW>
__global__ void __launch_bounds__(FMMA_THREADS) fmma_dkdv_kernel(FlashArgs a) {
    extern __shared__ __align__(16) char smem[];
    fmma_dkdv_block<D, PARTS, RW>(&a, (int)blockIdx.y, (int)blockIdx.x, smem, (int)threadIdx.x);
}

template <int D, int RW>
__global__ void __launch_bounds__(FMMA_THREADS) fmma_dq_kernel(FlashArgs a) {
    extern __shared__ __align__(16) char smem[];
    fmma_dq_block<D, RW>(&a, (int)(gridDim.y - 1 - blockIdx.y), (int)blockIdx.x, smem, (int)threadIdx.x);
}

int attention_flash_mma_supports(int d, int training, const GpuCtx *ctx, char *why, size_t cap) {
    const AttnEnv env = {ctx->sm, 0, 0, ctx->smem_optin};
    return mma_path_supports(&env, d, training, why, cap);
}

/* One launch of kernel K (a forward, dK/dV or dQ instance) of `kind` with RW groups per warp:
 * grid (B h, tiles of RW 64 rows: queries, or keys for dK/dV), its shared memory opted in once
 * per instance (a static memo: every program that runs this path, the trainer and the dev/cuda
 * check, drives one device per process). */
template <void (*K)(FlashArgs), int D, int RW>
static void launch(const FlashArgs &a, int kind, cudaStream_t stream) {
    static size_t opted = 0;
    const size_t bytes = fmma_smem_bytes_bq(kind, D, RW * FMMA_BQ);
    gpu_allow_smem((const void *)K, bytes, &opted);
    const dim3 grid((unsigned)(a.B * a.h), (unsigned)ceil_div((size_t)a.T, (size_t)(RW * FMMA_BQ)));
    K<<<grid, FMMA_THREADS, bytes, stream>>>(a);
    CUDA_CHECK_LAUNCH();
}

/* 128-row tiles are built only up to FMMA_RW2_MAX_D (above, their registers would spill);
 * args_of has refused any other request */
template <int D>
static void launch_forward(const FlashArgs &a, cudaStream_t stream) {
    if constexpr (D <= FMMA_RW2_MAX_D)
        if (a.BLK == 2 * FMMA_BQ) return launch<fmma_fwd_kernel<D, 2>, D, 2>(a, FMMA_FWD, stream);
    launch<fmma_fwd_kernel<D, 1>, D, 1>(a, FMMA_FWD, stream);
}

/* dK and dV in one kernel up to FMMA_SPLIT_D, in two above (mma.h fmma_dkdv_block), then dQ */
template <int D>
static void launch_backward(const FlashArgs &a, cudaStream_t stream) {
    if constexpr (D <= FMMA_RW2_MAX_D) {
        if (a.BLK == 2 * FMMA_BQ) {
            launch<fmma_dkdv_kernel<D, FMMA_PART_BOTH, 2>, D, 2>(a, FMMA_DKDV, stream);
            return launch<fmma_dq_kernel<D, 2>, D, 2>(a, FMMA_DQ, stream);
        }
    }
    if constexpr (D <= FMMA_SPLIT_D) {
        launch<fmma_dkdv_kernel<D, FMMA_PART_BOTH, 1>, D, 1>(a, FMMA_DKDV, stream);
    } else {
        launch<fmma_dkdv_kernel<D, FMMA_PART_DV, 1>, D, 1>(a, FMMA_DKDV, stream);
        launch<fmma_dkdv_kernel<D, FMMA_PART_DK, 1>, D, 1>(a, FMMA_DKDV, stream);
    }
    launch<fmma_dq_kernel<D, 1>, D, 1>(a, FMMA_DQ, stream);
}

/* llmc/attention/paths.h mma_args_init with the block tile bq (0: fmma_block_rows(d)), or a one-line error */
static FlashArgs args_of(const floatX *qkv, int B, int T, int h, int d, int training, int bq, const GpuCtx *ctx) {
    char why[256];
    const AttnEnv env = {ctx->sm, 0, 0, ctx->smem_optin};
    FlashArgs a;
    if (!mma_args_init(&a, reinterpret_cast<const uint16_t *>(qkv), B, T, h, d, training, &env, why, sizeof(why)))
        llmc_die("register-tile attention: %s", why);
    if ((uintptr_t)qkv % 16 != 0) llmc_die("register-tile attention: qkv is not 16-byte aligned");
    if (bq != 0 && bq != FMMA_BQ && !(bq == 2 * FMMA_BQ && d <= FMMA_RW2_MAX_D))
        llmc_die("register-tile attention: tiles of %d rows at d %d (64, or 128 up to d %d)", bq, d,
                 FMMA_RW2_MAX_D);
    if (bq != 0) a.BLK = bq; /* both fit wherever the default does: the default is the larger */
    return a;
}

void attention_flash_mma_forward(floatX *out, float *lse, const floatX *qkv, int B, int T, int h, int d,
                                 const GpuCtx *ctx) {
    attention_flash_mma_forward_bq(out, lse, qkv, B, T, h, d, 0, ctx);
}

void attention_flash_mma_backward(floatX *dqkv, float *D, const floatX *dout, const floatX *qkv, const floatX *out,
                                  const float *lse, int B, int T, int h, int d, const GpuCtx *ctx) {
    attention_flash_mma_backward_bq(dqkv, D, dout, qkv, out, lse, B, T, h, d, 0, ctx);
}

void attention_flash_mma_forward_bq(floatX *out, float *lse, const floatX *qkv, int B, int T, int h, int d, int bq,
                                    const GpuCtx *ctx) {
    FlashArgs a = args_of(qkv, B, T, h, d, 0, bq, ctx);
    if ((uintptr_t)out % 4 != 0) llmc_die("register-tile attention: out is not 4-byte aligned (32-bit stores)");
    a.o = reinterpret_cast<uint16_t *>(out);
    a.lse = lse;
    switch (d) {
#define FMMA_LAUNCH(D) \
    case D: launch_forward<D>(a, ctx->stream); break;
        FMMA_LAUNCH(16) FMMA_LAUNCH(32) FMMA_LAUNCH(48) FMMA_LAUNCH(64) FMMA_LAUNCH(80) FMMA_LAUNCH(96)
        FMMA_LAUNCH(112) FMMA_LAUNCH(128) FMMA_LAUNCH(144) FMMA_LAUNCH(160) FMMA_LAUNCH(176) FMMA_LAUNCH(192)
        FMMA_LAUNCH(208) FMMA_LAUNCH(224) FMMA_LAUNCH(240) FMMA_LAUNCH(256)
#undef FMMA_LAUNCH
    default: llmc_die("register-tile attention: head size %d", d);
    }
}

void attention_flash_mma_backward_bq(floatX *dqkv, float *D, const floatX *dout, const floatX *qkv,
                                     const floatX *out, const float *lse, int B, int T, int h, int d, int bq,
                                     const GpuCtx *ctx) {
    FlashArgs a = args_of(qkv, B, T, h, d, 1, bq, ctx);
    if ((uintptr_t)dout % 16 != 0 || (uintptr_t)out % 16 != 0 || (uintptr_t)dqkv % 4 != 0)
        llmc_die("register-tile attention: dout and out must be 16-byte aligned, dqkv 4-byte");
    a.out = reinterpret_cast<const uint16_t *>(out);
    a.dout = reinterpret_cast<const uint16_t *>(dout);
    a.lse = const_cast<float *>(lse); /* read only in the backward */
    a.dqkv = reinterpret_cast<uint16_t *>(dqkv);
    a.D = D;
    flash_delta(&a, ctx->stream);
    switch (d) {
#define FMMA_LAUNCH(D) \
    case D: launch_backward<D>(a, ctx->stream); break;
        FMMA_LAUNCH(16) FMMA_LAUNCH(32) FMMA_LAUNCH(48) FMMA_LAUNCH(64) FMMA_LAUNCH(80) FMMA_LAUNCH(96)
        FMMA_LAUNCH(112) FMMA_LAUNCH(128) FMMA_LAUNCH(144) FMMA_LAUNCH(160) FMMA_LAUNCH(176) FMMA_LAUNCH(192)
        FMMA_LAUNCH(208) FMMA_LAUNCH(224) FMMA_LAUNCH(240) FMMA_LAUNCH(256)
#undef FMMA_LAUNCH
    default: llmc_die("register-tile attention: head size %d", d);
    }
}
