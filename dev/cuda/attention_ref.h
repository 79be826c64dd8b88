/*
 * dev/cuda/attention_ref.h: what the standalone GPU checks share (attention_check.cu, sd_fold_check.cu,
 * linear_attention_check.cu): random bf16 inputs, the fp32 CPU reference of causal attention forward and
 * backward on the (B, T, 3, h, d) layout, error metrics, poisoning, timing, the case list.
 *
 * Reference (METHODS.md 2.2): logits s_tj = q_t . k_j / sqrt(d) for j <= t, P = softmax, o = P v;
 * backward dP = dO v^T, dS = P (dP - rowsum(P dP)), dq = dS k / sqrt(d), dk = dS^T q / sqrt(d),
 * dv = P^T dO; computed in fp32 (double accumulations) from the same bf16 inputs the GPU sees.
 *
 * Error metric: max |gpu - ref| / max |ref| per tensor. Tolerances (bf16): forward 2^-6: the
 * output is rounded once (2^-9 relative) and, on the own path, the scores and P are stored in
 * bf16 (2^-9 each, entering the output through the softmax and the P v sum), 4x margin; backward
 * 2^-5: dP and dS are bf16 too and dq, dk sum T terms of them. Controls that must exceed the
 * tolerance: the reference without the causal mask, and with the heads grouped as 2h heads of
 * d/2 (a wrong per-layer head size).
 */
#ifndef DEV_CUDA_ATTENTION_REF_H
#define DEV_CUDA_ATTENTION_REF_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_FWD (1.0 / 64.0)
#define TOL_BWD (1.0 / 32.0)

static const int HEAD_SIZES[] = {8, 16, 32, 64, 128, 256, 12, 20};
#define N_HEAD_SIZES 8

static inline void dev_check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "error: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

static inline uint16_t host_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline float host_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* xorshift: reproducible inputs, uniform in [-1, 1) */
static inline float rand_unit(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((*s >> 40) / 8388608.0 - 1.0);
}

static inline void fill_random_bf16(uint16_t *x, size_t n, uint64_t seed) {
    uint64_t s = seed * 2654435761ull + 1;
    for (size_t i = 0; i < n; i++) x[i] = host_bf16(rand_unit(&s));
}

/* Forward and backward reference. qkv (B, T, 3, h, d), dout/out (B, T, h, d), dqkv like qkv,
 * lse (B, h, T) the logsumexp of each scaled row (cuDNN's stats); lse and dqkv may be NULL.
 * causal = 0 gives the unmasked control; the head grouping (h, d) is a parameter, so the
 * regrouped control is the same call with (2h, d/2). */
static inline void ref_attention(float *out, float *lse, float *dqkv, const float *qkv, const float *dout, int B,
                          int T, int h, int d, int causal, float scale) {
    const size_t A = (size_t)h * d, A3 = 3 * A;
    double *p = (double *)malloc((size_t)T * sizeof(double)), *dp = (double *)malloc((size_t)T * sizeof(double));
    if (dqkv) memset(dqkv, 0, (size_t)B * T * A3 * sizeof(float));
    for (int b = 0; b < B; b++) {
        for (int k = 0; k < h; k++) {
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * A3 + (size_t)k * d;
                const int last = causal ? t : T - 1;
                double mx = -INFINITY;
                for (int j = 0; j <= last; j++) {
                    const float *key = qkv + ((size_t)b * T + j) * A3 + A + (size_t)k * d;
                    double s = 0.0;
                    for (int i = 0; i < d; i++) s += (double)q[i] * key[i];
                    p[j] = s * scale;
                    mx = p[j] > mx ? p[j] : mx;
                }
                double sum = 0.0;
                for (int j = 0; j <= last; j++) {
                    p[j] = exp(p[j] - mx);
                    sum += p[j];
                }
                for (int j = 0; j <= last; j++) p[j] /= sum;
                if (lse) lse[((size_t)b * h + k) * T + t] = (float)(mx + log(sum));
                float *o = out + ((size_t)b * T + t) * A + (size_t)k * d;
                for (int i = 0; i < d; i++) {
                    double acc = 0.0;
                    for (int j = 0; j <= last; j++) acc += p[j] * qkv[((size_t)b * T + j) * A3 + 2 * A + (size_t)k * d + i];
                    o[i] = (float)acc;
                }
                if (dqkv == NULL) continue;
                const float *g = dout + ((size_t)b * T + t) * A + (size_t)k * d;
                double pdp = 0.0;
                for (int j = 0; j <= last; j++) {
                    const float *v = qkv + ((size_t)b * T + j) * A3 + 2 * A + (size_t)k * d;
                    double s = 0.0;
                    for (int i = 0; i < d; i++) s += (double)g[i] * v[i];
                    dp[j] = s;
                    pdp += p[j] * s;
                }
                float *dq = dqkv + ((size_t)b * T + t) * A3 + (size_t)k * d;
                for (int j = 0; j <= last; j++) {
                    const double ds = p[j] * (dp[j] - pdp) * scale;
                    const float *key = qkv + ((size_t)b * T + j) * A3 + A + (size_t)k * d;
                    float *dk = dqkv + ((size_t)b * T + j) * A3 + A + (size_t)k * d;
                    float *dv = dqkv + ((size_t)b * T + j) * A3 + 2 * A + (size_t)k * d;
                    for (int i = 0; i < d; i++) {
                        dq[i] += (float)(ds * key[i]);
                        dk[i] += (float)(ds * q[i]);
                        dv[i] += (float)(p[j] * g[i]);
                    }
                }
            }
        }
    }
    free(p);
    free(dp);
}

/* max |a - b| / max |b| over n values; NaN anywhere in a (an unwritten poisoned value) gives +inf */
static inline double rel_error(const uint16_t *a_bf16, const float *b, size_t n) {
    double e = 0.0, m = 0.0;
    for (size_t i = 0; i < n; i++) {
        const float a = host_f32(a_bf16[i]);
        if (a != a) return INFINITY;
        e = fmax(e, fabs((double)a - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? e / m : e;
}

static inline double rel_error_f(const float *a, const float *b, size_t n) {
    double e = 0.0, m = 0.0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? e / m : e;
}

static inline size_t count_nan_bf16(const uint16_t *x, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += (x[i] & 0x7f80u) == 0x7f80u && (x[i] & 0x7fu) != 0;
    return c;
}

/* 0xffff is a bf16 NaN: whatever a kernel fails to write stays NaN and is counted */
/* cudaMemset runs on the legacy stream, which the kernels' non-blocking stream does not wait for
 * (nor for the DMA of a preceding pageable cudaMemcpy): wait for the device before the call. */
static inline void poison(void *dev, size_t bytes) {
    dev_check(cudaMemset(dev, 0xff, bytes), "cudaMemset (poison)");
    dev_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (poison)");
}

typedef struct {
    int passed, failed;
} Tally;

static inline void report(Tally *t, int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (ok) t->passed++; else t->failed++;
}

#endif /* DEV_CUDA_ATTENTION_REF_H */
