/*
 * llmc/attention_flash_mma.cuh: the register-tile causal attention forward (llmc/flash_mma.h,
 * mma.sync on bf16 tensor cores; llmc/attention_flash_mma.cu launches it).
 *
 * The forward of the cuDNN path's interface (llmc/cudnn_att.h, llmc/attention_flash.cuh):
 *   qkv   (B, T, 3A) bf16, A = h d: Q | K | V, head k at columns [k d, (k+1) d), 16-byte aligned
 *   out   (B, T, A) bf16; lse (B, h, T) fp32 (natural log of the scaled scores' row sums)
 * Head sizes: multiples of 16 in [16, 256] (fmma_supports); any T >= 1; SM 8.0+.
 *
 * Status: an experiment, not used by the trainer. The routine is checked on the CPU with PTX's
 * fragment semantics (test/test_flash_mma_emul.cpp); dev/cuda/attention_mma checks and times the
 * kernel on a GPU (dev/gpu_check.sh step 5), which has not run yet. There is no backward yet: the
 * trainer's -attn flash keeps llmc/attention_flash.cuh until both directions are measured.
 */
#ifndef LLMC_ATTENTION_FLASH_MMA_CUH
#define LLMC_ATTENTION_FLASH_MMA_CUH

#include "cuda_common.cuh"

/* 1 if head size d can run on ctx's GPU; else 0 with the reason in why. */
int attention_flash_mma_supports(int d, const GpuCtx *ctx, char *why, size_t cap);

/* out, lse = causal attention of qkv; dies with one line when d cannot run (see _supports). */
void attention_flash_mma_forward(floatX *out, float *lse, const floatX *qkv, int B, int T, int h, int d,
                                 const GpuCtx *ctx);

#endif /* LLMC_ATTENTION_FLASH_MMA_CUH */
