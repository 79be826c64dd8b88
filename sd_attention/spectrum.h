/*
 * sd_attention/spectrum.h: spectral diagnostics of attention heads, as pure functions (no I/O,
 * no globals): the routing/filtering analysis of Jamil and Kapadia, arXiv 2605.18826
 * (doc/methods.md "S–D attention"). Every eigen- and singular value comes from LAPACK (LAPACKE, double precision).
 *
 * Defines:
 *   RankStats / spec_rank_stats    effective ranks of a routing matrix from its singular values:
 *                                  Roy-Vetterli erank, participation ratio, stable rank, planes
 *                                  at 90% energy (doc/methods.md "Effective rank")
 *   SplitStats / spec_split_core   routing/filtering split of a head kernel M = Q K Q^T given its
 *                                  small core K (doc/methods.md "Routing/filtering split of a standard head"): energy shares, spectral norms,
 *                                  lambda_max(F) (the Bendixson bound, doc/methods.md "Dynamically unstable heads"), rank of R
 *   spec_core_standard             the core of M = W_Q W_K^T from the thin QR of [W_Q W_K]
 *   spec_core_sd                   the core of M = U L U^T from the thin QR of U
 *   AbscissaStats / spec_abscissa  spectral abscissa alpha = max Re(lambda), spectral radius,
 *                                  alpha/rho of a square matrix (doc/methods.md "Dynamically unstable heads")
 *   spec_skew_unpack / spec_generator   S and L = S + sign*D of an S-D head from its packed
 *                                  parameters, L built by generator.h as the model builds it
 *   HeadStats / spec_head_standard / spec_head_sd   every metric of one head of a checkpoint
 *   spec_head_grad                 ranks of the mean gradient of an S-D head's S (sd_spectrum
 *                                  -grad_batches; doc/methods.md "Effective rank")
 *   spec_head_minimal              a head whose routing is at minimal rank: one rotation plane
 *   LayerSummary / spec_layer_summary   means and medians over a layer's heads
 *
 * Conventions. Matrices are row-major double. A head's kernel is M = W_Q W_K^T (C x C) for a
 * standard head (mha, lin), with W_Q^h the transpose of rows [h d, (h+1) d) of the layer's Q block
 * (doc/methods.md "Notation"), and M = U L U^T for an S-D head (sd, sdlin; doc/methods.md "Formulation A"). The 1/sqrt(d) logit scale is
 * not folded in: shares, ranks and alpha/rho do not depend on it; the norms are those of M itself.
 * Biases are ignored (doc/methods.md "Routing/filtering split of a standard head": beyond M they only add a key-only linear term).
 */
#ifndef SD_ATTENTION_SPECTRUM_H
#define SD_ATTENTION_SPECTRUM_H

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../llmc/config.h"
#include "../llmc/utils.h"
#include "generator.h"

/* doc/methods.md "Effective rank": singular values below 1e-6 sigma_1 are not counted. */
#define SPEC_SV_REL_TOL 1e-6
/* A routing part whose norm is below 1e-12 of the whole kernel's is round-off of an exactly
 * symmetric M (the core is computed in double from fp32 weights): it has no planes at all. */
#define SPEC_ZERO_REL 1e-12
/* Eigenvalues below 1e-10 rho are the zero eigenvalues of a rank-deficient generator: alpha is
 * taken over the non-zero spectrum (doc/methods.md "Dynamically unstable heads", small-matrix trick). */
#define SPEC_EIG_ZERO_REL 1e-10
/* n90: the fraction of the routing energy the kept planes must hold (doc/methods.md "Effective rank"). */
#define SPEC_ENERGY_FRACTION 0.9
/* default epsilon of the unstable-head criterion alpha > eps * rho (doc/methods.md "Dynamically unstable heads") */
#define SPEC_DEFAULT_EPS 1e-6
/* Minimal routing rank (doc/methods.md "The spectral cascade"): a skew matrix's singular values come in pairs, so
 * its smallest non-zero erank is 2 (one rotation plane) and the next is about 4. A head whose
 * routing erank is below 2.5 is at minimal rank; a layer whose median head is. */
#define SPEC_MINIMAL_ERANK 2.5

/* ----------------------------------------------------------------------------------------------
 * LAPACK wrappers: copy the input (LAPACK overwrites it), die with one line on failure. */

/* The min(m, n) singular values of the m x n matrix a, descending (dgesdd, values only). */
static inline void spec_singular_values(const double *a, int m, int n, double *sv) {
    double *w = (double *)xmalloc(sizeof(double) * (size_t)m * n);
    memcpy(w, a, sizeof(double) * (size_t)m * n);
    lapack_int info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'N', m, n, w, n, sv, NULL, m, NULL, n);
    if (info != 0) llmc_die("LAPACKE_dgesdd: info %d on a %d x %d matrix", (int)info, m, n);
    free(w);
}

/* Eigenvalues of the symmetric n x n matrix a (upper triangle read), ascending (dsyev). */
static inline void spec_sym_eigenvalues(const double *a, int n, double *w) {
    double *c = (double *)xmalloc(sizeof(double) * (size_t)n * n);
    memcpy(c, a, sizeof(double) * (size_t)n * n);
    lapack_int info = LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'N', 'U', n, c, n, w);
    if (info != 0) llmc_die("LAPACKE_dsyev: info %d on a %d x %d matrix", (int)info, n, n);
    free(c);
}

/* Eigenvalues wr + i wi of the general n x n matrix a (dgeev, no vectors). */
static inline void spec_eigenvalues(const double *a, int n, double *wr, double *wi) {
    double *c = (double *)xmalloc(sizeof(double) * (size_t)n * n);
    memcpy(c, a, sizeof(double) * (size_t)n * n);
    lapack_int info = LAPACKE_dgeev(LAPACK_ROW_MAJOR, 'N', 'N', n, c, n, wr, wi, NULL, 1, NULL, 1);
    if (info != 0) llmc_die("LAPACKE_dgeev: info %d on a %d x %d matrix", (int)info, n, n);
    free(c);
}

/* R factor of the thin QR of the m x n matrix a: r (k x n, k = min(m, n)) upper trapezoidal,
 * zeros below. Only R is needed: the cores below never touch Q (dgeqrf alone). */
static inline int spec_qr_r(const double *a, int m, int n, double *r) {
    const int k = m < n ? m : n;
    double *w = (double *)xmalloc(sizeof(double) * (size_t)m * n);
    double *tau = (double *)xmalloc(sizeof(double) * (size_t)(k > 0 ? k : 1));
    memcpy(w, a, sizeof(double) * (size_t)m * n);
    lapack_int info = LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, m, n, w, n, tau);
    if (info != 0) llmc_die("LAPACKE_dgeqrf: info %d on a %d x %d matrix", (int)info, m, n);
    for (int i = 0; i < k; i++)
        for (int j = 0; j < n; j++) r[(size_t)i * n + j] = j >= i ? w[(size_t)i * n + j] : 0.0;
    free(w);
    free(tau);
    return k;
}

static inline double spec_frobenius2(const double *a, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += a[i] * a[i];
    return s;
}

/* ----------------------------------------------------------------------------------------------
 * Effective rank (doc/methods.md "Effective rank"). */
typedef struct {
    int rank;      /* singular values above max(1e-6 sigma_1, floor): numerical rank (even for skew) */
    double erank;  /* Roy-Vetterli: exp(-sum p_k ln p_k), p_k = sigma_k / sum sigma */
    double pr;     /* participation ratio (sum sigma)^2 / sum sigma^2 */
    double sr;     /* stable rank sum sigma^2 / sigma_1^2 */
    int n90;       /* planes holding 90% of the energy sum sigma^2 */
    int rank90;    /* 2 n90 */
} RankStats;

/*
 * sv: n singular values, descending; floor: an absolute threshold below which values are noise
 * (SPEC_ZERO_REL times the norm of the kernel the matrix came from). A real skew matrix has its
 * singular values in equal pairs (omega_k, omega_k), one pair per rotation plane, so the plane
 * energies omega_k^2 are pairs of sigma^2 and n90 = ceil(j90 / 2) with j90 the number of singular
 * values that first reach 90% of sum sigma^2. One plane: erank = PR = SR = 2 exactly. A zero
 * matrix has rank 0 and every metric 0.
 */
static inline RankStats spec_rank_stats(const double *sv, int n, double floor) {
    RankStats r;
    memset(&r, 0, sizeof(r));
    if (n < 1 || !(sv[0] > floor) || sv[0] <= 0.0) return r;
    const double cut = fmax(SPEC_SV_REL_TOL * sv[0], floor);
    double sum = 0.0, sum2 = 0.0;
    int k = 0;
    for (; k < n && sv[k] > cut; k++) {
        sum += sv[k];
        sum2 += sv[k] * sv[k];
    }
    r.rank = k;
    double ent = 0.0;
    for (int i = 0; i < k; i++) {
        const double p = sv[i] / sum;
        ent -= p * log(p);
    }
    r.erank = exp(ent);
    r.pr = sum * sum / sum2;
    r.sr = sum2 / (sv[0] * sv[0]);
    /* the relative 1e-12 guards ties at exactly 90% against the last bit of the sum */
    double cum = 0.0;
    int j90 = k;
    for (int i = 0; i < k; i++) {
        cum += sv[i] * sv[i];
        if (cum >= SPEC_ENERGY_FRACTION * sum2 * (1.0 - 1e-12)) {
            j90 = i + 1;
            break;
        }
    }
    r.n90 = (j90 + 1) / 2;
    r.rank90 = 2 * r.n90;
    return r;
}

/* ----------------------------------------------------------------------------------------------
 * The routing/filtering split (doc/methods.md "Routing/filtering split of a standard head"). A head kernel of rank <= k is written
 * M = Q K Q^T with Q (C x k) orthonormal columns and a small core K (k x k). Then R = Q R_K Q^T and
 * F = Q F_K Q^T with R_K = (K - K^T)/2, F_K = (K + K^T)/2: the non-zero singular values and
 * eigenvalues of R and F are those of the k x k cores, and the Frobenius norms are equal. */
typedef struct {
    double rho_R, rho_F;   /* ||R||_F^2 / ||M||_F^2 and ||F||_F^2 / ||M||_F^2; they sum to 1 */
    double norm_R, norm_F; /* spectral norms ||R||_2, ||F||_2 */
    double norm_ratio;     /* ||R||_2 / ||F||_2 (inf when F = 0) */
    double lam_max_F;      /* largest eigenvalue of F (C x C, so >= 0 when k < C) */
    RankStats rank;        /* of R */
} SplitStats;

static inline void spec_split_core(const double *K, int k, int C, SplitStats *out) {
    memset(out, 0, sizeof(*out));
    const size_t kk = (size_t)k * k;
    double *Rk = (double *)xmalloc(sizeof(double) * kk), *Fk = (double *)xmalloc(sizeof(double) * kk);
    double *sv = (double *)xmalloc(sizeof(double) * (size_t)k), *ev = (double *)xmalloc(sizeof(double) * (size_t)k);
    for (int i = 0; i < k; i++) {
        for (int j = 0; j < k; j++) {
            Rk[(size_t)i * k + j] = 0.5 * (K[(size_t)i * k + j] - K[(size_t)j * k + i]);
            Fk[(size_t)i * k + j] = 0.5 * (K[(size_t)i * k + j] + K[(size_t)j * k + i]);
        }
    }
    /* skew and symmetric matrices are Frobenius-orthogonal: ||M||^2 = ||R||^2 + ||F||^2 */
    const double r2 = spec_frobenius2(Rk, kk), f2 = spec_frobenius2(Fk, kk), m2 = r2 + f2;
    out->rho_R = m2 > 0.0 ? r2 / m2 : NAN;
    out->rho_F = m2 > 0.0 ? f2 / m2 : NAN;
    spec_singular_values(Rk, k, k, sv);
    out->rank = spec_rank_stats(sv, k, SPEC_ZERO_REL * sqrt(m2));
    out->norm_R = out->rank.rank > 0 ? sv[0] : 0.0;
    spec_sym_eigenvalues(Fk, k, ev);
    out->norm_F = fmax(fabs(ev[0]), fabs(ev[k - 1]));
    out->lam_max_F = ev[k - 1];
    if (k < C && out->lam_max_F < 0.0) out->lam_max_F = 0.0; /* F also has the zero eigenvalues */
    out->norm_ratio = out->norm_F > 0.0 ? out->norm_R / out->norm_F : INFINITY;
    free(Rk); free(Fk); free(sv); free(ev);
}

/*
 * Core of a standard head (doc/methods.md "Routing/filtering split of a standard head": its cheap computation): with the thin QR
 * [W_Q W_K] = Q~ R~ (W_Q, W_K: C x d), R~ = [R1 R2] (k x 2d, k = min(C, 2d)), W_Q = Q~ R1 and
 * W_K = Q~ R2, so M = Q~ (R1 R2^T) Q~^T and K = R1 R2^T. Its skew part is R~ J R~^T / 2 with
 * J = [[0, I], [-I, 0]] (the routing core) and its symmetric part R~ J_s R~^T / 2 with
 * J_s = [[0, I], [I, 0]]. The C x C matrix is never formed. K: (k x k), space for min(C,2d)^2.
 * Returns k.
 */
static inline int spec_core_standard(const double *WQ, const double *WK, int C, int d, double *K) {
    const int n = 2 * d;
    double *A = (double *)xmalloc(sizeof(double) * (size_t)C * n);
    for (int c = 0; c < C; c++) {
        memcpy(A + (size_t)c * n, WQ + (size_t)c * d, sizeof(double) * d);
        memcpy(A + (size_t)c * n + d, WK + (size_t)c * d, sizeof(double) * d);
    }
    double *R = (double *)xmalloc(sizeof(double) * (size_t)(C < n ? C : n) * n);
    const int k = spec_qr_r(A, C, n, R);
    for (int i = 0; i < k; i++) {
        for (int j = 0; j < k; j++) {
            double s = 0.0;
            for (int t = 0; t < d; t++) s += R[(size_t)i * n + t] * R[(size_t)j * n + d + t];
            K[(size_t)i * k + j] = s;
        }
    }
    free(A);
    free(R);
    return k;
}

/* Core of an S-D head M = U L U^T (doc/methods.md "Formulation A"): U = Q R (k x d, k = min(C, d)), K = R L R^T.
 * Its skew part R S R^T is routing and its symmetric part sign R D R^T filtering. Returns k. */
static inline int spec_core_sd(const double *U, int C, int d, const double *Lm, double *K) {
    double *R = (double *)xmalloc(sizeof(double) * (size_t)(C < d ? C : d) * d);
    double *RL = (double *)xmalloc(sizeof(double) * (size_t)d * d);
    const int k = spec_qr_r(U, C, d, R);
    for (int i = 0; i < k; i++) {
        for (int j = 0; j < d; j++) {
            double s = 0.0;
            for (int t = 0; t < d; t++) s += R[(size_t)i * d + t] * Lm[(size_t)t * d + j];
            RL[(size_t)i * d + j] = s;
        }
    }
    for (int i = 0; i < k; i++) {
        for (int j = 0; j < k; j++) {
            double s = 0.0;
            for (int t = 0; t < d; t++) s += RL[(size_t)i * d + t] * R[(size_t)j * d + t];
            K[(size_t)i * k + j] = s;
        }
    }
    free(R);
    free(RL);
    return k;
}

/* ----------------------------------------------------------------------------------------------
 * Spectral abscissa (doc/methods.md "Dynamically unstable heads") of a square generator. */
typedef struct {
    double alpha;     /* max Re(lambda) over the non-zero eigenvalues (0 when the matrix is 0) */
    double radius;    /* rho = max |lambda| */
    double alpha_rel; /* alpha / rho (0 when rho = 0) */
} AbscissaStats;

static inline AbscissaStats spec_abscissa(const double *A, int n) {
    AbscissaStats s = {0.0, 0.0, 0.0};
    double *wr = (double *)xmalloc(sizeof(double) * (size_t)n), *wi = (double *)xmalloc(sizeof(double) * (size_t)n);
    spec_eigenvalues(A, n, wr, wi);
    for (int i = 0; i < n; i++) s.radius = fmax(s.radius, hypot(wr[i], wi[i]));
    double alpha = -INFINITY;
    for (int i = 0; i < n; i++)
        if (hypot(wr[i], wi[i]) > SPEC_EIG_ZERO_REL * s.radius) alpha = fmax(alpha, wr[i]);
    s.alpha = s.radius > 0.0 && alpha > -INFINITY ? alpha : 0.0;
    s.alpha_rel = s.radius > 0.0 ? s.alpha / s.radius : 0.0;
    free(wr);
    free(wi);
    return s;
}

/* ----------------------------------------------------------------------------------------------
 * S-D parameters (llmc/param_layout.h: per head the strict upper triangle of S row-major, theta
 * (d) per head or one value with scalar D). */

static inline double spec_softplus(double x) { return sd_softplus_d(x); }

/* S (d x d) from the packed d(d-1)/2 values: S_ij = s, S_ji = -s for i < j (generator.h). */
static inline void spec_skew_unpack(const float *packed, int d, double *S) {
    for (int i = 0; i < d; i++) {
        S[(size_t)i * d + i] = 0.0;
        for (int j = i + 1; j < d; j++) {
            const double v = packed[sd_pack_index(i, j, d)];
            S[(size_t)i * d + j] = v;
            S[(size_t)j * d + i] = -v;
        }
    }
}

/* One head's generator exactly as the model builds it (sd_build_generator, fp32), in double: L,
 * its skew part S = (L - L^T) / 2 (the packed values, exactly) and D's diagonal sign * diag(L)
 * = softplus(theta) (d values; all equal with scalar D). skew and theta point at the head's own. */
static inline void spec_generator(const float *skew, const float *theta, int d, int scalar_d, int sign,
                                  double *S, double *dvals, double *Lm) {
    float *Lf = (float *)xmalloc(sizeof(float) * (size_t)d * d);
    sd_build_generator(Lf, skew, theta, 1, d, scalar_d, sign);
    for (int i = 0; i < d; i++) {
        for (int j = 0; j < d; j++) {
            Lm[(size_t)i * d + j] = Lf[(size_t)i * d + j];
            S[(size_t)i * d + j] = i == j ? 0.0 : 0.5 * ((double)Lf[(size_t)i * d + j] - Lf[(size_t)j * d + i]);
        }
        dvals[i] = sign * (double)Lf[(size_t)i * d + i];
    }
    free(Lf);
}

/* Coefficient of variation std/mean (population std) of x: how far D is from a scalar
 * (doc/methods.md "Formulation B"). 0 for equal values. */
static inline double spec_cv(const double *x, int n) {
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= n;
    return mean != 0.0 ? sqrt(var) / fabs(mean) : 0.0;
}

/* ----------------------------------------------------------------------------------------------
 * One head of a checkpoint layer. */
typedef enum { SPEC_STANDARD = 0, SPEC_SD = 1 } SpecFamily;

typedef struct {
    int layer, head, kind, d;
    int family;       /* SPEC_STANDARD: ranks of R (of M); SPEC_SD: ranks of S (head space) */
    int capacity;     /* routing rank capacity: min(2d, C) (standard), d (S-D) (doc/methods.md "Effective rank") */
    RankStats rank;   /* of R_h (standard) or S_h (S-D) */
    RankStats rank_x; /* of the routing part of the x-space kernel M: R_h itself (standard), the
                       * token-space routing U S U^T (S-D), whose planes are S's seen through U */
    /* x-space split of M (standard: W_Q W_K^T; S-D: U L U^T) */
    double rho_R, rho_F, norm_R, norm_F, norm_ratio, lam_max_F;
    int f_positive;   /* lambda_max(F) > eps ||F||_2: the necessary condition of Bendixson */
    /* stability of the generator: M (standard, via W_K^T W_Q) or L = S + sign D (S-D) */
    double alpha, radius, alpha_rel;
    int unstable;     /* alpha > eps * rho */
    /* S-D only (NaN for standard heads) */
    double norm_S;    /* ||S||_2 */
    double d_mean;    /* mean of softplus(theta) */
    double d_spread;  /* coefficient of variation of softplus(theta); 0 for scalar D */
    /* S-D only, with sd_spectrum -grad_batches (doc/methods.md "Effective rank", the mean gradient): G, the
     * unpacked mean over batches of dL/d(packed S), a skew d x d matrix like S */
    int has_grad;     /* G was measured for this head */
    RankStats grad;   /* ranks of G */
    double grad_norm; /* ||G||_F (NaN without G) */
    double grad_align; /* cos(S, -G) = -<S, G>_F / (||S||_F ||G||_F): 1 when S points down G; NaN
                        * without G or when S or G is zero */
} HeadStats;

/* W (C x d): column j = row (row0 + j) of the layer's qkvw (rows of length C), i.e. the
 * transpose of that row block (doc/methods.md "Notation"). */
static inline void spec_block_T(const float *qkvw, int C, int row0, int d, double *W) {
    for (int j = 0; j < d; j++) {
        const float *row = qkvw + (size_t)(row0 + j) * C;
        for (int c = 0; c < C; c++) W[(size_t)c * d + j] = row[c];
    }
}

static inline void spec_head_init(HeadStats *hs, int layer, int head, int kind, int d) {
    memset(hs, 0, sizeof(*hs));
    hs->layer = layer;
    hs->head = head;
    hs->kind = kind;
    hs->d = d;
    hs->norm_S = hs->d_mean = hs->d_spread = NAN;
    hs->grad_norm = hs->grad_align = NAN;
}

static inline void spec_fill_split(HeadStats *hs, const double *K, int k, int C, double eps) {
    SplitStats sp;
    spec_split_core(K, k, C, &sp);
    hs->rho_R = sp.rho_R;
    hs->rho_F = sp.rho_F;
    hs->norm_R = sp.norm_R;
    hs->norm_F = sp.norm_F;
    hs->norm_ratio = sp.norm_ratio;
    hs->lam_max_F = sp.lam_max_F;
    hs->f_positive = sp.lam_max_F > eps * sp.norm_F;
    hs->rank_x = sp.rank;
    if (hs->family == SPEC_STANDARD) hs->rank = sp.rank;
}

static inline void spec_fill_abscissa(HeadStats *hs, const double *G, int n, double eps) {
    AbscissaStats ab = spec_abscissa(G, n);
    hs->alpha = ab.alpha;
    hs->radius = ab.radius;
    hs->alpha_rel = ab.alpha_rel;
    hs->unstable = ab.alpha > eps * ab.radius;
}

/*
 * Standard head `head` of a layer with h heads of size d: qkvw is the layer's (3 h d, C) block.
 * Split and ranks from the QR core; alpha from the d x d matrix W_K^T W_Q, whose eigenvalues are
 * the non-zero eigenvalues of W_Q W_K^T (doc/methods.md "Dynamically unstable heads", small-matrix trick).
 */
static inline void spec_head_standard(const float *qkvw, int C, int h, int d, int layer, int head,
                                      int kind, double eps, HeadStats *hs) {
    spec_head_init(hs, layer, head, kind, d);
    hs->family = SPEC_STANDARD;
    hs->capacity = 2 * d < C ? 2 * d : C;
    const int A = h * d, kmax = 2 * d < C ? 2 * d : C;
    double *WQ = (double *)xmalloc(sizeof(double) * (size_t)C * d);
    double *WK = (double *)xmalloc(sizeof(double) * (size_t)C * d);
    double *K = (double *)xmalloc(sizeof(double) * (size_t)kmax * kmax);
    double *G = (double *)xmalloc(sizeof(double) * (size_t)d * d);
    spec_block_T(qkvw, C, head * d, d, WQ);
    spec_block_T(qkvw, C, A + head * d, d, WK);
    const int k = spec_core_standard(WQ, WK, C, d, K);
    spec_fill_split(hs, K, k, C, eps);
    for (int i = 0; i < d; i++) {
        for (int j = 0; j < d; j++) {
            double s = 0.0;
            for (int c = 0; c < C; c++) s += WK[(size_t)c * d + i] * WQ[(size_t)c * d + j];
            G[(size_t)i * d + j] = s;
        }
    }
    spec_fill_abscissa(hs, G, d, eps);
    free(WQ); free(WK); free(K); free(G);
}

/*
 * S-D head `head`: qkvw is the layer's (2 h d, C) block (U rows, then V rows), skew the layer's
 * packed S (h, d(d-1)/2), theta (h, d) or (h). Ranks of S (capacity d), ||S||_2, the spread of D,
 * alpha of L = S + sign D (< 0 for sign -1, doc/methods.md "Stability"), and the x-space split of U L U^T.
 */
static inline void spec_head_sd(const float *qkvw, const float *skew, const float *theta, int C,
                                int d, int layer, int head, int kind, int scalar_d, int sign,
                                double eps, HeadStats *hs) {
    spec_head_init(hs, layer, head, kind, d);
    hs->family = SPEC_SD;
    hs->capacity = d;
    const size_t dd = (size_t)d * d, npack = (size_t)d * (d - 1) / 2;
    const int kmax = d < C ? d : C;
    double *S = (double *)xmalloc(sizeof(double) * dd), *Lm = (double *)xmalloc(sizeof(double) * dd);
    double *dv = (double *)xmalloc(sizeof(double) * (size_t)d), *sv = (double *)xmalloc(sizeof(double) * (size_t)d);
    double *U = (double *)xmalloc(sizeof(double) * (size_t)C * d);
    double *K = (double *)xmalloc(sizeof(double) * (size_t)kmax * kmax);
    spec_generator(skew + (size_t)head * npack, theta + (size_t)head * (scalar_d ? 1 : d), d, scalar_d, sign,
                   S, dv, Lm);
    spec_singular_values(S, d, d, sv);
    hs->rank = spec_rank_stats(sv, d, SPEC_ZERO_REL * sqrt(spec_frobenius2(Lm, dd)));
    hs->norm_S = sv[0];
    double mean = 0.0;
    for (int i = 0; i < d; i++) mean += dv[i];
    hs->d_mean = mean / d;
    hs->d_spread = scalar_d ? 0.0 : spec_cv(dv, d);
    spec_fill_abscissa(hs, Lm, d, eps);
    spec_block_T(qkvw, C, head * d, d, U);
    const int k = spec_core_sd(U, C, d, Lm, K);
    spec_fill_split(hs, K, k, C, eps);
    free(S); free(Lm); free(dv); free(sv); free(U); free(K);
}

/*
 * The mean gradient of an S-D head's S (doc/methods.md "Effective rank": what the loss asks for): skew and
 * dskew are the head's packed S and the packed mean gradient dL/ds (d(d-1)/2 each). Unpacked the
 * way S is (spec_skew_unpack), the gradient is the skew matrix G with G_ij = dL/ds_ij = 2 skew(dL/dS)_ij,
 * so it has S's pair structure and its planes are counted the same way. Fills has_grad, grad,
 * grad_norm, grad_align; a zero G has rank 0 and every rank metric 0.
 */
static inline void spec_head_grad(HeadStats *hs, const float *skew, const float *dskew, int d) {
    const size_t dd = (size_t)d * d;
    double *S = (double *)xmalloc(sizeof(double) * dd), *G = (double *)xmalloc(sizeof(double) * dd);
    double *sv = (double *)xmalloc(sizeof(double) * (size_t)d);
    spec_skew_unpack(skew, d, S);
    spec_skew_unpack(dskew, d, G);
    const double g2 = spec_frobenius2(G, dd), s2 = spec_frobenius2(S, dd);
    spec_singular_values(G, d, d, sv);
    hs->has_grad = 1;
    hs->grad = spec_rank_stats(sv, d, 0.0);
    hs->grad_norm = sqrt(g2);
    double dot = 0.0;
    for (size_t i = 0; i < dd; i++) dot += S[i] * G[i];
    hs->grad_align = g2 > 0.0 && s2 > 0.0 ? -dot / sqrt(g2 * s2) : NAN;
    free(S); free(G); free(sv);
}

/* At minimal rank: a non-zero routing (R, or S for S-D heads) of erank below SPEC_MINIMAL_ERANK. */
static inline int spec_head_minimal(const HeadStats *hs) {
    return hs->rank.rank > 0 && hs->rank.erank < SPEC_MINIMAL_ERANK;
}

/* ----------------------------------------------------------------------------------------------
 * Per-layer summary over heads. */
typedef struct {
    double erank_mean, erank_median, pr_mean, sr_mean, n90_mean, rank90_mean;
    double n90_median;    /* median over heads of n90 */
    /* of the mean gradient G (spec_head_grad); NaN unless every head of the layer has it */
    double grad_erank_mean, grad_erank_median, grad_n90_mean, grad_n90_median, grad_align_mean;
    double x_erank_mean;  /* erank of the x-space routing (rank_x), mean over heads */
    double frac_minimal;  /* fraction of heads at minimal rank */
    int minimal;          /* the layer is at minimal rank: its median head erank is below 2.5 */
    double rho_R_mean, norm_ratio_mean, alpha_rel_max, alpha_rel_mean;
    double frac_unstable, frac_f_positive;
    double d_spread_mean; /* NaN for standard layers */
} LayerSummary;

static inline int spec_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double spec_median(const double *x, int n) {
    double *c = (double *)xmalloc(sizeof(double) * (size_t)n);
    memcpy(c, x, sizeof(double) * (size_t)n);
    qsort(c, (size_t)n, sizeof(double), spec_cmp_double);
    const double m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

static inline void spec_layer_summary(const HeadStats *hs, int h, LayerSummary *s) {
    memset(s, 0, sizeof(*s));
    double *er = (double *)xmalloc(sizeof(double) * (size_t)h);
    double *n9 = (double *)xmalloc(sizeof(double) * (size_t)h);
    double *ger = (double *)xmalloc(sizeof(double) * (size_t)h);
    double *gn9 = (double *)xmalloc(sizeof(double) * (size_t)h);
    int all_grad = 1;
    s->alpha_rel_max = -INFINITY;
    for (int k = 0; k < h; k++) {
        er[k] = hs[k].rank.erank;
        n9[k] = hs[k].rank.n90;
        ger[k] = hs[k].grad.erank;
        gn9[k] = hs[k].grad.n90;
        all_grad &= hs[k].has_grad;
        s->grad_erank_mean += hs[k].grad.erank / h;
        s->grad_n90_mean += (double)hs[k].grad.n90 / h;
        s->grad_align_mean += hs[k].grad_align / h; /* NaN when one head's S or G is zero */
        s->erank_mean += hs[k].rank.erank / h;
        s->x_erank_mean += hs[k].rank_x.erank / h;
        s->frac_minimal += (double)spec_head_minimal(&hs[k]) / h;
        s->pr_mean += hs[k].rank.pr / h;
        s->sr_mean += hs[k].rank.sr / h;
        s->n90_mean += (double)hs[k].rank.n90 / h;
        s->rank90_mean += (double)hs[k].rank.rank90 / h;
        s->rho_R_mean += hs[k].rho_R / h;
        s->norm_ratio_mean += hs[k].norm_ratio / h;
        s->alpha_rel_mean += hs[k].alpha_rel / h;
        s->alpha_rel_max = fmax(s->alpha_rel_max, hs[k].alpha_rel);
        s->frac_unstable += (double)hs[k].unstable / h;
        s->frac_f_positive += (double)hs[k].f_positive / h;
        s->d_spread_mean += hs[k].d_spread / h; /* NaN propagates for standard heads */
    }
    s->erank_median = spec_median(er, h);
    s->n90_median = spec_median(n9, h);
    s->minimal = s->erank_median > 0.0 && s->erank_median < SPEC_MINIMAL_ERANK;
    if (all_grad) {
        s->grad_erank_median = spec_median(ger, h);
        s->grad_n90_median = spec_median(gn9, h);
    } else {
        s->grad_erank_mean = s->grad_erank_median = s->grad_n90_mean = s->grad_n90_median = NAN;
        s->grad_align_mean = NAN;
    }
    free(er); free(n9); free(ger); free(gn9);
}

#endif /* SD_ATTENTION_SPECTRUM_H */
