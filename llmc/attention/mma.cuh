/*
 * llmc/attention/mma.cuh: the register-tile causal attention, forward and backward
 * (llmc/attention/mma.h: mma.sync on bf16 tensor cores, ldmatrix, cp.async; llmc/attention/mma.cu
 * launches it).
 *
 * The cuDNN path's interface (llmc/attention/cudnn.h, llmc/attention/flash.cuh):
 *   qkv   (B, T, 3A) bf16, A = h d: Q | K | V, head k at columns [k d, (k+1) d), 16-byte aligned
 *   out   (B, T, A) bf16; lse (B, h, T) fp32 (natural log of the scaled scores' row sums)
 *   dout  (B, T, A) bf16; dqkv (B, T, 3A) bf16, every element overwritten
 *   D     (B, h, T) fp32 backward scratch (D = dO . O per row)
 * Head sizes: multiples of 16 in [16, 256] whose blocks fit the shared memory (fmma_supports_dir:
 * training d 256 needs 136 KB: an A100 or Hopper); any T >= 1; SM 8.0+. Deterministic: no atomics.
 *
 * Status: not yet run on a GPU. The routines are checked on the CPU with PTX's fragment semantics
 * (test/test_mma_emul.cpp), and so is the trainer with every softmax layer on them
 * (-attn mma through test/host_cuda: test_gpt2cu against PyTorch). dev/cuda/attention_mma and
 * test_gpt2cu -attn mma check them on a GPU, step 8 times the trainer (dev/gpu_check.sh). The
 * trainer uses them only when asked (-attn mma); auto does not until they are measured.
 */
#ifndef LLMC_ATTENTION_FLASH_MMA_CUH
#define LLMC_ATTENTION_FLASH_MMA_CUH

#include "../cuda/cuda_common.cuh"

/* 1 if head size d can run on ctx's GPU (training: the backward too); else 0 with the reason. */
int attention_flash_mma_supports(int d, int training, const GpuCtx *ctx, char *why, size_t cap);

/* out, lse = causal attention of qkv; dies with one line when d cannot run (see _supports). */
void attention_flash_mma_forward(floatX *out, float *lse, const floatX *qkv, int B, int T, int h, int d,
                                 const GpuCtx *ctx);

/* dqkv = the gradient of the attention given dout; D scratch. Dies when d has no backward. */
void attention_flash_mma_backward(floatX *dqkv, float *D, const floatX *dout, const floatX *qkv, const floatX *out,
                                  const float *lse, int B, int T, int h, int d, const GpuCtx *ctx);

/* The same with the blocks' tiles (queries; dK/dV: keys) chosen: bq = 64, or 128 up to d =
 * FMMA_RW2_MAX_D (0: fmma_block_rows(d), what the calls above use); another bq dies with one line.
 * For dev/cuda/attention_mma, which times both. */
void attention_flash_mma_forward_bq(floatX *out, float *lse, const floatX *qkv, int B, int T, int h, int d, int bq,
                                    const GpuCtx *ctx);
void attention_flash_mma_backward_bq(floatX *dqkv, float *D, const floatX *dout, const floatX *qkv,
                                     const floatX *out, const float *lse, int B, int T, int h, int d, int bq,
                                     const GpuCtx *ctx);

#endif /* LLMC_ATTENTION_FLASH_MMA_CUH */
