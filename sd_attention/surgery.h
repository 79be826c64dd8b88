/*
 * sd_attention/surgery.h: post-hoc interventions on a trained model (the interventions of the S-D
 * paper's abstract, arXiv 2605.18826, as read in doc/sd_tools.md "Surgery"), as pure
 * functions from (config, parameters) to a new (config, parameters). No I/O.
 *
 * Defines:
 *   surg_linearize        layers 0..K-1: mha -> lin, sd -> sdlin; parameters untouched (reading
 *                         (a) of doc/sd_tools.md "Surgery": swap softmax for ELU+1 in a trained model)
 *   surg_uniform          one layer's attention made the uniform causal average of its values:
 *                         the rows of qkvw / qkvb that form the scores (Q and K; S-D's U) zeroed,
 *                         so every score is 0 (softmax: 1/(t+1) each; ELU+1: phi(0) = 1 each).
 *                         The loss it costs says whether the layer's routing is used at all
 *   surg_scalar_d         per S-D head theta <- softplus^-1(mean_k softplus(theta_k)) (filtering
 *                         truncation), as the scalar-D layout (or the vector layout kept)
 *   surg_schur_planes     real Schur form of a skew S (LAPACKE_dgees): orthogonal Q whose column
 *                         pairs span S's rotation planes, sorted by frequency omega
 *   surg_align_planes     rotate inside each plane so that Q^T D Q has diagonal 2 x 2 blocks
 *   surg_shrink_head      one S-D head reduced to its top m planes (rank shrink)
 *   surg_plan_shrink      the new head size per layer: 2m from -planes M or from the measured
 *                         n90 (-rank90), optionally rounded up to a multiple of 8
 *   surg_shrink           every planned layer; the rest of the model copied
 *   surg_copy_slots       copy the tensors two layouts share (the common part of every op)
 *   surg_attention_params attention parameters of a config (the quantity of doc/sd_tools.md "Cascade-allocated d_head")
 *
 * Approximations of the rank shrink (doc/sd_tools.md):
 *   - D' = diag(Q_m^T D Q_m): the kept block of D is not diagonal in the plane basis. Rotating
 *     inside each plane (which leaves that plane's S block unchanged) makes its 2 x 2 blocks
 *     diagonal; the coupling between different planes is dropped. Exact for scalar D.
 *   - Our format ties the value width to the U width (qkvw is (2A, C) for S-D layers), so V shrinks
 *     with U: each head's value-output map W_V^h W_O^h (C x C, rank <= d) is replaced by its best
 *     rank-2m approximation (truncated SVD, through QR cores); the V bias is folded exactly into
 *     the output bias (softmax rows sum to 1, so it adds b_V W_O^h to every output).
 *   - Only `sd` layers are shrunk. In `sdlin` layers ELU+1 acts coordinate-wise on u and u L^T, so
 *     a change of basis inside the head is not a symmetry of the mixer; they are left unchanged.
 *   - The logit scale 1/sqrt(d) becomes 1/sqrt(2m); S' and D' are multiplied by sqrt(2m/d) so
 *     that u' L' u'^T / sqrt(2m) equals u L u^T / sqrt(d) on the kept planes.
 *   - A layer whose new size would be d keeps every plane: it is copied unchanged (any orthonormal
 *     basis of the whole head space is exact for S, and the identity keeps D exactly diagonal).
 */
#ifndef SD_ATTENTION_SURGERY_H
#define SD_ATTENTION_SURGERY_H

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../llmc/config.h"
#include "../llmc/layer_kind.h"
#include "../llmc/param_layout.h"
#include "../llmc/utils.h"
#include "spectrum.h"
#include "stages.h"

/* softplus^-1(y) = ln(e^y - 1) (doc/sd_tools.md "Surgery"), written y + ln(1 - e^-y) so it stays exact for
 * large y and for small y > 0. */
static inline double surg_softplus_inv(double y) { return y + log(-expm1(-y)); }

/* ----------------------------------------------------------------------------------------------
 * Linearization (doc/sd_tools.md "Surgery" (a)): each layer keeps its projection and takes the linear mixer
 * (mha -> lin, sd -> sdlin); only the kinds change, the parameters belong to the projection, so the
 * buffer is reused as is. Returns the layers changed. */
static inline int surg_linearize(const GPT2Config *in, int K, GPT2Config *out) {
    *out = *in;
    int changed = 0;
    for (int l = 0; l < K && l < in->num_layers; l++) {
        int *kind = &out->layer[l].kind;
        if (linear_layer(&out->layer[l])) continue;
        const int lin = layer_kind_find(layer_kind_of(*kind)->proj->name, LINEAR_MIXER.name);
        if (lin < 0) continue;
        *kind = lin;
        changed++;
    }
    return changed;
}

/* ----------------------------------------------------------------------------------------------
 * Uniform attention in layer `layer`: in place on params (the layout does not change). A layer's
 * projection writes qkv_rows blocks of A rows, the value rows last; every block before them feeds
 * the scores only (Q | K for softmax and ELU+1 layers, U for S-D, whose K' = U L^T vanishes with
 * U), so zeroing them gives all-zero scores, hence equal weights on the causal prefix, and the
 * values and the output projection unchanged. */
static inline void surg_uniform(const GPT2Config *c, float *params, int layer) {
    ParamLayout pl;
    param_layout_init(&pl, c);
    const LayerSpec *ls = &c->layer[layer];
    const size_t score_rows = (size_t)(layer_kind_of(ls->kind)->proj->qkv_rows - 1) * attn_width(ls);
    LayerParams p = layer_params(params, &pl, layer);
    memset(p.qkvw, 0, score_rows * (size_t)c->channels * sizeof(float));
    memset(p.qkvb, 0, score_rows * sizeof(float));
}

/* ----------------------------------------------------------------------------------------------
 * Copying what two layouts share. skip[l] is a bit mask of per-layer slots (1u << slot) that the
 * caller fills itself; every other tensor must have the same size in both and is copied. */
static inline void surg_copy_slots(const GPT2Config *ic, const float *ip, const GPT2Config *oc,
                                   float *op, const unsigned *skip) {
    ParamLayout il, ol;
    param_layout_init(&il, ic);
    param_layout_init(&ol, oc);
    for (int s = 0; s < param_slot_count(); s++) {
        if (!slot_is_per_layer(s)) {
            if (il.slot_size[s] != ol.slot_size[s]) llmc_die("surgery: slot %s changed size", param_slot_name(s));
            memcpy(op + ol.slot_offset[s], ip + il.slot_offset[s], il.slot_size[s] * sizeof(float));
            continue;
        }
        for (int l = 0; l < ic->num_layers; l++) {
            if (skip && (skip[l] & (1u << s))) continue;
            const size_t n = layer_slot_size(ic, l, s);
            if (n != layer_slot_size(oc, l, s))
                llmc_die("surgery: layer %d slot %s changed size without a rule", l, param_slot_name(s));
            memcpy(op + param_offset(&ol, s, l), ip + param_offset(&il, s, l), n * sizeof(float));
        }
    }
}

/* Parameters of the attention sub-blocks (qkv, output projection, S-D tensors, with biases):
 * what a cascade-allocated model saves (doc/sd_tools.md "Cascade-allocated d_head"). */
static inline size_t surg_attention_params(const GPT2Config *c) {
    static const int slots[] = {P_QKVW, P_QKVB, P_ATTPROJW, P_ATTPROJB, P_SDSKEW, P_SDTHETA};
    size_t n = 0;
    for (int l = 0; l < c->num_layers; l++)
        for (int i = 0; i < 6; i++) n += layer_slot_size(c, l, slots[i]);
    return n;
}

/* ----------------------------------------------------------------------------------------------
 * Scalar filtering (doc/sd_tools.md "Surgery"): theta_h <- softplus^-1(mean_k softplus(theta_hk)), so the
 * mean filtering strength of every head is kept. keep_layout = 0 writes the scalar-D layout (one
 * theta per head, header flag 2): the model is then exactly one trained with -sd_scalar_d 1 and a
 * fine-tune keeps D scalar. keep_layout = 1 writes the d equal values in the vector layout
 * (identical forward; a fine-tune may spread them again). *op is allocated here. */
static inline float surg_scalar_theta(const float *theta, int n) {
    double mean = 0.0;
    for (int k = 0; k < n; k++) mean += spec_softplus(theta[k]);
    return (float)surg_softplus_inv(mean / n);
}

static inline void surg_scalar_d(const GPT2Config *ic, const float *ip, int keep_layout,
                                 GPT2Config *oc, float **op) {
    *oc = *ic;
    if (!keep_layout) kind_opt_set_int(oc->opt, &SD_SCALAR_D, 1);
    ParamLayout il, ol;
    param_layout_init(&il, ic);
    param_layout_init(&ol, oc);
    unsigned skip[LLMC_MAX_LAYERS] = {0};
    for (int l = 0; l < ic->num_layers; l++) skip[l] = 1u << P_SDTHETA;
    *op = (float *)xmalloc(ol.total * sizeof(float));
    surg_copy_slots(ic, ip, oc, *op, skip);
    for (int l = 0; l < ic->num_layers; l++) {
        const LayerSpec *ls = &ic->layer[l];
        if (!sd_layer(ls)) continue;
        const int in_n = sd_opt_scalar_d(ic) ? 1 : ls->head_size, out_n = sd_opt_scalar_d(oc) ? 1 : ls->head_size;
        const float *ti = ip + param_offset(&il, P_SDTHETA, l);
        float *to = *op + param_offset(&ol, P_SDTHETA, l);
        for (int k = 0; k < ls->n_head; k++) {
            const float t = surg_scalar_theta(ti + (size_t)k * in_n, in_n);
            for (int i = 0; i < out_n; i++) to[(size_t)k * out_n + i] = t;
        }
    }
}

/* ----------------------------------------------------------------------------------------------
 * Rotation planes of a skew S (doc/methods.md "Effective rank"; doc/sd_tools.md "Surgery"): S = Q T Q^T with T block diagonal, blocks
 * [[0, w], [-w, 0]] (and 1 x 1 zeros for odd d). Q (d x d, row-major) gets the planes' column
 * pairs first, by decreasing omega, then the 1 x 1 blocks. Returns the number of planes; omega
 * receives their frequencies. */
static inline int surg_schur_planes(const double *S, int d, double *Q, double *omega) {
    double *T = (double *)xmalloc(sizeof(double) * (size_t)d * d);
    double *Z = (double *)xmalloc(sizeof(double) * (size_t)d * d);
    double *wr = (double *)xmalloc(sizeof(double) * (size_t)d), *wi = (double *)xmalloc(sizeof(double) * (size_t)d);
    int *first = (int *)xmalloc(sizeof(int) * (size_t)d), *size = (int *)xmalloc(sizeof(int) * (size_t)d);
    double *w = (double *)xmalloc(sizeof(double) * (size_t)d);
    memcpy(T, S, sizeof(double) * (size_t)d * d);
    lapack_int sdim = 0;
    lapack_int info = LAPACKE_dgees(LAPACK_ROW_MAJOR, 'V', 'N', NULL, d, T, d, &sdim, wr, wi, Z, d);
    if (info != 0) llmc_die("LAPACKE_dgees: info %d on a %d x %d skew matrix", (int)info, d, d);
    int nb = 0;
    for (int i = 0; i < d; nb++) {
        first[nb] = i;
        if (i + 1 < d && T[(size_t)(i + 1) * d + i] != 0.0) {
            size[nb] = 2;
            w[nb] = sqrt(fabs(T[(size_t)i * d + i + 1] * T[(size_t)(i + 1) * d + i]));
            i += 2;
        } else {
            size[nb] = 1;
            w[nb] = -1.0; /* real eigenvalue (0 for skew S): after every plane */
            i += 1;
        }
    }
    /* order the blocks: planes by decreasing omega (a stable selection sort over few blocks) */
    int *order = (int *)xmalloc(sizeof(int) * (size_t)nb), *used = (int *)xcalloc((size_t)nb, sizeof(int));
    for (int r = 0; r < nb; r++) {
        int best = -1;
        for (int b = 0; b < nb; b++)
            if (!used[b] && (best < 0 || w[b] > w[best])) best = b;
        used[best] = 1;
        order[r] = best;
    }
    int col = 0, nplanes = 0;
    for (int r = 0; r < nb; r++) {
        const int b = order[r];
        if (size[b] == 2) omega[nplanes++] = w[b];
        for (int t = 0; t < size[b]; t++, col++)
            for (int i = 0; i < d; i++) Q[(size_t)i * d + col] = Z[(size_t)i * d + first[b] + t];
    }
    free(T); free(Z); free(wr); free(wi); free(first); free(size); free(w); free(order); free(used);
    return nplanes;
}

/* Rotates each plane's column pair (q1, q2) of Q (d x d) by the angle that makes the 2 x 2 block
 * of Q^T D Q diagonal (D = diag(dv)). A proper rotation inside a plane leaves its S block
 * [[0, w], [-w, 0]] unchanged, so S' keeps its form and diag(D') loses only the coupling between
 * different planes. */
static inline void surg_align_planes(double *Q, int d, int nplanes, const double *dv) {
    for (int p = 0; p < nplanes; p++) {
        const int a = 2 * p, b = 2 * p + 1;
        double b11 = 0.0, b22 = 0.0, b12 = 0.0;
        for (int i = 0; i < d; i++) {
            const double qa = Q[(size_t)i * d + a], qb = Q[(size_t)i * d + b];
            b11 += dv[i] * qa * qa;
            b22 += dv[i] * qb * qb;
            b12 += dv[i] * qa * qb;
        }
        const double phi = 0.5 * atan2(2.0 * b12, b11 - b22), c = cos(phi), s = sin(phi);
        for (int i = 0; i < d; i++) {
            const double qa = Q[(size_t)i * d + a], qb = Q[(size_t)i * d + b];
            Q[(size_t)i * d + a] = c * qa + s * qb;
            Q[(size_t)i * d + b] = -s * qa + c * qb;
        }
    }
}

/* ----------------------------------------------------------------------------------------------
 * Best rank-r factorization of a head's value-output map P = W_V W_O (W_V = rows^T: C x d,
 * W_O = the head's d output columns transposed: d x C), through the thin QRs W_V = Q1 R1,
 * W_O^T = Q2 R2: P = Q1 (R1 R2^T) Q2^T, and the SVD of the small core. Writes new value rows
 * (r x C) and output columns (C x r) with the singular values split evenly (sqrt on each side).
 * Returns the fraction of ||P||_F^2 kept. */
static inline void surg_thin_q(const double *A, int m, int n, double *Qo, double *R) {
    /* A (m x n, m >= n): Qo (m x n) orthonormal columns, R (n x n) */
    double *tau = (double *)xmalloc(sizeof(double) * (size_t)n);
    memcpy(Qo, A, sizeof(double) * (size_t)m * n);
    if (LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, m, n, Qo, n, tau) != 0) llmc_die("LAPACKE_dgeqrf failed (%d x %d)", m, n);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) R[(size_t)i * n + j] = j >= i ? Qo[(size_t)i * n + j] : 0.0;
    if (LAPACKE_dorgqr(LAPACK_ROW_MAJOR, m, n, n, Qo, n, tau) != 0) llmc_die("LAPACKE_dorgqr failed (%d x %d)", m, n);
    free(tau);
}

static inline double surg_value_lowrank(const double *WV, const double *WOt, int C, int d, int r,
                                        double *v_rows, double *o_cols) {
    if (C < d) llmc_die("surgery: head size %d exceeds C = %d; value shrink needs d <= C", d, C);
    const size_t cd = (size_t)C * d, dd = (size_t)d * d;
    double *Q1 = (double *)xmalloc(sizeof(double) * cd), *Q2 = (double *)xmalloc(sizeof(double) * cd);
    double *R1 = (double *)xmalloc(sizeof(double) * dd), *R2 = (double *)xmalloc(sizeof(double) * dd);
    double *K = (double *)xmalloc(sizeof(double) * dd), *Uc = (double *)xmalloc(sizeof(double) * dd);
    double *Vt = (double *)xmalloc(sizeof(double) * dd), *sv = (double *)xmalloc(sizeof(double) * (size_t)d);
    surg_thin_q(WV, C, d, Q1, R1);
    surg_thin_q(WOt, C, d, Q2, R2);
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++) {
            double s = 0.0;
            for (int t = 0; t < d; t++) s += R1[(size_t)i * d + t] * R2[(size_t)j * d + t];
            K[(size_t)i * d + j] = s;
        }
    lapack_int info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'A', d, d, K, d, sv, Uc, d, Vt, d);
    if (info != 0) llmc_die("LAPACKE_dgesdd: info %d on a %d x %d value core", (int)info, d, d);
    double total = 0.0, kept = 0.0;
    for (int i = 0; i < d; i++) {
        total += sv[i] * sv[i];
        if (i < r) kept += sv[i] * sv[i];
    }
    for (int a = 0; a < r; a++) {
        const double g = sqrt(sv[a]);
        for (int c = 0; c < C; c++) {
            double sv1 = 0.0, so = 0.0;
            for (int t = 0; t < d; t++) {
                sv1 += Q1[(size_t)c * d + t] * Uc[(size_t)t * d + a]; /* (Q1 Uc)[c][a] */
                so += Q2[(size_t)c * d + t] * Vt[(size_t)a * d + t];  /* (Q2 Vc)[c][a] */
            }
            v_rows[(size_t)a * C + c] = g * sv1;
            o_cols[(size_t)c * r + a] = g * so;
        }
    }
    free(Q1); free(Q2); free(R1); free(R2); free(K); free(Uc); free(Vt); free(sv);
    return total > 0.0 ? kept / total : 1.0;
}

/* ----------------------------------------------------------------------------------------------
 * One S-D head. Inputs are the head's views in the old layer, outputs its views in the new one. */
typedef struct {
    int C, d;                /* width, old head size */
    const float *u_rows;     /* (d, C) the head's U rows: u = x U_rows^T + u_bias */
    const float *u_bias;     /* (d) */
    const float *v_rows;     /* (d, C) */
    const float *v_bias;     /* (d) */
    const float *proj;       /* attprojw (C, A) of the layer */
    int proj_ld, proj_col;   /* its row length A, and the head's first column */
    const float *skew;       /* packed S, d(d-1)/2 */
    const float *theta;      /* (d), or (1) with scalar D */
    int scalar_d;
} ShrinkHeadIn;

typedef struct {
    float *u_rows, *u_bias, *v_rows, *v_bias; /* (r, C), (r), (r, C), (r) */
    float *proj;                              /* the new attprojw (C, A') */
    int proj_ld, proj_col;
    float *skew, *theta;                      /* r(r-1)/2; (r) or (1) */
    double *out_bias;                         /* (C): += b_V W_O^h (the folded V bias) */
    double routing_kept;                      /* fraction of ||S||_F^2 in the kept planes */
    double value_kept;                        /* fraction of ||W_V W_O||_F^2 kept */
} ShrinkHeadOut;

/* Keeps the top m = r/2 planes (r even, r < d). scale = sqrt(r/d) for softmax layers (the logit
 * scale 1/sqrt(d) becomes 1/sqrt(r)). */
static inline void surg_shrink_head(const ShrinkHeadIn *in, int r, double scale, ShrinkHeadOut *out) {
    const int C = in->C, d = in->d, m = r / 2;
    const size_t dd = (size_t)d * d;
    double *S = (double *)xmalloc(sizeof(double) * dd), *Q = (double *)xmalloc(sizeof(double) * dd);
    double *dv = (double *)xmalloc(sizeof(double) * (size_t)d), *om = (double *)xmalloc(sizeof(double) * (size_t)d);
    spec_skew_unpack(in->skew, d, S);
    for (int i = 0; i < d; i++) dv[i] = spec_softplus(in->scalar_d ? in->theta[0] : in->theta[i]);
    const int np = surg_schur_planes(S, d, Q, om);
    if (m > np) llmc_die("surgery: %d planes requested, S has %d", m, np);
    surg_align_planes(Q, d, m, dv);
    double energy = 0.0, kept = 0.0;
    for (int p = 0; p < np; p++) {
        energy += 2.0 * om[p] * om[p];
        if (p < m) kept += 2.0 * om[p] * om[p];
    }
    out->routing_kept = energy > 0.0 ? kept / energy : 1.0;
    /* U' rows = Q_m^T U_rows, b_U' = Q_m^T b_U: u' = u Q_m */
    for (int a = 0; a < r; a++) {
        double bias = 0.0;
        for (int b = 0; b < d; b++) bias += Q[(size_t)b * d + a] * in->u_bias[b];
        out->u_bias[a] = (float)bias;
        for (int c = 0; c < C; c++) {
            double s = 0.0;
            for (int b = 0; b < d; b++) s += Q[(size_t)b * d + a] * in->u_rows[(size_t)b * C + c];
            out->u_rows[(size_t)a * C + c] = (float)s;
        }
    }
    /* S' = scale Q_m^T S Q_m (upper triangle packed), D' = scale diag(Q_m^T D Q_m) */
    size_t p = 0;
    for (int a = 0; a < r; a++) {
        for (int b = a + 1; b < r; b++, p++) {
            double s = 0.0;
            for (int i = 0; i < d; i++)
                for (int j = 0; j < d; j++) s += Q[(size_t)i * d + a] * S[(size_t)i * d + j] * Q[(size_t)j * d + b];
            out->skew[p] = (float)(scale * s);
        }
    }
    if (in->scalar_d) {
        out->theta[0] = (float)surg_softplus_inv(scale * dv[0]);
    } else {
        for (int a = 0; a < r; a++) {
            double s = 0.0;
            for (int i = 0; i < d; i++) s += dv[i] * Q[(size_t)i * d + a] * Q[(size_t)i * d + a];
            out->theta[a] = (float)surg_softplus_inv(scale * s);
        }
    }
    /* values and output: rank-r value-output map; V bias folded into the output bias */
    double *WV = (double *)xmalloc(sizeof(double) * (size_t)C * d), *WOt = (double *)xmalloc(sizeof(double) * (size_t)C * d);
    double *vr = (double *)xmalloc(sizeof(double) * (size_t)r * C), *oc = (double *)xmalloc(sizeof(double) * (size_t)C * r);
    for (int c = 0; c < C; c++) {
        double fold = 0.0;
        for (int j = 0; j < d; j++) {
            WV[(size_t)c * d + j] = in->v_rows[(size_t)j * C + c];
            const double w = in->proj[(size_t)c * in->proj_ld + in->proj_col + j];
            WOt[(size_t)c * d + j] = w;
            fold += in->v_bias[j] * w;
        }
        out->out_bias[c] += fold;
    }
    out->value_kept = surg_value_lowrank(WV, WOt, C, d, r, vr, oc);
    for (int a = 0; a < r; a++) {
        out->v_bias[a] = 0.0f;
        for (int c = 0; c < C; c++) out->v_rows[(size_t)a * C + c] = (float)vr[(size_t)a * C + c];
    }
    for (int c = 0; c < C; c++)
        for (int a = 0; a < r; a++)
            out->proj[(size_t)c * out->proj_ld + out->proj_col + a] = (float)oc[(size_t)c * r + a];
    free(S); free(Q); free(dv); free(om); free(WV); free(WOt); free(vr); free(oc);
}

/* ----------------------------------------------------------------------------------------------
 * The plan: new head size per layer (0 = unchanged). planes > 0: m = planes; rank90: m = the
 * largest n90 of the layer's heads (no head keeps less than 90% of its routing energy). Then
 * r = 2m, rounded up to a multiple of 8 with round8 (cuDNN head sizes, doc/sd_tools.md "Surgery"), and a
 * layer with r >= d is left unchanged. Only `sd` layers are planned (see the header comment). */
typedef struct {
    int new_d[LLMC_MAX_LAYERS];   /* 0: unchanged */
    int planes[LLMC_MAX_LAYERS];  /* m before rounding */
    int n_changed;
} ShrinkPlan;

static inline int surg_round8(int r) { return (r + 7) / 8 * 8; }

static inline void surg_plan_shrink(const GPT2Config *c, const float *params, int planes, int rank90,
                                    int round8, ShrinkPlan *plan) {
    memset(plan, 0, sizeof(*plan));
    ParamLayout pl;
    param_layout_init(&pl, c);
    for (int l = 0; l < c->num_layers; l++) {
        const LayerSpec *ls = &c->layer[l];
        if (!sd_layer(ls) || linear_layer(ls)) continue; /* sd: S-D with softmax */
        const int d = ls->head_size;
        int m = planes;
        if (rank90) {
            m = 1;
            const size_t npack = (size_t)d * (d - 1) / 2;
            double *S = (double *)xmalloc(sizeof(double) * (size_t)d * d), *sv = (double *)xmalloc(sizeof(double) * (size_t)d);
            for (int k = 0; k < ls->n_head; k++) {
                spec_skew_unpack(params + param_offset(&pl, P_SDSKEW, l) + (size_t)k * npack, d, S);
                spec_singular_values(S, d, d, sv);
                RankStats rs = spec_rank_stats(sv, d, 0.0);
                if (rs.n90 > m) m = rs.n90;
            }
            free(S);
            free(sv);
        }
        if (m > d / 2) m = d / 2;
        if (m < 1) m = 1;
        int r = 2 * m;
        if (round8) r = surg_round8(r);
        plan->planes[l] = m;
        if (r >= d) continue;
        plan->new_d[l] = r;
        plan->n_changed++;
    }
}

typedef struct {
    double routing_kept[LLMC_MAX_LAYERS]; /* mean over the layer's heads */
    double value_kept[LLMC_MAX_LAYERS];
} ShrinkReport;

/* Applies the plan; *op is allocated here. */
static inline void surg_shrink(const GPT2Config *ic, const float *ip, const ShrinkPlan *plan,
                               GPT2Config *oc, float **op, ShrinkReport *rep) {
    *oc = *ic;
    unsigned skip[LLMC_MAX_LAYERS] = {0};
    const unsigned attn = (1u << P_QKVW) | (1u << P_QKVB) | (1u << P_ATTPROJW) | (1u << P_SDSKEW) | (1u << P_SDTHETA);
    memset(rep, 0, sizeof(*rep));
    for (int l = 0; l < ic->num_layers; l++) {
        rep->routing_kept[l] = rep->value_kept[l] = 1.0;
        if (plan->new_d[l] == 0) continue;
        oc->layer[l].head_size = plan->new_d[l];
        skip[l] = attn;
    }
    ParamLayout il, ol;
    param_layout_init(&il, ic);
    param_layout_init(&ol, oc);
    *op = (float *)xcalloc(ol.total, sizeof(float));
    surg_copy_slots(ic, ip, oc, *op, skip);
    const int C = ic->channels;
    double *bias = (double *)xmalloc(sizeof(double) * (size_t)C);
    for (int l = 0; l < ic->num_layers; l++) {
        if (plan->new_d[l] == 0) continue;
        const int h = ic->layer[l].n_head, d = ic->layer[l].head_size, r = plan->new_d[l];
        const int A = h * d, An = h * r;
        LayerParams pi = layer_params((float *)ip, &il, l), po = layer_params(*op, &ol, l);
        const int tn_in = sd_opt_scalar_d(ic) ? 1 : d, tn_out = sd_opt_scalar_d(ic) ? 1 : r;
        memset(bias, 0, sizeof(double) * (size_t)C);
        rep->routing_kept[l] = rep->value_kept[l] = 0.0;
        for (int k = 0; k < h; k++) {
            ShrinkHeadIn hi = {C, d, pi.qkvw + (size_t)k * d * C, pi.qkvb + (size_t)k * d,
                               pi.qkvw + (size_t)(A + k * d) * C, pi.qkvb + A + k * d, pi.attprojw, A,
                               k * d, pi.slot[P_SDSKEW] + (size_t)k * d * (d - 1) / 2,
                               pi.slot[P_SDTHETA] + (size_t)k * tn_in, sd_opt_scalar_d(ic)};
            ShrinkHeadOut ho = {po.qkvw + (size_t)k * r * C, po.qkvb + (size_t)k * r,
                                po.qkvw + (size_t)(An + k * r) * C, po.qkvb + An + k * r, po.attprojw, An,
                                k * r, po.slot[P_SDSKEW] + (size_t)k * r * (r - 1) / 2, po.slot[P_SDTHETA] + (size_t)k * tn_out,
                                bias, 0.0, 0.0};
            surg_shrink_head(&hi, r, sqrt((double)r / d), &ho);
            rep->routing_kept[l] += ho.routing_kept / h;
            rep->value_kept[l] += ho.value_kept / h;
        }
        for (int c = 0; c < C; c++) po.attprojb[c] = (float)(pi.attprojb[c] + bias[c]);
    }
    free(bias);
}

#endif /* SD_ATTENTION_SURGERY_H */
