/*
 * llmc/attention_flash_mma.cu: the kernels of the register-tile attention (interface in
 * llmc/attention_flash_mma.cuh; the routines, their layout and math in llmc/flash_mma.h):
 *   forward  grid (B h, query tiles of 64), the last (longest) tiles first
 *   D        D = dO . O per row (flash_delta of llmc/attention_flash.cu, shared with that path)
 *   dK, dV   grid (B h, key tiles of 64), the first (longest) tiles first
 *   dQ       grid (B h, query tiles), the last tiles first
 * 128 threads per block; one kernel per head size (the accumulators are registers: their count is
 * a template parameter). Nothing is summed across blocks: deterministic, no atomics.
 */
#include <stdint.h>

#include "attention_flash.cuh" /* flash_delta */
#include "attention_flash_mma.cuh"
#include "flash_mma.h"
#include "gpu_host.h" /* mma_args_init */
#include "utils.h"

template <int D>
__global__ void __launch_bounds__(FMMA_THREADS) fmma_fwd_kernel(FlashArgs a) {
    extern __shared__ __align__(16) char smem[];
    fmma_fwd_block<D>(&a, (int)(gridDim.y - 1 - blockIdx.y), (int)blockIdx.x, smem, (int)threadIdx.x);
}

template <int D, int PARTS>
__global__ void __launch_bounds__(FMMA_THREADS) fmma_dkdv_kernel(FlashArgs a) {
    extern __shared__ __align__(16) char smem[];
    fmma_dkdv_block<D, PARTS>(&a, (int)blockIdx.y, (int)blockIdx.x, smem, (int)threadIdx.x);
}

template <int D>
__global__ void __launch_bounds__(FMMA_THREADS) fmma_dq_kernel(FlashArgs a) {
    extern __shared__ __align__(16) char smem[];
    fmma_dq_block<D>(&a, (int)(gridDim.y - 1 - blockIdx.y), (int)blockIdx.x, smem, (int)threadIdx.x);
}

int attention_flash_mma_supports(int d, int training, const GpuCtx *ctx, char *why, size_t cap) {
    const AttnEnv env = {ctx->sm, 0, 0, ctx->smem_optin};
    return mma_path_supports(&env, d, training, why, cap);
}

/* Shared memory opted in once per kernel instance (static memos: every program that runs this
 * path, the trainer and the dev/cuda check, drives one device per process). */
template <int D>
static void launch_forward(const FlashArgs &a, cudaStream_t stream) {
    static size_t opted = 0;
    const size_t bytes = fmma_smem_bytes_kind(FMMA_FWD, D);
    gpu_allow_smem((const void *)fmma_fwd_kernel<D>, bytes, &opted);
    const dim3 grid((unsigned)(a.B * a.h), (unsigned)ceil_div((size_t)a.T, (size_t)FMMA_BQ));
    fmma_fwd_kernel<D><<<grid, FMMA_THREADS, bytes, stream>>>(a);
    CUDA_CHECK_LAUNCH();
}

template <int D, int PARTS>
static void launch_dkdv(const FlashArgs &a, dim3 grid, cudaStream_t stream) {
    static size_t opted = 0;
    const size_t bytes = fmma_smem_bytes_kind(FMMA_DKDV, D);
    gpu_allow_smem((const void *)fmma_dkdv_kernel<D, PARTS>, bytes, &opted);
    fmma_dkdv_kernel<D, PARTS><<<grid, FMMA_THREADS, bytes, stream>>>(a);
    CUDA_CHECK_LAUNCH();
}

/* dK and dV in one kernel up to FMMA_SPLIT_D, in two above (flash_mma.h fmma_dkdv_block), then dQ */
template <int D>
static void launch_backward(const FlashArgs &a, cudaStream_t stream) {
    static size_t opted_q = 0;
    const size_t b_q = fmma_smem_bytes_kind(FMMA_DQ, D);
    const dim3 grid((unsigned)(a.B * a.h), (unsigned)ceil_div((size_t)a.T, (size_t)FMMA_BQ));
    if constexpr (D <= FMMA_SPLIT_D) {
        launch_dkdv<D, FMMA_PART_BOTH>(a, grid, stream);
    } else {
        launch_dkdv<D, FMMA_PART_DV>(a, grid, stream);
        launch_dkdv<D, FMMA_PART_DK>(a, grid, stream);
    }
    gpu_allow_smem((const void *)fmma_dq_kernel<D>, b_q, &opted_q);
    fmma_dq_kernel<D><<<grid, FMMA_THREADS, b_q, stream>>>(a);
    CUDA_CHECK_LAUNCH();
}

/* gpu_host.h mma_args_init, or a one-line error */
static FlashArgs args_of(const floatX *qkv, int B, int T, int h, int d, int training, const GpuCtx *ctx) {
    char why[256];
    const AttnEnv env = {ctx->sm, 0, 0, ctx->smem_optin};
    FlashArgs a;
    if (!mma_args_init(&a, reinterpret_cast<const uint16_t *>(qkv), B, T, h, d, training, &env, why, sizeof(why)))
        llmc_die("register-tile attention: %s", why);
    if ((uintptr_t)qkv % 16 != 0) llmc_die("register-tile attention: qkv is not 16-byte aligned");
    return a;
}

void attention_flash_mma_forward(floatX *out, float *lse, const floatX *qkv, int B, int T, int h, int d,
                                 const GpuCtx *ctx) {
    FlashArgs a = args_of(qkv, B, T, h, d, 0, ctx);
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

void attention_flash_mma_backward(floatX *dqkv, float *D, const floatX *dout, const floatX *qkv, const floatX *out,
                                  const float *lse, int B, int T, int h, int d, const GpuCtx *ctx) {
    FlashArgs a = args_of(qkv, B, T, h, d, 1, ctx);
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
