/*
 * llmc/cuda/adamw.h: the GPU's AdamW update of one parameter and the stochastic rounding of the
 * fp32 master weights to bf16, written once (LLMC_HD) for the AdamW kernel (llmc/cuda/kernels.cu)
 * and the CPU tests (test/test_cuda_host.c, test/host_cuda).
 *
 * Defines: sr_hash, sr_bf16_bits, AdamWArgs, adamw_element
 */
#ifndef LLMC_ADAMW_H
#define LLMC_ADAMW_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../scalar_math.h" /* LLMC_HD */

/* ----------------------------------------------------------------------------------------------
 * Stochastic rounding fp32 -> bf16 for the updated weights (doc/formats.md "Optimization semantics": the master weights are
 * rounded with a per-tensor seed from the model RNG). The random bits depend on (seed, global
 * parameter index) only, so ZeRO-0 and ZeRO-1 round every parameter identically. */
static inline LLMC_HD uint32_t sr_hash(uint32_t seed, uint64_t index) {
    /* splitmix64 finalizer over (seed, index): every input bit reaches every output bit */
    uint64_t z = index + 0x9e3779b97f4a7c15ull * ((uint64_t)seed + 1ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (uint32_t)(z >> 32);
}

/* bf16 bits of x rounded down or up with probability proportional to the distance: add 16 random
 * bits below the bf16 mantissa and truncate. NaN/inf pass through unchanged. */
static inline LLMC_HD uint16_t sr_bf16_bits(float x, uint32_t rnd) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return (uint16_t)(u >> 16); /* inf / NaN */
    const uint32_t r = u + (rnd & 0xffffu);
    if ((r & 0x7f800000u) == 0x7f800000u) return (uint16_t)(u >> 16); /* would round to inf */
    return (uint16_t)(r >> 16);
}


/* ----------------------------------------------------------------------------------------------
 * AdamW (doc/formats.md "Optimization semantics"), one parameter, in the CPU model's expression order (gpt2_cpu.h
 * gpt2_update):
 *   g = s grad;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr (mhat / (sqrt(vhat) + eps) + wd p)
 * p is the fp32 master (or the bf16 parameter widened); returns the new bf16 parameter, p rounded
 * stochastically with bits from (seed, global index gi). The AdamW kernel (llmc/cuda/kernels.cu)
 * and test/host_cuda run this. */
typedef struct {
    float lr, beta1, beta2, eps, weight_decay, grad_scale;
    float bias_corr1, bias_corr2; /* 1 - beta^t */
    uint32_t seed;                /* stochastic rounding seed of this tensor */
} AdamWArgs;

static inline LLMC_HD uint16_t adamw_element(const AdamWArgs *a, float grad, float *m, float *v, float *p,
                                             uint64_t gi) {
    const float g = grad * a->grad_scale;
    *m = a->beta1 * *m + (1.0f - a->beta1) * g;
    *v = a->beta2 * *v + (1.0f - a->beta2) * g * g;
    const float mhat = *m / a->bias_corr1, vhat = *v / a->bias_corr2;
    *p -= a->lr * (mhat / (sqrtf(vhat) + a->eps) + a->weight_decay * *p);
    return sr_bf16_bits(*p, sr_hash(a->seed, gi));
}

#endif /* LLMC_ADAMW_H */
