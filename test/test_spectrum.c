/*
 * test/test_spectrum.c: sd_attention/spectrum.h on constructed heads with known spectra
 * (doc/methods.md "Routing/filtering split of a standard head", "Dynamically unstable heads", "Stability", "Formulation B", "Effective rank").
 *
 * Construction: a, b, c, e orthonormal in R^C (columns of a random orthogonal matrix, so nothing
 * is axis-aligned). A standard head with W_Q columns (a, b, c, e) and W_K columns
 * (w b, -w a, lam c, mu e) has M = W_Q W_K^T = w (a b^T - b a^T) + lam c c^T + mu e e^T: one
 * rotation plane plus a symmetric part. k planes with frequencies w_i likewise. An S-D head has
 * S = Q blockdiag(w_i [[0, 1], [-1, 0]]) Q^T with a random orthogonal Q (d x d).
 *
 * Tolerances: the head-level functions read fp32 weights (as in a checkpoint), so values that
 * are exact in real arithmetic (erank = PR = SR = 2) are checked to 1e-4 (the
 * required accuracy; observed errors are ~1e-6); double-level checks use 1e-9. Negative controls: a negative
 * filtering part is not flagged unstable, L with +D has alpha > 0, a second plane gives erank > 2.
 */
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sd_attention/spectrum.h"
#include "harness.h"
#include "../kinds/registry.h"

/* ----------------------------------------------------------------------------------------------
 * Deterministic random numbers (xorshift64* + Box-Muller) and random orthogonal matrices. */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static double urand(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return ((g_rng * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
}
static double nrand(void) {
    const double u = urand() + 1e-300, v = urand();
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

/* Q (n x n) orthogonal: the Q factor of a Gaussian matrix (dgeqrf + dorgqr). */
static void random_orthogonal(int n, double *Q) {
    double *tau = (double *)xmalloc(sizeof(double) * n);
    for (int i = 0; i < n * n; i++) Q[i] = nrand();
    if (LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, n, n, Q, n, tau) != 0 ||
        LAPACKE_dorgqr(LAPACK_ROW_MAJOR, n, n, n, Q, n, tau) != 0)
        llmc_die("test: QR of a random matrix failed");
    free(tau);
}

/* column j of the n x n row-major matrix Q */
static double colv(const double *Q, int n, int j, int i) { return Q[(size_t)i * n + j]; }

/* A standard head written into a float qkvw block (3 d rows of C, one head): the Q rows are the
 * transposes of W_Q's columns, the K rows those of W_K (doc/methods.md "Notation"). WQ, WK: C x d. */
static void to_qkvw(const double *WQ, const double *WK, int C, int d, float *qkvw) {
    memset(qkvw, 0, sizeof(float) * 3 * (size_t)d * C);
    for (int j = 0; j < d; j++) {
        for (int c = 0; c < C; c++) {
            qkvw[(size_t)j * C + c] = (float)WQ[(size_t)c * d + j];
            qkvw[(size_t)(d + j) * C + c] = (float)WK[(size_t)c * d + j];
        }
    }
}

/* One plane of frequency w plus the symmetric part lam c c^T + mu e e^T (d = 4). */
static void plane_head(int C, double w, double lam, double mu, double *WQ, double *WK) {
    double *Q = (double *)xmalloc(sizeof(double) * C * C);
    random_orthogonal(C, Q);
    const int d = 4;
    for (int i = 0; i < C; i++) {
        const double a = colv(Q, C, 0, i), b = colv(Q, C, 1, i), c = colv(Q, C, 2, i), e = colv(Q, C, 3, i);
        double q[4] = {a, b, c, e}, k[4] = {w * b, -w * a, lam * c, mu * e};
        for (int j = 0; j < d; j++) {
            WQ[(size_t)i * d + j] = q[j];
            WK[(size_t)i * d + j] = k[j];
        }
    }
    free(Q);
}

static HeadStats standard_head(const double *WQ, const double *WK, int C, int d) {
    float *qkvw = (float *)xmalloc(sizeof(float) * 3 * (size_t)d * C);
    to_qkvw(WQ, WK, C, d, qkvw);
    HeadStats hs;
    spec_head_standard(qkvw, C, 1, d, 0, 0, ATTN_MHA, SPEC_DEFAULT_EPS, &hs);
    free(qkvw);
    return hs;
}

/* An S-D head (h = 1) with S = Q blockdiag(w_i J) Q^T; theta given (d values, or 1 if scalar);
 * U random (C x d). */
static HeadStats sd_head(int C, int d, const double *w, int nplanes, const float *theta, int scalar_d,
                         int sign) {
    double *Q = (double *)xmalloc(sizeof(double) * d * d), *S = (double *)xcalloc((size_t)d * d, sizeof(double));
    random_orthogonal(d, Q);
    for (int p = 0; p < nplanes; p++)
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++)
                S[i * d + j] += w[p] * (colv(Q, d, 2 * p, i) * colv(Q, d, 2 * p + 1, j) -
                                        colv(Q, d, 2 * p + 1, i) * colv(Q, d, 2 * p, j));
    float *packed = (float *)xmalloc(sizeof(float) * (size_t)(d * (d - 1) / 2 + 1));
    size_t n = 0;
    for (int i = 0; i < d; i++)
        for (int j = i + 1; j < d; j++) packed[n++] = (float)S[i * d + j];
    float *qkvw = (float *)xmalloc(sizeof(float) * 2 * (size_t)d * C);
    for (int i = 0; i < 2 * d * C; i++) qkvw[i] = (float)nrand();
    HeadStats hs;
    spec_head_sd(qkvw, packed, theta, C, d, 0, 0, ATTN_SD, scalar_d, sign, SPEC_DEFAULT_EPS, &hs);
    free(Q); free(S); free(packed); free(qkvw);
    return hs;
}

/* Analytic metrics of k planes with frequencies w (doc/methods.md "Effective rank": each counts twice). */
static void analytic_planes(const double *w, int k, double *erank, double *pr, double *sr, int *n90) {
    double s = 0.0, s2 = 0.0, ent = 0.0, mx = 0.0;
    for (int i = 0; i < k; i++) { s += 2 * w[i]; s2 += 2 * w[i] * w[i]; mx = fmax(mx, w[i]); }
    for (int i = 0; i < k; i++) ent -= 2 * (w[i] / s) * log(w[i] / s);
    *erank = exp(ent);
    *pr = s * s / s2;
    *sr = s2 / (mx * mx);
    double cum = 0.0;
    for (int i = 0; i < k; i++) { /* w sorted descending */
        cum += 2 * w[i] * w[i];
        if (cum >= 0.9 * s2) { *n90 = i + 1; return; }
    }
    *n90 = k;
}

/* ---------------------------------------------------------------------------------------------- */
static void test_one_plane_standard(void) {
    const int C = 24, d = 4;
    double WQ[24 * 4], WK[24 * 4];
    plane_head(C, 1.7, 0.8, 0.3, WQ, WK); /* positive-definite filtering part on (c, e) */
    HeadStats hs = standard_head(WQ, WK, C, d);
    CHECK(fabs(hs.rank.erank - 2) < 1e-4 && fabs(hs.rank.pr - 2) < 1e-4 && fabs(hs.rank.sr - 2) < 1e-4,
          "standard head, one plane + symmetric part: erank %.7f, PR %.7f, SR %.7f == 2 (1e-4)",
          hs.rank.erank, hs.rank.pr, hs.rank.sr);
    CHECK(hs.rank.rank == 2 && hs.rank.n90 == 1 && hs.rank.rank90 == 2 && hs.capacity == 8,
          "one plane: numerical rank %d, n90 %d, rank90 %d; capacity min(2d, C) = %d",
          hs.rank.rank, hs.rank.n90, hs.rank.rank90, hs.capacity);
    const double r2 = 2 * 1.7 * 1.7, f2 = 0.8 * 0.8 + 0.3 * 0.3;
    CHECK(fabs(hs.rho_R - r2 / (r2 + f2)) < 1e-5 && fabs(hs.rho_R + hs.rho_F - 1) < 1e-12,
          "routing share %.6f == 2w^2/(2w^2 + lam^2 + mu^2) = %.6f; rho_R + rho_F = 1", hs.rho_R,
          r2 / (r2 + f2));
    CHECK(fabs(hs.norm_R - 1.7) < 1e-5 && fabs(hs.norm_F - 0.8) < 1e-5 &&
              fabs(hs.norm_ratio - 1.7 / 0.8) < 1e-5,
          "||R||_2 = w = %.6f, ||F||_2 = lam = %.6f, ratio %.6f", hs.norm_R, hs.norm_F, hs.norm_ratio);
    CHECK(hs.unstable && fabs(hs.alpha - 0.8) < 1e-5 && fabs(hs.radius - 1.7) < 1e-5 &&
              hs.f_positive && fabs(hs.lam_max_F - 0.8) < 1e-5,
          "positive-definite filtering: unstable, alpha = lam = %.6f, rho = w = %.6f, "
          "lambda_max(F) = %.6f (Bendixson: alpha <= lambda_max(F))", hs.alpha, hs.radius, hs.lam_max_F);

    /* negative control: a negative filtering part leaves alpha = Re(+-iw) = 0 (up to rounding,
     * below eps rho), so the same head path does not flag it */
    plane_head(C, 1.7, -0.8, -0.3, WQ, WK);
    const HeadStats n = standard_head(WQ, WK, C, d);
    CHECK(!n.unstable && !n.f_positive, "negative control: negative-definite filtering is neither unstable "
          "(alpha %.2e, rho %.3f) nor F-positive (lambda_max(F) %.1e)", n.alpha, n.radius, n.lam_max_F);
}

static void test_core_matches_explicit(void) {
    /* the QR core has the non-zero singular values of the explicit C x C R = (M - M^T)/2 */
    const int C = 20, d = 5;
    double WQ[20 * 5], WK[20 * 5], K[10 * 10], M[20 * 20], R[20 * 20], sv_core[10], sv_full[20];
    for (int i = 0; i < C * d; i++) { WQ[i] = nrand(); WK[i] = nrand(); }
    const int k = spec_core_standard(WQ, WK, C, d, K);
    for (int i = 0; i < C; i++)
        for (int j = 0; j < C; j++) {
            double s = 0.0;
            for (int t = 0; t < d; t++) s += WQ[i * d + t] * WK[j * d + t];
            M[i * C + j] = s;
        }
    for (int i = 0; i < C; i++)
        for (int j = 0; j < C; j++) R[i * C + j] = 0.5 * (M[i * C + j] - M[j * C + i]);
    double Rk[100];
    for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++) Rk[i * k + j] = 0.5 * (K[i * k + j] - K[j * k + i]);
    spec_singular_values(Rk, k, k, sv_core);
    spec_singular_values(R, C, C, sv_full);
    double err = 0.0;
    for (int i = 0; i < k; i++) err = worst_err(err, fabs(sv_core[i] - sv_full[i]) / sv_full[0]);
    CHECK(k == 2 * d && err < 1e-12 && sv_full[k] < 1e-12 * sv_full[0],
          "QR core (k = 2d = %d): singular values of R~JR~^T/2 == those of the explicit R (rel. "
          "err %.1e), the rest of R's are 0", k, err);
}

static void test_symmetric_and_skew(void) {
    const int C = 16, d = 4;
    double WQ[16 * 4], WK[16 * 4], G[16];
    for (int i = 0; i < C * d; i++) WQ[i] = nrand();
    for (int pass = 0; pass < 2; pass++) {
        /* W_K = W_Q G^T, so M = W_Q G W_Q^T: symmetric when G is, skew when G is */
        for (int i = 0; i < d; i++)
            for (int j = 0; j <= i; j++) {
                const double v = nrand();
                G[i * d + j] = v;
                G[j * d + i] = pass == 0 ? v : -v;
                if (pass == 1 && i == j) G[i * d + j] = 0.0;
            }
        for (int c = 0; c < C; c++)
            for (int i = 0; i < d; i++) {
                double s = 0.0;
                for (int j = 0; j < d; j++) s += WQ[c * d + j] * G[i * d + j];
                WK[c * d + i] = s;
            }
        double K[64];
        const int k = spec_core_standard(WQ, WK, C, d, K);
        SplitStats sp;
        spec_split_core(K, k, C, &sp);
        if (pass == 0) {
            CHECK(sp.rho_R < 1e-20 && fabs(sp.rho_F - 1) < 1e-12 && sp.rank.rank == 0 && sp.rank.erank == 0,
                  "symmetric M: routing share %.1e == 0, no routing planes (rank %d)", sp.rho_R, sp.rank.rank);
        } else {
            CHECK(fabs(sp.rho_R - 1) < 1e-12 && sp.rho_F < 1e-20 && sp.rank.rank == d,
                  "skew M: routing share %.15f == 1, rank %d == d", sp.rho_R, sp.rank.rank);
        }
    }
}

static void test_random_capacity(void) {
    const int cases[2][2] = {{64, 16}, {32, 32}}; /* 2d < C, and a wide (Prism) head with 2d > C */
    for (int t = 0; t < 2; t++) {
        const int C = cases[t][0], d = cases[t][1];
        double *WQ = (double *)xmalloc(sizeof(double) * C * d), *WK = (double *)xmalloc(sizeof(double) * C * d);
        for (int i = 0; i < C * d; i++) { WQ[i] = 0.02 * nrand(); WK[i] = 0.02 * nrand(); }
        HeadStats hs = standard_head(WQ, WK, C, d);
        CHECK(hs.rank.rank == hs.capacity && hs.capacity == (2 * d < C ? 2 * d : C) &&
                  hs.rank.erank > 0.5 * hs.capacity && hs.rank.erank < hs.capacity,
              "random full W_Q, W_K (C %d, d %d): rank %d reaches the capacity min(2d, C) = %d "
              "(erank %.2f)", C, d, hs.rank.rank, hs.capacity, hs.rank.erank);
        free(WQ);
        free(WK);
    }
}

static void test_k_planes(void) {
    const double w[4] = {3.0, 2.0, 1.0, 0.5};
    double er, pr, sr;
    int n90;
    analytic_planes(w, 4, &er, &pr, &sr, &n90);
    /* standard head of d = 2k: M = sum_i w_i (a_i b_i^T - b_i a_i^T), purely routing */
    const int C = 20, d = 8;
    double Q[400], WQ[160], WK[160];
    random_orthogonal(C, Q);
    for (int i = 0; i < C; i++)
        for (int p = 0; p < 4; p++) {
            WQ[i * d + 2 * p] = colv(Q, C, 2 * p, i);
            WQ[i * d + 2 * p + 1] = colv(Q, C, 2 * p + 1, i);
            WK[i * d + 2 * p] = w[p] * colv(Q, C, 2 * p + 1, i);
            WK[i * d + 2 * p + 1] = -w[p] * colv(Q, C, 2 * p, i);
        }
    HeadStats hs = standard_head(WQ, WK, C, d);
    CHECK(fabs(hs.rank.erank - er) < 1e-4 && fabs(hs.rank.pr - pr) < 1e-4 && fabs(hs.rank.sr - sr) < 1e-4 &&
              hs.rank.n90 == n90 && hs.rank.rank90 == 2 * n90,
          "standard head, planes w = 3, 2, 1, 0.5: erank %.5f (%.5f), PR %.5f (%.5f), SR %.5f (%.5f), "
          "n90 %d (%d)", hs.rank.erank, er, hs.rank.pr, pr, hs.rank.sr, sr, hs.rank.n90, n90);
    CHECK(fabs(hs.rho_R - 1) < 1e-6 && hs.rank.erank > 2.5, "the same head is pure routing (rho_R %.7f) "
          "and above 2 (negative control of the one-plane value)", hs.rho_R);
    float theta[12];
    for (int i = 0; i < 12; i++) theta[i] = (float)(0.5 * nrand());
    HeadStats sh = sd_head(8, 12, w, 4, theta, 0, -1);
    CHECK(fabs(sh.rank.erank - er) < 1e-4 && fabs(sh.rank.pr - pr) < 1e-4 && fabs(sh.rank.sr - sr) < 1e-4 &&
              sh.rank.n90 == n90 && sh.capacity == 12 && fabs(sh.norm_S - 3.0) < 1e-5,
          "S-D head (d 12), the same planes in S: erank %.5f, PR %.5f, SR %.5f, n90 %d, capacity d = "
          "%d, ||S||_2 = %.5f", sh.rank.erank, sh.rank.pr, sh.rank.sr, sh.rank.n90, sh.capacity, sh.norm_S);
}

static void test_sd_one_plane_and_stability(void) {
    const double w[1] = {0.9};
    float theta[8], scalar[1] = {0.3f};
    double dv[8];
    for (int i = 0; i < 8; i++) {
        theta[i] = (float)nrand();
        dv[i] = spec_softplus(theta[i]);
    }
    HeadStats hs = sd_head(32, 8, w, 1, theta, 0, -1);
    CHECK(fabs(hs.rank.erank - 2) < 1e-4 && fabs(hs.rank.pr - 2) < 1e-4 && fabs(hs.rank.sr - 2) < 1e-4 &&
              hs.rank.rank == 2 && hs.rank.n90 == 1,
          "S-D head, S one plane: erank %.7f, PR %.7f, SR %.7f == 2 (1e-4), rank %d",
          hs.rank.erank, hs.rank.pr, hs.rank.sr, hs.rank.rank);
    CHECK(hs.rank_x.rank == 2 && hs.rank_x.erank <= 2.0 + 1e-9 && spec_head_minimal(&hs),
          "S one plane: the x-space routing U S U^T has rank %d (2), erank %.6f <= 2; the head is at minimal rank",
          hs.rank_x.rank, hs.rank_x.erank);
    CHECK(hs.alpha < 0 && !hs.unstable, "L = S - D: alpha(L) = %.4f < 0 (doc/methods.md 'Stability'), not unstable",
          hs.alpha);
    CHECK(fabs(hs.d_spread - spec_cv(dv, 8)) < 1e-6 && hs.d_spread > 0.1,
          "vector D: spread = CV of softplus(theta) = %.4f", hs.d_spread);
    CHECK(hs.lam_max_F <= 1e-12 && !hs.f_positive && hs.rho_R > 0 && hs.rho_R < 1,
          "x-space split of U L U^T: filtering -U D U^T has lambda_max %.2e <= 0, rho_R %.4f",
          hs.lam_max_F, hs.rho_R);
    HeadStats plus = sd_head(32, 8, w, 1, theta, 0, +1);
    CHECK(plus.alpha > 0 && plus.unstable && plus.f_positive,
          "negative control: L = S + D has alpha %.4f > 0 and is flagged unstable", plus.alpha);
    HeadStats sc = sd_head(32, 8, w, 1, scalar, 1, -1);
    CHECK(sc.d_spread == 0.0 && fabs(sc.d_mean - spec_softplus(0.3)) < 1e-6 && sc.alpha < 0 &&
              fabs(sc.alpha + sc.d_mean) < 1e-5,
          "scalar D: spread 0, D = softplus(0.3) = %.5f, alpha(L) = -D = %.5f", sc.d_mean, sc.alpha);
}

/* Minimal rank (doc/methods.md "The spectral cascade"): a head below erank 2.5; a layer by its median head. */
static void test_minimal_rank(void) {
    HeadStats hs[3];
    const double er[3] = {2.0, 2.3, 6.0};
    for (int k = 0; k < 3; k++) {
        spec_head_init(&hs[k], 0, k, ATTN_SD, 8);
        hs[k].rank.rank = er[k] > 3 ? 8 : 2;
        hs[k].rank.erank = er[k];
        hs[k].rank_x.erank = 2 * er[k];
    }
    LayerSummary s;
    spec_layer_summary(hs, 3, &s);
    CHECK(fabs(s.frac_minimal - 2.0 / 3) < 1e-12 && s.minimal && fabs(s.x_erank_mean - 2 * 10.3 / 3) < 1e-12,
          "heads of erank 2, 2.3, 6: 2/3 at minimal rank (%.4f), the layer too (median 2.3), x-erank mean %.4f",
          s.frac_minimal, s.x_erank_mean);
    hs[1].rank.erank = 2.5;
    spec_layer_summary(hs, 3, &s);
    CHECK(fabs(s.frac_minimal - 1.0 / 3) < 1e-12 && !s.minimal,
          "erank 2.5 is not below 2.5: 1/3 of heads, and the layer (median 2.5) is not minimal");
    HeadStats zero;
    spec_head_init(&zero, 0, 0, ATTN_SD, 8);
    CHECK(!spec_head_minimal(&zero), "a zero routing (rank 0, erank 0) is not at minimal rank");
}

static void test_rank_stats_edges(void) {
    const double zero[3] = {0, 0, 0};
    RankStats z = spec_rank_stats(zero, 3, 0.0);
    CHECK(z.rank == 0 && z.erank == 0 && z.pr == 0 && z.sr == 0 && z.n90 == 0, "zero matrix: no planes");
    const double tiny[4] = {1.0, 1.0, 1e-8, 1e-8}; /* below 1e-6 sigma_1: not counted */
    RankStats t = spec_rank_stats(tiny, 4, 0.0);
    CHECK(t.rank == 2 && fabs(t.erank - 2) < 1e-12, "singular values below 1e-6 sigma_1 are dropped "
          "(doc/methods.md 'Effective rank'): rank %d", t.rank);
    HeadStats hs[4];
    memset(hs, 0, sizeof(hs));
    const double e[4] = {2.0, 10.0, 4.0, 3.0};
    for (int k = 0; k < 4; k++) { hs[k].rank.erank = e[k]; hs[k].d_spread = NAN; hs[k].unstable = k == 1; }
    LayerSummary s;
    spec_layer_summary(hs, 4, &s);
    CHECK(fabs(s.erank_mean - 4.75) < 1e-12 && fabs(s.erank_median - 3.5) < 1e-12 &&
              fabs(s.frac_unstable - 0.25) < 1e-12 && isnan(s.d_spread_mean),
          "layer summary: mean 4.75, median 3.5, unstable fraction 0.25, no D spread for standard heads");
}

/* n90 against erank (doc/methods.md "Effective rank": the erank of an Adam-trained S): a constant one-plane
 * gradient A = a b^T - b a^T (a, b random orthonormal) drives Adam's S towards -sign(A). sign(A)
 * is a skew matrix of full rank whose erank is 12.904 at d = 32 and 20.524 at d = 64, whatever
 * the orientation, while two planes hold 90% of its energy. Reference values: numpy on 200 random
 * orientations (spread below 1e-14). Also: n90 at a plane boundary, and the packed layout. */
static void sign_plane(int d, double *S) {
    double *Q = (double *)xmalloc(sizeof(double) * (size_t)d * d);
    random_orthogonal(d, Q);
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++) {
            const double a = colv(Q, d, 0, i) * colv(Q, d, 1, j) - colv(Q, d, 1, i) * colv(Q, d, 0, j);
            S[(size_t)i * d + j] = i == j ? 0.0 : (a > 0) - (a < 0);
        }
    free(Q);
}

static void test_sign_of_one_plane(void) {
    const int dims[2] = {32, 64};
    const double want[2] = {12.904449, 20.523538};
    for (int t = 0; t < 2; t++) {
        const int d = dims[t];
        double worst = 0.0;
        int n90_ok = 1;
        for (int draw = 0; draw < 3; draw++) {
            double *S = (double *)xmalloc(sizeof(double) * (size_t)d * d), *sv = (double *)xmalloc(sizeof(double) * d);
            sign_plane(d, S);
            spec_singular_values(S, d, d, sv);
            RankStats r = spec_rank_stats(sv, d, 0.0);
            worst = fmax(worst, fabs(r.erank - want[t]));
            n90_ok &= r.n90 == 2 && r.rank90 == 4 && r.rank == d;
            free(S); free(sv);
        }
        CHECK(worst < 1e-5 && n90_ok, "sign of one rotation plane, d = %d: erank %.6f (|err| %.1e over 3 "
              "orientations), full rank, n90 = 2 (rank90 4)", d, want[t], worst);
    }
    /* planes of energies 9, 1, 1, 1 (omega 3, 1, 1, 1): 90% of 12 = 10.8 needs three planes;
     * 8, 1, 1 (omega sqrt 8, 1, 1): 90% of 10 = 9 is reached exactly by two planes */
    const double a[8] = {3, 3, 1, 1, 1, 1, 1, 1}, b[6] = {sqrt(8.0), sqrt(8.0), 1, 1, 1, 1};
    RankStats ra = spec_rank_stats(a, 8, 0.0), rb = spec_rank_stats(b, 6, 0.0);
    CHECK(ra.n90 == 3 && rb.n90 == 2, "n90 counts planes: energies 9,1,1,1 -> %d (3); 8,1,1 -> %d "
          "(2: exactly 90%% is enough)", ra.n90, rb.n90);
}

/* spec_head_grad: G from packed values is ranked like S; cos(S, -G) is 1 for S = -c G, 0 for
 * orthogonal S, NaN for S = 0; a layer's gradient summary is NaN unless every head has G. */
static void test_head_grad(void) {
    const int d = 10;
    const double w[2] = {2.0, 1.0};
    double *Q = (double *)xmalloc(sizeof(double) * d * d), *G = (double *)xmalloc(sizeof(double) * d * d);
    random_orthogonal(d, Q);
    memset(G, 0, sizeof(double) * d * d);
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++)
                G[i * d + j] += w[p] * (colv(Q, d, 2 * p, i) * colv(Q, d, 2 * p + 1, j) -
                                        colv(Q, d, 2 * p + 1, i) * colv(Q, d, 2 * p, j));
    const int np = d * (d - 1) / 2;
    float *pg = (float *)xmalloc(sizeof(float) * np), *ps = (float *)xmalloc(sizeof(float) * np);
    float *pz = (float *)xcalloc((size_t)np, sizeof(float));
    for (int i = 0; i < d; i++)
        for (int j = i + 1; j < d; j++) {
            pg[sd_pack_index(i, j, d)] = (float)G[i * d + j];
            ps[sd_pack_index(i, j, d)] = (float)(-0.5 * G[i * d + j]);
        }
    double er, pr, sr;
    int n90;
    analytic_planes(w, 2, &er, &pr, &sr, &n90);
    HeadStats hs[2];
    spec_head_init(&hs[0], 0, 0, ATTN_SD, d);
    spec_head_grad(&hs[0], ps, pg, d);
    CHECK(hs[0].has_grad && fabs(hs[0].grad.erank - er) < 1e-5 && fabs(hs[0].grad.pr - pr) < 1e-5 &&
              hs[0].grad.n90 == n90 && hs[0].grad.rank == 4 && fabs(hs[0].grad_norm - sqrt(2 * 5.0)) < 1e-5 &&
              fabs(hs[0].grad_align - 1.0) < 1e-6,
          "gradient of two planes (2, 1): erank %.5f (%.5f), n90 %d (%d), ||G||_F %.5f (sqrt 10), "
          "cos(S, -G) = %.6f for S = -G/2", hs[0].grad.erank, er, hs[0].grad.n90, n90, hs[0].grad_norm,
          hs[0].grad_align);
    spec_head_init(&hs[1], 0, 1, ATTN_SD, d);
    spec_head_grad(&hs[1], pz, pg, d);
    CHECK(isnan(hs[1].grad_align) && hs[1].grad.n90 == n90, "S = 0: cos(S, -G) undefined (NaN), G still ranked");
    LayerSummary s;
    hs[1].grad_align = 0.5;
    spec_layer_summary(hs, 2, &s);
    CHECK(fabs(s.grad_erank_mean - er) < 1e-5 && fabs(s.grad_n90_median - n90) < 1e-12 &&
              fabs(s.grad_align_mean - 0.75) < 1e-6,
          "layer summary of G: mean erank %.5f, median n90 %.1f, mean cos %.3f", s.grad_erank_mean,
          s.grad_n90_median, s.grad_align_mean);
    spec_head_init(&hs[1], 0, 1, ATTN_SD, d);
    spec_layer_summary(hs, 2, &s);
    CHECK(isnan(s.grad_erank_mean) && isnan(s.grad_n90_mean) && isnan(s.grad_erank_median),
          "a head without G makes the layer's gradient summary NaN (null in the JSON)");
    free(Q); free(G); free(pg); free(ps); free(pz);
}

int main(void) {
    test_one_plane_standard();
    test_core_matches_explicit();
    test_symmetric_and_skew();
    test_random_capacity();
    test_k_planes();
    test_sd_one_plane_and_stability();
    test_rank_stats_edges();
    test_minimal_rank();
    test_sign_of_one_plane();
    test_head_grad();
    return test_finish();
}
