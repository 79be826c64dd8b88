/*
 * sd_attention/generator.h: the S-D generator, the one definition every path uses.
 *
 * S-D attention (Jamil and Kapadia, arXiv 2605.18826; doc/methods.md "Formulation A", "Formulation B") scores a pair of
 * tokens of one head by u_i L u_j^T / sqrt(d) with the d x d generator
 *
 *     L = S + sign D,   S = -S^T (routing),   D = diag(softplus(theta)) > 0 (filtering)
 *
 * sign = -1 is the paper's L = S - D (every eigenvalue has Re(lambda) <= 0, doc/methods.md "Stability");
 * +1 is the ablation S + D. Parameters of one head (doc/formats.md "Per-layer heads", slots sdskew, sdtheta):
 *   skew   d(d-1)/2 values, the strict upper triangle of S row by row: S_ij = s, S_ji = -s, i < j
 *   theta  d values, or one with scalar D (D = softplus(theta) I)
 *
 * Defines (LLMC_HD: the same source runs on the host, in CUDA kernels and in the CPU emulation):
 *   sd_softplus, sd_sigmoid    softplus(x) = log(1 + e^x) and its derivative (sd_softplus_d: the
 *                              same in double, for the surgery's inversions)
 *   sd_pack_count, sd_pack_index   size of the packed triangle; position of S_ij (i < j) in it
 *   sd_theta_index             which theta serves diagonal entry i of head k
 *   sd_generator_value         L_ij from the packed value of the pair and theta_i
 *   sd_build_generator         L of every head of a layer from fp32 parameters (the CPU model,
 *                              the spectrum and surgery tools; the GPU builds it element by
 *                              element in sd_attention/sd_fold.h from bf16 parameters)
 * train_gpt2.py's sd_generator is the PyTorch mirror; test/test_gpt2_cpu.sh compares the two models'
 * S-D layers (forward and every gradient).
 */
#ifndef SD_GENERATOR_H
#define SD_GENERATOR_H

#include <math.h>
#include <stddef.h>

#include "../llmc/scalar_math.h" /* LLMC_HD */

/* softplus(x) = log(1 + e^x), taken as x above 20 where e^x would lose the 1 anyway */
static inline LLMC_HD float sd_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
/* softplus' = sigmoid */
static inline LLMC_HD float sd_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
/* softplus in double: the surgery's inversions (sd_attention/surgery.h) work in double */
static inline double sd_softplus_d(double x) { return x > 20.0 ? x : log1p(exp(x)); }

/* Entries of the packed strict upper triangle of a d x d matrix. */
static inline LLMC_HD size_t sd_pack_count(int d) { return (size_t)d * (size_t)(d - 1) / 2; }

/* Position of S_ij (i < j): rows 0..i-1 hold sum_{r<i} (d - 1 - r) = i d - i (i + 1) / 2 entries. */
static inline LLMC_HD size_t sd_pack_index(int i, int j, int d) {
    return (size_t)i * (size_t)d - (size_t)i * (size_t)(i + 1) / 2 + (size_t)(j - i - 1);
}

/* Index into a layer's theta (h, d), or (h) with scalar D, of head k's diagonal entry i. */
static inline LLMC_HD size_t sd_theta_index(int k, int i, int d, int scalar_d) {
    return scalar_d ? (size_t)k : (size_t)k * (size_t)d + (size_t)i;
}

/* L_ij given s = the packed value of the pair (min(i,j), max(i,j)) and th = theta of entry i
 * (only one of the two is read): s above the diagonal, -s below, sign softplus(th) on it. */
static inline LLMC_HD float sd_generator_value(int i, int j, float s, float th, int sign) {
    if (i == j) return (float)sign * sd_softplus(th);
    return i < j ? s : -s;
}

/* Lmat (h, d, d), row-major per head: the generator of every head of one layer from skew
 * (h, d(d-1)/2) and theta (h, d) or (h). */
static inline void sd_build_generator(float *Lmat, const float *skew, const float *theta, int h,
                                      int d, int scalar_d, int sign) {
    const size_t npack = sd_pack_count(d);
    for (int k = 0; k < h; k++) {
        float *Lk = Lmat + (size_t)k * d * d;
        const float *sk = skew + (size_t)k * npack;
        for (int i = 0; i < d; i++) {
            for (int j = 0; j < d; j++) {
                const float s = i == j ? 0.0f : sk[i < j ? sd_pack_index(i, j, d) : sd_pack_index(j, i, d)];
                const float th = i == j ? theta[sd_theta_index(k, i, d, scalar_d)] : 0.0f;
                Lk[(size_t)i * d + j] = sd_generator_value(i, j, s, th, sign);
            }
        }
    }
}

#endif /* SD_GENERATOR_H */
