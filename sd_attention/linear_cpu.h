/*
 * sd_attention/linear_cpu.h: the ELU+1 linear mixer on the CPU (Katharopoulos et al. 2020, arXiv
 * 2006.16236; doc/methods.md "ELU+1 causal linear attention"), the fp32 reference of the GPU's chunked scan
 * (sd_attention/linear_scan.h) and of train_gpt2.py.
 *
 * Defines:
 *   linear_attention_forward / _backward   causal linear attention in its exact O(T^2)
 *                       normalized form on a (B, T, 3A) qkv buffer
 *   LINEAR_MIXER_CPU    the stage (llmc/cpu/kind_cpu.h); mix_state holds phi(q), phi(k)
 *                       (B, T, 2A), then the normalizers Z (B, h, T)
 */
#ifndef SD_LINEAR_CPU_H
#define SD_LINEAR_CPU_H

#include <math.h>
#include <stddef.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../llmc/cpu/kind_cpu.h"
#include "stages.h"      /* its option */
#include "linear_scan.h" /* LIN_EPS, elu1f, elu1_gradf: the one definition the GPU uses too */

/* Causal ELU+1 linear attention, exact form:
 *   q~ = phi(c q), k~ = phi(c k), phi(x) = elu(x) + 1, c = d^(-1/4) with prescale else 1
 *   s_ts = q~_t . k~_s (s <= t),  Z_t = sum_s s_ts + eps,  a_ts = s_ts / Z_t,  o_t = sum_s a_ts v_s
 * This equals the prefix-sum form o_t = q~_t P_t / (q~_t . z_t + eps) (the PyTorch reference
 * computes that one; the GPU scan chunks it). a is stored in att like softmax probabilities, so
 * the same analysis tools read it; phi (B, T, 2A) keeps q~, k~ for the backward (phi' is 1 where
 * phi > 1 and phi itself elsewhere), Z (B, h, T) the normalizers. */
static inline void linear_attention_forward(float *out, float *att, float *phi, float *Z,
                                            const float *qkv, int B, int T, int h, int d,
                                            int prescale) {
    const int A = h * d, A3 = 3 * h * d;
    const float c = prescale ? powf((float)d, -0.25f) : 1.0f;
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        for (int i = 0; i < 2 * A; i++) phi[(size_t)bt * 2 * A + i] = elu1f(c * qkv[(size_t)bt * A3 + i]);
    }
#pragma omp parallel for collapse(3) schedule(static, 1)
    for (int b = 0; b < B; b++) {
        for (int k = 0; k < h; k++) {
            for (int t = 0; t < T; t++) {
                const float *q = phi + ((size_t)b * T + t) * 2 * A + (size_t)k * d;
                float *p = att + (((size_t)b * h + k) * T + t) * T;
                float z = LIN_EPS;
                for (int s = 0; s <= t; s++) {
                    const float *key = phi + ((size_t)b * T + s) * 2 * A + A + (size_t)k * d;
                    float dot = 0.0f;
                    for (int i = 0; i < d; i++) dot += q[i] * key[i];
                    p[s] = dot;
                    z += dot;
                }
                Z[((size_t)b * h + k) * T + t] = z;
                float *o = out + ((size_t)b * T + t) * A + (size_t)k * d;
                for (int i = 0; i < d; i++) o[i] = 0.0f;
                for (int s = 0; s <= t; s++) {
                    p[s] /= z;
                    const float *v = qkv + ((size_t)b * T + s) * A3 + 2 * A + (size_t)k * d;
                    for (int i = 0; i < d; i++) o[i] += p[s] * v[i];
                }
            }
        }
    }
}

/*
 * Backward of linear_attention_forward; dqkv (B, T, 3A) is overwritten. Per (b, head):
 *   da_ts = dO_t . v_s,  dv_s += a_ts dO_t,  ds_ts = (da_ts - sum_r a_tr da_tr) / Z_t
 *   dq~_t = sum_s ds_ts k~_s,  dk~_s += ds_ts q~_t,  then dq = c phi'(c q) dq~ (same for k).
 * Unlike softmax there is no factor a in ds: the division by Z takes its place.
 */
static inline void linear_attention_backward(float *dqkv, const float *dout, const float *qkv,
                                             const float *att, const float *phi, const float *Z,
                                             int B, int T, int h, int d, int prescale,
                                             float *scratch) {
    const int A = h * d, A3 = 3 * h * d;
    const float c = prescale ? powf((float)d, -0.25f) : 1.0f;
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) memset(dqkv + (size_t)bt * A3, 0, sizeof(float) * (size_t)A3);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int k = 0; k < h; k++) {
#ifdef _OPENMP
            float *da = scratch + (size_t)omp_get_thread_num() * T;
#else
            float *da = scratch;
#endif
            for (int t = 0; t < T; t++) {
                const float *p = att + (((size_t)b * h + k) * T + t) * T;
                const float *dor = dout + ((size_t)b * T + t) * A + (size_t)k * d;
                const float *qt = phi + ((size_t)b * T + t) * 2 * A + (size_t)k * d;
                float *dq = dqkv + ((size_t)b * T + t) * A3 + (size_t)k * d;
                const float zt = Z[((size_t)b * h + k) * T + t];
                float mean = 0.0f;
                for (int s = 0; s <= t; s++) {
                    const float *v = qkv + ((size_t)b * T + s) * A3 + 2 * A + (size_t)k * d;
                    float *dv = dqkv + ((size_t)b * T + s) * A3 + 2 * A + (size_t)k * d;
                    float dot = 0.0f;
                    for (int i = 0; i < d; i++) {
                        dot += dor[i] * v[i];
                        dv[i] += p[s] * dor[i];
                    }
                    da[s] = dot;
                    mean += p[s] * dot;
                }
                for (int s = 0; s <= t; s++) {
                    const float ds = (da[s] - mean) / zt;
                    const float *ks = phi + ((size_t)b * T + s) * 2 * A + A + (size_t)k * d;
                    float *dk = dqkv + ((size_t)b * T + s) * A3 + A + (size_t)k * d;
                    for (int i = 0; i < d; i++) {
                        dq[i] += ds * ks[i];
                        dk[i] += ds * qt[i];
                    }
                }
            }
        }
    }
    /* chain through phi and the prescale: phi'(x) = 1 for x > 0 (phi > 1), e^x = phi otherwise */
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        for (int i = 0; i < 2 * A; i++) dqkv[(size_t)bt * A3 + i] *= c * elu1_gradf(phi[(size_t)bt * 2 * A + i]);
    }
}

/* ----------------------------------------------------------------------------------------------
 * The stage. */
static inline void linear_mixer_forward(const CpuStageArgs *a) {
    const size_t N = (size_t)a->B * a->T;
    float *phi = a->mix_state, *Z = a->mix_state + N * 2 * (size_t)attn_width(a->ls);
    linear_attention_forward(a->atty, a->att, phi, Z, a->qkv, a->B, a->T, a->ls->n_head,
                             a->ls->head_size, lin_opt_prescale(a->c));
}

static inline void linear_mixer_backward(const CpuStageArgs *a) {
    const size_t N = (size_t)a->B * a->T;
    const float *phi = a->mix_state, *Z = a->mix_state + N * 2 * (size_t)attn_width(a->ls);
    linear_attention_backward(a->dqkv, a->datty, a->qkv, a->att, phi, Z, a->B, a->T, a->ls->n_head,
                              a->ls->head_size, lin_opt_prescale(a->c), a->row_scratch);
}

static const CpuStage LINEAR_MIXER_CPU = {linear_mixer_forward, linear_mixer_backward};

#endif /* SD_LINEAR_CPU_H */
