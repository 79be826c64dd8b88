/*
 * llmc/attention/flash.cuh: the project's tiled ("flash") causal attention on bf16 tensor cores
 * (llmc/attention/flash.cu; the algorithm and its block routines in llmc/attention/flash.h).
 *
 * The same interface as the cuDNN path (llmc/attention/cudnn.h), so a layer can use either with the
 * same buffers: nothing of size T x T is stored, only the logsumexp of each row.
 *   qkv   (B, T, 3A) bf16, A = h d: Q | K | V, head k at columns [k d, (k+1) d)
 *   out   (B, T, A) bf16 forward output; lse (B, h, T) fp32 (natural log of the scaled scores)
 *   dout  (B, T, A) bf16; dqkv (B, T, 3A) bf16, every element overwritten
 *   D     (B, h, T) fp32 backward scratch (D = dO . O per row)
 * Head sizes: multiples of 16 in [16, 256] whose tiles fit the GPU's shared memory
 * (flash_path_supports of llmc/attention/paths.h, which the path selection asks); any T >= 1. SM 8.0+ (bf16 WMMA). Deterministic: no atomics, each
 * output element is summed by one block in a fixed order.
 *
 * Status: the block routines are checked on the CPU (test/test_flash_emul.c) and the kernels on an
 * H200 (dev/cuda/attention_flash, test_gpt2cu -attn flash; dev/gpu_check.sh, doc/gpu.md "GPU
 * results"): correct, but slower than the materializing own kernels at every head size, so the
 * trainer uses them only when asked (-attn flash). llmc/attention/mma.h holds the register-tile kernels
 * meant to replace these.
 */
#ifndef LLMC_ATTENTION_FLASH_CUH
#define LLMC_ATTENTION_FLASH_CUH

#include "../cuda/cuda_common.cuh"
#include "flash.h" /* FlashArgs */

void attention_flash_forward(floatX *out, float *lse, const floatX *qkv, int B, int T, int h, int d,
                             const GpuCtx *ctx);

void attention_flash_backward(floatX *dqkv, float *D, const floatX *dout, const floatX *qkv, const floatX *out,
                              const float *lse, int B, int T, int h, int d, const GpuCtx *ctx);

/* D = dO . O per row into a->D (from a->out, a->dout): the first pass of this backward and of
 * the register-tile one (llmc/attention/mma.cu) */
void flash_delta(const FlashArgs *a, cudaStream_t stream);

#endif /* LLMC_ATTENTION_FLASH_CUH */
