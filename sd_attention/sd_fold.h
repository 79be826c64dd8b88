/*
 * sd_attention/sd_fold.h: the device routines of the S-D fold (S-D attention, arXiv 2605.18826;
 * doc/methods.md "Realization with the standard attention kernels", doc/formats.md "The fold identity for custom bilinear scores"), written
 * once for the CUDA kernels (sd_attention/sd_fold.cu) and the CPU emulation test (test/test_sd_fold_emul.c).
 *
 * Per layer with h heads of size d (A = h d), the qkv buffer (N = B T rows, 3A columns) holds
 * U | K' | V, head k in columns [k d, (k+1) d) of each third. The method (sd_cpu.h, the reference):
 *   L_k = S_k + sign D_k, S from the packed strict upper triangle, D = diag(softplus(theta))
 *   forward   K' = U L^T             k'_a = sum_b u_b L_ab
 *   backward  dU = dQ + dK' L        du_a = dq_a + sum_b dk'_b L_ba
 *             dL = sum_n dK'^T U     (h, d, d), fp32
 *             ds_ij = dL_ij - dL_ji (i < j);  dtheta_i = sign dL_ii sigmoid(theta_i)
 *             (scalar D: dtheta = sign tr(dL) sigmoid(theta))
 *
 * Defines:
 *   sd_generator_element      L_k[i][j] from the bf16 parameters (one thread per element)
 *   SdRowmat, sd_rowmat_block  Y = X M^T or X M per head with fp32 M, bf16 X/Y, optional bf16
 *                             addend: one 64 x 64 output tile of one head per block, the inner
 *                             dimension in chunks of 32 through shared memory, fp32 accumulators
 *                             in shared memory (any thread count), summed in increasing b
 *   sd_params_backward_element  packed dS / dtheta from dL, accumulated into bf16 gradients
 *   sd_dl_gemm_desc     the cuBLAS strided-batched call that forms dL, as data, so that
 *                             the CPU test checks the operand mapping the device code passes
 * Every sum has a fixed order; nothing uses atomics.
 */
#ifndef LLMC_SD_FOLD_H
#define LLMC_SD_FOLD_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "../llmc/scalar_math.h"
#include "generator.h"

/* L_k[i][j] from the bf16 parameters: skew (h, d(d-1)/2) and theta (h, d) or (h) with scalar D
 * (sd_attention/generator.h). */
static inline LLMC_HD float sd_generator_element(const uint16_t *skew, const uint16_t *theta, int k,
                                                 int i, int j, int d, int scalar_d, int sign) {
    const uint16_t *sk = skew + (size_t)k * sd_pack_count(d);
    const float s = i == j ? 0.0f : bf16_to_f32(sk[i < j ? sd_pack_index(i, j, d) : sd_pack_index(j, i, d)]);
    const float th = i == j ? bf16_to_f32(theta[sd_theta_index(k, i, d, scalar_d)]) : 0.0f;
    return sd_generator_value(i, j, s, th, sign);
}

/* ----------------------------------------------------------------------------------------------
 * Per-head product with a d x d fp32 matrix. Row n, head k:
 *   transpose 0:  y_a = sum_b x_b M_k[a][b]   (K' = U L^T)
 *   transpose 1:  y_a = sum_b x_b M_k[b][a]   (dK' L)
 * then y_a += add_a when Add is given, rounded once to bf16. */
#define SD_TR 64 /* rows per tile */
#define SD_TA 64 /* output columns per tile */
#define SD_TB 32 /* inner chunk */
#define SD_THREADS 256

typedef struct {
    uint16_t *Y;
    size_t ldy;
    const uint16_t *X;
    size_t ldx;
    const uint16_t *Add; /* NULL: nothing added */
    size_t ldadd;
    const float *M; /* (h, d, d) */
    size_t N;
    int d, transpose;
} SdRowmat;

static inline LLMC_HD size_t sd_rowmat_smem_floats(void) {
    return (size_t)SD_TR * (SD_TB + 1) + (size_t)SD_TB * (SD_TA + 1) + (size_t)SD_TR * SD_TA;
}

/*
 * One tile: rows [rb SD_TR, +SD_TR), output columns [ab SD_TA, +SD_TA) of head k. Shared memory
 * (sd_rowmat_smem_floats): Xs (rows x inner chunk, padded), Ms (inner chunk x columns, padded),
 * acc (rows x columns). Phases per chunk: load Xs, Ms | accumulate into acc (each acc element is
 * owned by one thread for the whole routine) | next chunk overwrites Xs, Ms after a barrier.
 */
static inline LLMC_HD void sd_rowmat_block(const SdRowmat *p, size_t rb, int ab, int k, int tid,
                                           int nthreads, float *sm) {
    float *Xs = sm, *Ms = Xs + SD_TR * (SD_TB + 1), *acc = Ms + SD_TB * (SD_TA + 1);
    const int d = p->d;
    const size_t r0 = rb * SD_TR, col0 = (size_t)k * d;
    const int a0 = ab * SD_TA;
    const float *Mk = p->M + (size_t)k * d * d;
    for (int idx = tid; idx < SD_TR * SD_TA; idx += nthreads) acc[idx] = 0.0f;
    for (int b0 = 0; b0 < d; b0 += SD_TB) {
        LLMC_BLOCK_SYNC(); /* the previous chunk's readers are done with Xs, Ms */
        for (int idx = tid; idx < SD_TR * SD_TB; idx += nthreads) {
            const int r = idx / SD_TB, bb = idx % SD_TB;
            const size_t n = r0 + (size_t)r;
            const int b = b0 + bb;
            Xs[r * (SD_TB + 1) + bb] = (n < p->N && b < d) ? bf16_to_f32(p->X[n * p->ldx + col0 + b]) : 0.0f;
        }
        for (int idx = tid; idx < SD_TB * SD_TA; idx += nthreads) {
            const int bb = idx / SD_TA, aa = idx % SD_TA;
            const int a = a0 + aa, b = b0 + bb;
            float v = 0.0f;
            if (a < d && b < d) v = p->transpose ? Mk[(size_t)b * d + a] : Mk[(size_t)a * d + b];
            Ms[bb * (SD_TA + 1) + aa] = v;
        }
        LLMC_BLOCK_SYNC();
        for (int idx = tid; idx < SD_TR * SD_TA; idx += nthreads) {
            const int r = idx / SD_TA, aa = idx % SD_TA;
            float s = acc[idx];
            for (int bb = 0; bb < SD_TB; bb++) s += Xs[r * (SD_TB + 1) + bb] * Ms[bb * (SD_TA + 1) + aa];
            acc[idx] = s;
        }
    }
    /* each thread writes the acc elements it accumulated itself: no barrier needed */
    for (int idx = tid; idx < SD_TR * SD_TA; idx += nthreads) {
        const int r = idx / SD_TA, aa = idx % SD_TA;
        const size_t n = r0 + (size_t)r;
        const int a = a0 + aa;
        if (n >= p->N || a >= d) continue;
        float v = acc[idx];
        if (p->Add != NULL) v += bf16_to_f32(p->Add[n * p->ldadd + col0 + a]);
        p->Y[n * p->ldy + col0 + a] = f32_to_bf16(v);
    }
}

/* ----------------------------------------------------------------------------------------------
 * dL -> packed dS and dtheta for element (k, i, j) of (h, d, d); gradients are bf16 and
 * accumulate (gradient accumulation). With scalar D the trace is summed by element (k, 0, 0) in
 * increasing i, as the CPU does. */
static inline LLMC_HD void sd_params_backward_element(uint16_t *dskew, uint16_t *dtheta, const float *dL,
                                                      const uint16_t *theta, int k, int i, int j, int d,
                                                      int scalar_d, int sign) {
    const float *dLk = dL + (size_t)k * d * d;
    if (i < j) {
        uint16_t *g = dskew + (size_t)k * sd_pack_count(d) + sd_pack_index(i, j, d);
        const float ds = dLk[(size_t)i * d + j] - dLk[(size_t)j * d + i];
        *g = f32_to_bf16(bf16_to_f32(*g) + ds);
    } else if (i == j && !scalar_d) {
        uint16_t *g = dtheta + (size_t)k * d + i;
        const float th = bf16_to_f32(theta[(size_t)k * d + i]);
        *g = f32_to_bf16(bf16_to_f32(*g) + (float)sign * dLk[(size_t)i * d + i] * sd_sigmoid(th));
    } else if (i == 0 && j == 0) { /* scalar D */
        float trace = 0.0f;
        for (int r = 0; r < d; r++) trace += dLk[(size_t)r * d + r];
        const float th = bf16_to_f32(theta[k]);
        dtheta[k] = f32_to_bf16(bf16_to_f32(dtheta[k]) + (float)sign * trace * sd_sigmoid(th));
    }
}

/* ----------------------------------------------------------------------------------------------
 * The dL product as a cuBLAS strided-batched call (GemmDesc: llmc/scalar_math.h). */

/*
 * dL_k = sum_n dK'_n^T U_n (row-major d x d) for every head k at once. A row-major (N, 3A)
 * buffer is column-major (3A, N) with ld 3A, so head k's U is the column-major (d x N) block at
 * qkv + k d and its dK' the one at dqkv + A + k d. The column-major C (d x d, ld d) is dL^T:
 *   C[b][a] = dL[a][b] = sum_n U[n][b] dK'[n][a]  ->  C = U_cm (d x N) . dK'_cm^T (N x d)
 * so A = qkv (op N, lda 3A), B = dqkv + A (op T, ldb 3A), batch stride d for both, d^2 for C.
 */
static inline GemmDesc sd_dl_gemm_desc(size_t N, int h, int d) {
    GemmDesc g;
    g.transa = 0;
    g.transb = 1;
    g.m = d;
    g.n = d;
    g.k = (int)N;
    g.lda = 3LL * h * d;
    g.ldb = 3LL * h * d;
    g.ldc = d;
    g.strideA = d;
    g.strideB = d;
    g.strideC = (long long)d * d;
    g.batch = h;
    return g;
}

#endif /* LLMC_SD_FOLD_H */
