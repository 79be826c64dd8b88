/*
 * sd_attention/linear_scan.cuh: causal ELU+1 linear attention on the GPU (doc/methods.md "ELU+1 causal linear attention";
 * sd_attention/linear_scan.cu), for the layer kinds lin and sdlin.
 *
 * Same inputs and outputs as the softmax paths: qkv (B, T, 3A) bf16 (Q | K | V, or U | K' | V for
 * sdlin), out (B, T, A) bf16, dqkv (B, T, 3A) overwritten. Inside, fp32: q~ = phi(c q),
 * k~ = phi(c k) (c = d^-1/4 with prescale, else 1), the per-chunk state P (d x d), z (d), the
 * normalizers Z; chunks of 8-64 tokens (sd_attention/linear_scan.h lin_scan_choose); O(T d^2) work.
 * The backward recomputes o and Z in fp32 (one forward scan) and runs three scans (dq~ forward,
 * dk~ and dv reverse). Nothing is stored between forward and backward but the layer's qkv.
 *
 * scratch: lin_scratch_floats(B T, h, d) floats (sd_attention/linear_scan.h), shared by all layers.
 * Any T, any d whose block fits the GPU's shared memory (every d <= 256 on SM 8.0+; check with
 * linear_attention_supported). Deterministic: fixed per-thread order, no atomics.
 */
#ifndef LLMC_LINEAR_ATTENTION_CUH
#define LLMC_LINEAR_ATTENTION_CUH

#include "../llmc/cuda/cuda_common.cuh"

/* 1 if head size d can run on this GPU; else 0 with the reason. */
int linear_attention_supported(int d, const GpuCtx *ctx, char *why, size_t cap);

void linear_attention_forward(floatX *out, float *scratch, const floatX *qkv, int B, int T, int h, int d,
                              int prescale, const GpuCtx *ctx);

void linear_attention_backward(floatX *dqkv, float *scratch, const floatX *dout, const floatX *qkv, int B,
                               int T, int h, int d, int prescale, const GpuCtx *ctx);

#endif /* LLMC_LINEAR_ATTENTION_CUH */
