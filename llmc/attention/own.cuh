/*
 * llmc/attention/own.cuh: the project's own causal attention for one layer (llmc/attention/own.cu).
 *
 * Serves any head size d and any sequence length T (no T % 4 assumption; doc/formats.md "Upstream weak spots" #3), with
 * cuBLAS strided-batched GEMMs for Q K^T, P V and their gradients, and a causal softmax that
 * materializes P = softmax(Q K^T / sqrt(d)) as (B, h, T, T) bf16 for the backward.
 *
 * Buffers (elements, bf16):
 *   qkv     (B, T, 3A), A = h d: Q | K | V, head k at columns [k d, (k+1) d) of each
 *   att     (B, h, T, T) this layer's probabilities (row t: keys 0..t, zeros after)
 *   scratch 7 B T A: q, k, v, o|dO, dq, dk, dv in (B, h, T, d)
 *   datt    (B, h, T, T) backward scratch
 *   out     (B, T, A) heads concatenated; dqkv (B, T, 3A)
 * Indices are 64-bit: B h T T passes 2^31 for B 64, h 48, T 1024.
 */
#ifndef LLMC_ATTENTION_OWN_CUH
#define LLMC_ATTENTION_OWN_CUH

#include "../cuda/cuda_common.cuh"

void attention_own_forward(floatX *out, floatX *att, floatX *scratch, const floatX *qkv, int B,
                           int T, int h, int d, const GpuCtx *ctx);

void attention_own_backward(floatX *dqkv, floatX *datt, floatX *scratch, const floatX *dout,
                            const floatX *qkv, const floatX *att, int B, int T, int h, int d,
                            const GpuCtx *ctx);

#endif /* LLMC_ATTENTION_OWN_CUH */
