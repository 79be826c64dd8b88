/*
 * sd_attention/sd_cpu.h: the S-D projection on the CPU, the fp32 reference every other path
 * (PyTorch, CUDA) is checked against (Jamil and Kapadia, arXiv 2605.18826; doc/methods.md "Formulation A", "Realization with the standard attention kernels";
 * doc/formats.md "The fold identity for custom bilinear scores").
 *
 * The logit of S-D attention u_i L u_j^T / sqrt(d) equals u_i . (u_j L^T) / sqrt(d), so the
 * projection writes U into the Q columns and the fold K' = U L^T into the K columns of an ordinary
 * (B, T, 3A) buffer, and any mixer (softmax or linear) runs unchanged on it.
 *
 * Defines (N = B T rows):
 *   sd_keys_forward / _backward   K' = U L^T and its backward to dU, dL
 *   sd_params_backward            dL -> the packed dS and dtheta
 *   SD_PROJECTION_CPU             the stage (llmc/cpu/kind_cpu.h): the U | V GEMMs into the Q and
 *                                 V columns, the generator (generator.h), the fold; and back
 * Every output element is computed by one thread in a fixed order (bit-identical for any thread
 * count).
 */
#ifndef SD_CPU_H
#define SD_CPU_H

#include <stddef.h>
#include <string.h>

#include "../llmc/cpu/kernels.h"
#include "../llmc/cpu/kind_cpu.h"
#include "generator.h"
#include "stages.h" /* its options and slots */

/* qkv (B, T, 3A): reads U from [0, A), writes K' = U L^T into [A, 2A), head by head:
 * K'[t, a] = sum_b U[t, b] L[a, b]. */
static inline void sd_keys_forward(float *qkv, const float *Lmat, int N, int h, int d) {
    const int A = h * d, A3 = 3 * h * d;
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++) {
        for (int k = 0; k < h; k++) {
            const float *u = qkv + (size_t)n * A3 + (size_t)k * d;
            float *kp = qkv + (size_t)n * A3 + A + (size_t)k * d;
            const float *Lk = Lmat + (size_t)k * d * d;
            for (int a = 0; a < d; a++) {
                float s = 0.0f;
                for (int b = 0; b < d; b++) s += u[b] * Lk[(size_t)a * d + b];
                kp[a] = s;
            }
        }
    }
}

/*
 * Backward of the fold. dqkv (B, T, 3A) holds dQ in [0, A) and dK' in [A, 2A) from the attention
 * backward. Since Q = U and K' = U L^T:  dU = dQ + dK' L  (written over dQ),  dL = dK'^T U
 * (summed over all B*T rows; dLmat (h, d, d) is overwritten). One thread per head for dL, so the
 * sum order is fixed.
 */
static inline void sd_keys_backward(float *dqkv, float *dLmat, const float *qkv, const float *Lmat,
                                    int N, int h, int d) {
    const int A = h * d, A3 = 3 * h * d;
#pragma omp parallel for schedule(static)
    for (int k = 0; k < h; k++) {
        float *dLk = dLmat + (size_t)k * d * d;
        memset(dLk, 0, sizeof(float) * (size_t)d * d);
        for (int n = 0; n < N; n++) {
            const float *dkp = dqkv + (size_t)n * A3 + A + (size_t)k * d;
            const float *u = qkv + (size_t)n * A3 + (size_t)k * d;
            for (int a = 0; a < d; a++)
                for (int b = 0; b < d; b++) dLk[(size_t)a * d + b] += dkp[a] * u[b];
        }
    }
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++) {
        for (int k = 0; k < h; k++) {
            float *du = dqkv + (size_t)n * A3 + (size_t)k * d;
            const float *dkp = dqkv + (size_t)n * A3 + A + (size_t)k * d;
            const float *Lk = Lmat + (size_t)k * d * d;
            for (int a = 0; a < d; a++) {
                float s = 0.0f;
                for (int b = 0; b < d; b++) s += dkp[b] * Lk[(size_t)b * d + a];
                du[a] += s;
            }
        }
    }
}

/* dL -> parameters (accumulated): d s_ij = dL_ij - dL_ji (i < j);
 * d theta_i = sign * dL_ii * sigmoid(theta_i) (softplus' = sigmoid), summed over i for scalar D. */
static inline void sd_params_backward(float *dskew, float *dtheta, const float *dLmat,
                                      const float *theta, int h, int d, int scalar_d, int sign) {
    const size_t npack = sd_pack_count(d);
    for (int k = 0; k < h; k++) {
        const float *dLk = dLmat + (size_t)k * d * d;
        float *ds = dskew + (size_t)k * npack;
        size_t p = 0;
        float trace = 0.0f;
        for (int i = 0; i < d; i++) {
            for (int j = i + 1; j < d; j++, p++) ds[p] += dLk[(size_t)i * d + j] - dLk[(size_t)j * d + i];
            if (scalar_d) trace += dLk[(size_t)i * d + i];
            else dtheta[(size_t)k * d + i] += (float)sign * dLk[(size_t)i * d + i] * sd_sigmoid(theta[(size_t)k * d + i]);
        }
        if (scalar_d) dtheta[k] += (float)sign * trace * sd_sigmoid(theta[k]);
    }
}

/* ----------------------------------------------------------------------------------------------
 * The stage. qkvw holds the U rows then the V rows: U goes to the Q columns, V to the V columns,
 * K' = U L^T between them. proj_state holds L, proj_scratch dL. */
static inline void sd_projection_forward(const CpuStageArgs *a) {
    const GPT2Config *c = a->c;
    const int N = a->B * a->T, C = c->channels, h = a->ls->n_head, d = a->ls->head_size, A = h * d;
    matmul_forward(a->qkv, a->x, a->p->qkvw, a->p->qkvb, N, C, A, 3 * A, a->wt_scratch);
    matmul_forward(a->qkv + 2 * A, a->x, a->p->qkvw + (size_t)A * C, a->p->qkvb + A, N, C, A, 3 * A,
                   a->wt_scratch);
    sd_build_generator(a->proj_state, a->p->slot[P_SDSKEW], a->p->slot[P_SDTHETA], h, d, sd_opt_scalar_d(c), sd_opt_sign(c));
    sd_keys_forward(a->qkv, a->proj_state, N, h, d);
}

/* dqkv from the mixer holds dQ | dK' | dV; dU is written over dQ. */
static inline void sd_projection_backward(const CpuStageArgs *a) {
    const GPT2Config *c = a->c;
    const int N = a->B * a->T, C = c->channels, h = a->ls->n_head, d = a->ls->head_size, A = h * d;
    const LayerParams *p = a->p, *dp = a->dp;
    sd_keys_backward(a->dqkv, a->proj_scratch, a->qkv, a->proj_state, N, h, d);
    sd_params_backward(dp->slot[P_SDSKEW], dp->slot[P_SDTHETA], a->proj_scratch, p->slot[P_SDTHETA], h, d, sd_opt_scalar_d(c),
                       sd_opt_sign(c));
    matmul_backward(a->dx, dp->qkvw, dp->qkvb, a->dqkv, a->x, p->qkvw, N, C, A, 3 * A);
    matmul_backward_acc(a->dx, dp->qkvw + (size_t)A * C, dp->qkvb + A, a->dqkv + 2 * A, a->x,
                        p->qkvw + (size_t)A * C, N, C, A, 3 * A);
}

static const CpuStage SD_PROJECTION_CPU = {sd_projection_forward, sd_projection_backward};

#endif /* SD_CPU_H */
