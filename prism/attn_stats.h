/*
 * prism/attn_stats.h: attention-distance statistics of causal attention probabilities
 * (the Prism paper's attention-distance claims, arXiv 2606.27449, measured as doc/attention_distance.md "Definitions"
 * defines it), as pure functions of probability arrays. `attn_distance` applies them to the
 * CPU model's m.acts.att[l]; test/test_attn_stats.c checks them on patterns with known answers.
 *
 * Defines:
 *   AttnStat, ATTN_STAT_NAMES   the seven per-row quantities, in the order of every report
 *   attn_row_stats              the quantities of one row A_{i,0..i}
 *   AttnSums                    running sums (and row counts) of those quantities
 *   attn_sums_zero / _add_rows / _merge / _mean
 *   attn_layer_accumulate       all heads of one layer's (B, h, T, T) probabilities, in parallel
 *                               and deterministically (bit-identical for any thread count)
 *   attn_kind_has_matrix        which attention kinds form an attention matrix at all
 *
 * Definitions, for row i (query position, 0-based) with probabilities A_ij, j = 0..i:
 *   D         sum_j A_ij (i - j)                       distance in tokens (ViT's "mean attention
 *                                                      distance" made causal)
 *   D_norm    D / max(i, 1)                            position-normalized, in [0, 1]
 *   sink      A_i0                                     mass on the first token
 *   D_nosink  sum_{j>=1} A_ij (i - j) / sum_{j>=1} A_ij   D without the sink, renormalized;
 *                                                      defined for i >= 1 with non-sink mass > 0
 *   median    smallest delta with sum_{j=i-delta}^{i} A_ij >= 1/2
 *   entropy   -sum_j A_ij ln A_ij                      (0 ln 0 = 0), in nats
 *   entropy_norm  entropy / ln(i + 1)                  1 for uniform rows; defined for i >= 1
 * A head's value is the mean of the row values over all rows (i = 0..T-1) of all sequences where
 * the row value is defined (doc/attention_distance.md "Definitions": (1/N) sum_b (1/T) sum_i, since every sequence has T
 * rows). A head whose rows are all undefined for a quantity (e.g. D_nosink when every row puts all
 * its mass on token 0) gets NaN. Only entries j <= i are read: the CPU model leaves j > i unset.
 *
 * Accumulation is in double. The median compares against 1/2 - ATTN_MEDIAN_SLACK so that a row
 * whose cumulative mass is exactly 1/2 in exact arithmetic (uniform rows of even length) is not
 * pushed one token further by the rounding of float probabilities.
 */
#ifndef PRISM_ATTN_STATS_H
#define PRISM_ATTN_STATS_H

#include <math.h>
#include <stddef.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../llmc/config.h"
#include "../llmc/layer_kind.h"
#include "../llmc/utils.h"

typedef enum {
    ATTN_STAT_D = 0,
    ATTN_STAT_D_NORM,
    ATTN_STAT_SINK,
    ATTN_STAT_D_NOSINK,
    ATTN_STAT_MEDIAN,
    ATTN_STAT_ENTROPY,
    ATTN_STAT_ENTROPY_NORM,
    ATTN_NUM_STATS
} AttnStat;

/* Column names of the CSV/JSON reports (doc/attention_distance.md). */
static const char *const ATTN_STAT_NAMES[ATTN_NUM_STATS] = {
    "D", "D_norm", "sink", "D_nosink", "median", "entropy", "entropy_norm"};

#define ATTN_MEDIAN_SLACK 1e-6
/* Rows per work item of attn_layer_accumulate: the unit of parallel work and of the fixed
 * summation order. */
#define ATTN_ROW_BLOCK 32

/* Softmax kinds form an attention matrix; S-D attention is a softmax too (doc/methods.md "Formulation A"), so
 * it has one. Linear attention (lin, sdlin; doc/methods.md "ELU+1 causal linear attention") never forms A. */
static inline int attn_kind_has_matrix(int kind) { return layer_kind_of(kind)->mix->softmax; }

/* The quantities of row i: row[0..i] are A_{i,0..i}. valid[s] is 0 where the quantity is not
 * defined for this row (then v[s] is 0). */
static inline void attn_row_stats(const float *row, int i, double v[ATTN_NUM_STATS],
                                  int valid[ATTN_NUM_STATS]) {
    double dist = 0.0, nosink_mass = 0.0, nosink_dist = 0.0, entropy = 0.0;
    for (int j = 0; j <= i; j++) {
        const double p = (double)row[j];
        dist += p * (double)(i - j);
        if (j >= 1) {
            nosink_mass += p;
            nosink_dist += p * (double)(i - j);
        }
        /* logf: ~1 ulp, and the row sum is in double; log() would double the tool's run time */
        if (row[j] > 0.0f) entropy -= p * (double)logf(row[j]);
    }
    /* median: walk back from the diagonal until half the mass is covered */
    int median = i;
    double cum = 0.0;
    for (int j = i; j >= 0; j--) {
        cum += (double)row[j];
        if (cum >= 0.5 - ATTN_MEDIAN_SLACK) {
            median = i - j;
            break;
        }
    }
    for (int s = 0; s < ATTN_NUM_STATS; s++) valid[s] = 1;
    v[ATTN_STAT_D] = dist;
    v[ATTN_STAT_D_NORM] = dist / (double)(i > 1 ? i : 1);
    v[ATTN_STAT_SINK] = (double)row[0];
    valid[ATTN_STAT_D_NOSINK] = i >= 1 && nosink_mass > 0.0;
    v[ATTN_STAT_D_NOSINK] = valid[ATTN_STAT_D_NOSINK] ? nosink_dist / nosink_mass : 0.0;
    v[ATTN_STAT_MEDIAN] = (double)median;
    /* -p ln p >= 0; a float p a hair above 1 would give a tiny negative (or a -0) */
    if (!(entropy > 0.0)) entropy = 0.0;
    v[ATTN_STAT_ENTROPY] = entropy;
    valid[ATTN_STAT_ENTROPY_NORM] = i >= 1;
    v[ATTN_STAT_ENTROPY_NORM] = i >= 1 ? entropy / log((double)i + 1.0) : 0.0;
}

/* Sums of the row values and the number of rows where each is defined. */
typedef struct {
    double sum[ATTN_NUM_STATS];
    long long rows[ATTN_NUM_STATS];
} AttnSums;

static inline void attn_sums_zero(AttnSums *s) { memset(s, 0, sizeof(*s)); }

/* Adds rows lo..hi-1 of one causal matrix whose row i starts at mat + i * ld. */
static inline void attn_sums_add_rows(AttnSums *s, const float *mat, size_t ld, int lo, int hi) {
    double v[ATTN_NUM_STATS];
    int valid[ATTN_NUM_STATS];
    for (int i = lo; i < hi; i++) {
        attn_row_stats(mat + (size_t)i * ld, i, v, valid);
        for (int k = 0; k < ATTN_NUM_STATS; k++) {
            if (!valid[k]) continue;
            s->sum[k] += v[k];
            s->rows[k]++;
        }
    }
}

static inline void attn_sums_merge(AttnSums *dst, const AttnSums *src) {
    for (int k = 0; k < ATTN_NUM_STATS; k++) {
        dst->sum[k] += src->sum[k];
        dst->rows[k] += src->rows[k];
    }
}

/* Means over the rows counted; NaN for a quantity with no defined row. */
static inline void attn_sums_mean(const AttnSums *s, double out[ATTN_NUM_STATS]) {
    for (int k = 0; k < ATTN_NUM_STATS; k++) {
        out[k] = s->rows[k] > 0 ? s->sum[k] / (double)s->rows[k] : NAN;
    }
}

/*
 * Adds every row of att (B, h, T, T), the layout of the CPU model's m.acts.att[l], into heads[k]
 * for k = 0..h-1. Work items (sequence, head, block of ATTN_ROW_BLOCK rows) run in parallel, each
 * into its own partial sum; the partials are then merged serially in the order sequence, block.
 * The result therefore does not depend on the thread count, and calling this once per batch in
 * batch order gives the same bits for any split of the sequences into batches.
 */
static inline void attn_layer_accumulate(const float *att, int B, int h, int T, AttnSums *heads) {
    const int nblk = (T + ATTN_ROW_BLOCK - 1) / ATTN_ROW_BLOCK;
    const long long nitems = (long long)B * h * nblk;
    AttnSums *part = (AttnSums *)xmalloc((size_t)nitems * sizeof(AttnSums));
    /* dynamic: later row blocks hold more of the causal triangle */
#pragma omp parallel for schedule(dynamic, 1)
    for (long long it = 0; it < nitems; it++) {
        const int blk = (int)(it % nblk);
        const long long bk = it / nblk; /* = b * h + k */
        const float *mat = att + (size_t)bk * T * T;
        const int lo = blk * ATTN_ROW_BLOCK;
        const int hi = lo + ATTN_ROW_BLOCK < T ? lo + ATTN_ROW_BLOCK : T;
        attn_sums_zero(&part[it]);
        attn_sums_add_rows(&part[it], mat, (size_t)T, lo, hi);
    }
    for (int b = 0; b < B; b++)
        for (int k = 0; k < h; k++)
            for (int blk = 0; blk < nblk; blk++)
                attn_sums_merge(&heads[k], &part[((long long)b * h + k) * nblk + blk]);
    free(part);
}

/* The layer value of doc/attention_distance.md "Definitions": D_l = (1/h_l) sum_h D_{l,h}, the plain head mean (heads of a
 * layer have equal width). Heads where a quantity is NaN are left out of its mean; NaN if all are. */
static inline void attn_head_mean(const double (*head_means)[ATTN_NUM_STATS], int h,
                                  double out[ATTN_NUM_STATS]) {
    for (int s = 0; s < ATTN_NUM_STATS; s++) {
        double sum = 0.0;
        int n = 0;
        for (int k = 0; k < h; k++) {
            if (isnan(head_means[k][s])) continue;
            sum += head_means[k][s];
            n++;
        }
        out[s] = n > 0 ? sum / n : NAN;
    }
}

#endif /* PRISM_ATTN_STATS_H */
