/*
 * llmc/cuda/kernels.cuh: launchers of the trainer's memory-bound CUDA kernels (llmc/cuda/kernels.cu).
 *
 * Every launcher takes the stream it runs on; every index is 64-bit (size_t) because products of
 * B, T, C and h pass 2^31 in real runs (doc/formats.md "Upstream weak spots" #2). Every reduction sums in a fixed order
 * without atomics, so a step is bit-identical from run to run (bit-exact resume relies on it).
 * Shapes: N = B*T token rows, row-major; C % 8 == 0 (the trainer checks it at start-up).
 *
 *   encoder_forward / encoder_backward     wte + wpe; the wte gradient summed per token from the
 *                                          host-built buckets (llmc/cuda/encoder_buckets.h encoder_buckets)
 *   layernorm_forward / fused_residual_layernorm_forward / layernorm_apply (recompute)
 *   layernorm_backward                     dinp += ..., dw += ..., db += ... (deterministic)
 *   gelu_forward / gelu_backward_inplace   tanh approximation, as the CPU model
 *   residual_forward / residual_accumulate out = a + b; d += x (the blocks of -ln 0, where no
 *                                          LayerNorm kernel does the residual add)
 *   add_bias                               out += bias per row (matmul_forward's unfused fallback)
 *   bias_backward                          db += column sums of dout, for any width: it always
 *                                          accumulates (llm.c overwrote it on wide layers,
 *                                          doc/formats.md "Upstream weak spots" #1)
 *   fused_classifier                       softmax + loss (+ dlogits in place) from bf16 logits
 *   adamw_update                           AdamW with fp32 masters and stochastic rounding
 *   norm_squared_partial / sum_partials    the global gradient norm, fixed-order reduction
 *   cast_f32_to_bf16 / cast_bf16_to_f32
 */
#ifndef LLMC_GPU_KERNELS_CUH
#define LLMC_GPU_KERNELS_CUH

#include "cuda_common.cuh"
#include "encoder_buckets.h"
#include "adamw.h"

/* scale: the model's input scale F (-emb_scale), out = F (wte[token] + wpe[t]) */
void encoder_forward(floatX *out, const int *tokens, const floatX *wte, const floatX *wpe, int B,
                     int T, int C, float scale, cudaStream_t stream);
/* uniq/start/pos: device copies of encoder_buckets' output for this micro-batch (U tokens); the
 * gradients are F times the sums of dout. */
void encoder_backward(floatX *dwte, floatX *dwpe, const floatX *dout, const int *uniq,
                      const int *start, const int *pos, int U, int B, int T, int C, float scale,
                      cudaStream_t stream);

void layernorm_forward(floatX *out, float *mean, float *rstd, const floatX *inp, const floatX *w,
                       const floatX *b, size_t N, int C, cudaStream_t stream);
/* residual = a + b (rounded to bf16), then out = LN(residual). */
void fused_residual_layernorm_forward(floatX *residual, floatX *out, float *mean, float *rstd,
                                      const floatX *a, const floatX *b, const floatX *w,
                                      const floatX *bias, size_t N, int C, cudaStream_t stream);
/* out = LN(inp) from saved mean/rstd: the -r 2 recompute, same formula as the forward. */
void layernorm_apply(floatX *out, const floatX *inp, const float *mean, const float *rstd,
                     const floatX *w, const floatX *b, size_t N, int C, cudaStream_t stream);
/* Floats of scratch layernorm_backward and bias_backward need for N rows and `width` columns. */
size_t colsum_scratch_floats(size_t N, int width);
void layernorm_backward(floatX *dinp, floatX *dw, floatX *db, float *scratch, const floatX *dout,
                        const floatX *inp, const floatX *w, const float *mean, const float *rstd,
                        size_t N, int C, cudaStream_t stream);

void gelu_forward(floatX *out, const floatX *inp, size_t n, cudaStream_t stream);
/* out = a + b and d += x over n elements (n % 8 == 0), each rounded once to bf16. */
void residual_forward(floatX *out, const floatX *a, const floatX *b, size_t n, cudaStream_t stream);
void residual_accumulate(floatX *d, const floatX *x, size_t n, cudaStream_t stream);
/* out (N, OC) += bias (broadcast over rows); any alignment (the unfused bias of matmul_forward) */
void add_bias(floatX *out, const floatX *bias, size_t N, int OC, cudaStream_t stream);
/* d <- d * gelu'(inp) */
void gelu_backward_inplace(floatX *d, const floatX *inp, size_t n, cudaStream_t stream);

/* db (OC) += sum over the N rows of dout (N, OC). */
void bias_backward(floatX *db, const floatX *dout, float *scratch, size_t N, int OC,
                   cudaStream_t stream);

/*
 * logits (N, Vp) bf16. losses_acc[n] += logsumexp(row) - logit[target] over the V real columns;
 * a target of -1 marks a position that is not scored (evaluation batches): nothing is added.
 * With write_dlogits: row <- dloss * (softmax - onehot(target)) in place, 0 on the Vp - V padding.
 */
void fused_classifier(floatX *logits, float *losses_acc, const int *targets, float dloss, size_t N,
                      int V, int Vp, bool write_dlogits, cudaStream_t stream);

/* One AdamW call over `count` elements (AdamWArgs, adamw_element: llmc/cuda/adamw.h): params/grads
 * at global_off (parameter buffer), m/v/master at shard_off (this rank's optimizer buffers). */
void adamw_update(floatX *params, float *master, const floatX *grads, float *m, float *v,
                  size_t global_off, size_t shard_off, size_t count, const AdamWArgs *a,
                  cudaStream_t stream);

#define NORM_BLOCKS 256
/* partials[0 .. NORM_BLOCKS) <- per-block sums of g^2 over n elements. */
void norm_squared_partial(float *partials, const floatX *g, size_t n, cudaStream_t stream);
/* out[0] <- sum of count floats, fixed order; accumulate: out[0] += instead of = */
void sum_partials(float *out, const float *partials, size_t count, bool accumulate, cudaStream_t stream);

void cast_f32_to_bf16(floatX *dst, const float *src, size_t n, cudaStream_t stream);
void cast_bf16_to_f32(float *dst, const floatX *src, size_t n, cudaStream_t stream);

#endif /* LLMC_GPU_KERNELS_CUH */
