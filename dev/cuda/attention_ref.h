/*
 * dev/cuda/attention_ref.h: the reference of dev/cuda/attention_check.cu. It is the project's CPU
 * attention (llmc/cpu/kernels.h attention_forward / _backward, doc/prism.md "Definition"), the fp32 model the
 * GPU trainer must match, run on the bf16 inputs the GPU sees, plus what the GPU paths also
 * produce: the logsumexp of each row (cuDNN's stats).
 *
 * Tolerances (bf16, metric of check_common.h): forward 2^-6: the output is rounded once (2^-9
 * relative) and, on the own path, the scores and P are stored in bf16 (2^-9 each, entering the
 * output through the softmax and the P v sum), 4x margin; backward 2^-5: dP and dS are bf16 too
 * and dq, dk sum T terms of them. The fp32 reference itself is within ~1e-6 of exact arithmetic.
 * Controls that must exceed the tolerance: the reference whose mask lets each query see one key
 * ahead (an off-by-one mask), and the heads grouped as 2h heads of d/2 (a wrong per-layer head
 * size).
 */
#ifndef DEV_CUDA_ATTENTION_REF_H
#define DEV_CUDA_ATTENTION_REF_H

#include "../../llmc/cpu/kernels.h"
#include "check_common.h"

#define TOL_FWD (1.0 / 64.0)
#define TOL_BWD (1.0 / 32.0)
/* the floor of the backward metric for a gradient that is zero in exact arithmetic (T = 1: dq and
 * dk vanish), so that rounding is not divided by zero */
#define TOL_BWD_FLOOR 1e-3

/* The worst backward error over the parts from .. to - 1 (0 dq, 1 dk, 2 dv) of dqkv (N, 3A, bf16)
 * against the reference (fp32, same layout); NaN anywhere is +inf. */
static inline double ref_worst_grad(const uint16_t *dqkv, const float *ref, size_t N, size_t A, int from, int to) {
    double e = 0.0;
    for (int w = from; w < to; w++)
        e = worst_err(e, rel_err_bf_floor(dqkv + w * A, 3 * A, ref + w * A, 3 * A, N, A, TOL_BWD_FLOOR));
    return e;
}

/* lse (B, h, T): log sum_j exp(s_tj) of row t's scaled logits, recovered from the probabilities
 * as s_tj - log P_tj at the row's largest P (>= 1 / (t + 1), so the log is well conditioned). */
static inline void ref_logsumexp(float *lse, const float *att, const float *qkv, int B, int T, int h, int d) {
    const size_t A = (size_t)h * d, A3 = 3 * A;
    const double scale = 1.0 / sqrt((double)d);
    for (int b = 0; b < B; b++)
        for (int k = 0; k < h; k++)
            for (int t = 0; t < T; t++) {
                const float *p = att + (((size_t)b * h + k) * T + t) * T;
                int j = 0;
                for (int s = 1; s <= t; s++) j = p[s] > p[j] ? s : j;
                const float *q = qkv + ((size_t)b * T + t) * A3 + (size_t)k * d;
                const float *key = qkv + ((size_t)b * T + j) * A3 + A + (size_t)k * d;
                double dot = 0.0;
                for (int i = 0; i < d; i++) dot += (double)q[i] * key[i];
                lse[((size_t)b * h + k) * T + t] = (float)(dot * scale - log((double)p[j]));
            }
}

/* The causal reference on qkv (B, T, 3, h, d): out (B, T, h, d); lse (B, h, T) when non-NULL;
 * with dout (B, T, h, d) non-NULL also dqkv (like qkv). */
static inline void ref_attention(float *out, float *lse, float *dqkv, const float *qkv, const float *dout, int B,
                                 int T, int h, int d) {
    float *att = (float *)xmalloc((size_t)B * h * T * T * sizeof(float));
    attention_forward(out, att, qkv, B, T, h, d);
    if (lse != NULL) ref_logsumexp(lse, att, qkv, B, T, h, d);
    if (dout != NULL) {
        float *scratch = (float *)xmalloc((size_t)omp_threads() * T * sizeof(float));
        attention_backward(dqkv, dout, qkv, att, B, T, h, d, scratch);
        free(scratch);
    }
    free(att);
}

/* The off-by-one control: row t attends to keys 0..t+1. The same causal kernel gives it once every
 * query is moved one row down (row t+1 then holds q_t and sees keys 0..t+1); the last row, which
 * has no key ahead, keeps the causal value ref_out. */
static inline void ref_attention_one_ahead(float *out, const float *ref_out, const float *qkv, int B, int T, int h,
                                           int d) {
    const size_t A = (size_t)h * d, A3 = 3 * A, N = (size_t)B * T;
    float *shifted = (float *)xmalloc(N * A3 * sizeof(float)), *o = (float *)xmalloc(N * A * sizeof(float));
    memcpy(shifted, qkv, N * A3 * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int t = 1; t < T; t++)
            memcpy(shifted + ((size_t)b * T + t) * A3, qkv + ((size_t)b * T + t - 1) * A3, A * sizeof(float));
    ref_attention(o, NULL, NULL, shifted, NULL, B, T, h, d);
    for (int b = 0; b < B; b++) {
        const size_t row0 = (size_t)b * T;
        memcpy(out + row0 * A, o + (row0 + 1) * A, (size_t)(T - 1) * A * sizeof(float));
        memcpy(out + (row0 + T - 1) * A, ref_out + (row0 + T - 1) * A, A * sizeof(float));
    }
    free(shifted);
    free(o);
}

#endif /* DEV_CUDA_ATTENTION_REF_H */
