/*
 * test/test_attn_stats.c: prism/attn_stats.h on attention patterns with known answers
 * (doc/attention_distance.md "Definitions": its test patterns), for T = 1, 2, 7, 64 and 257 (not a multiple of the row block).
 *
 * Closed forms (derived by hand for T tokens, rows i = 0..T-1, H_n = sum_{k=1}^{n} 1/k):
 *
 *   pattern            D          D_norm         sink      D_nosink      median           entropy         entropy_norm
 *   uniform causal     (T-1)/4    (T-1)/(2T)     H_T/T     (T-2)/4       mean floor(i/2)  ln(T!)/T        1
 *   self only          0          0              1/T       0             0                0               0
 *   token 0 only       (T-1)/2    (T-1)/T        1         undefined     (T-1)/2          0               0
 *   previous token     (T-1)/T    H_{T-1}/T      2/T       1             (T-1)/T          0               0
 *
 * (uniform D_nosink: row i >= 1 puts 1/(i+1) on each of j = 1..i, so the renormalized distance is
 * (i-1)/2, averaged over i = 1..T-1. Previous token: row 1 has no non-sink mass and is left out;
 * rows 2..T-1 give 1. Its sink is row 0 (self = token 0) and row 1; for T = 1 only row 0, so 1.
 * Self only: rows i >= 1 have their mass on j = i >= 1, distance 0. For T = 1 the quantities
 * defined only for i >= 1 are NaN.)
 *
 * Tolerance: 1e-6 relative (absolute below 1): probabilities such as 1/(i+1) are stored as float,
 * ~6e-8 relative error each, summed in double. Negative controls show the tolerance can fail: the
 * uniform D against T/4 instead of (T-1)/4, and one row of the uniform pattern moved by one token.
 * Then the layer accumulator: several heads with different patterns in one (B, h, T, T) buffer with
 * garbage (NaN) above the diagonal, checked per head, and bit-identical for 1 and 2 threads and
 * for one batch of 3 sequences vs three batches of one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../prism/attn_stats.h"
#include "harness.h"
#include "../kinds/registry.h"

typedef enum { PAT_UNIFORM, PAT_SELF, PAT_TOKEN0, PAT_PREV, NUM_PATTERNS } Pattern;
static const char *const PATTERN_NAMES[NUM_PATTERNS] = {"uniform", "self", "token0", "previous"};

/* Row i of a pattern into row[0..T-1]; entries j > i get NaN (the model leaves them unset). */
static void fill_row(Pattern p, int i, int T, float *row) {
    for (int j = 0; j < T; j++) row[j] = j > i ? NAN : 0.0f;
    switch (p) {
    case PAT_UNIFORM:
        for (int j = 0; j <= i; j++) row[j] = 1.0f / (float)(i + 1);
        break;
    case PAT_SELF: row[i] = 1.0f; break;
    case PAT_TOKEN0: row[0] = 1.0f; break;
    case PAT_PREV: row[i > 0 ? i - 1 : 0] = 1.0f; break;
    default: break;
    }
}

static void fill_matrix(Pattern p, int T, float *mat) {
    for (int i = 0; i < T; i++) fill_row(p, i, T, mat + (size_t)i * T);
}

static double harmonic(int n) {
    double h = 0.0;
    for (int k = 1; k <= n; k++) h += 1.0 / k;
    return h;
}

/* The closed forms of the table above. */
static void expected(Pattern p, int T, double e[ATTN_NUM_STATS]) {
    const double t = T;
    double log_fact = 0.0, mean_half = 0.0;
    for (int i = 0; i < T; i++) {
        log_fact += log((double)i + 1.0);
        mean_half += (double)(i / 2);
    }
    mean_half /= t;
    switch (p) {
    case PAT_UNIFORM:
        e[ATTN_STAT_D] = (t - 1) / 4;
        e[ATTN_STAT_D_NORM] = (t - 1) / (2 * t);
        e[ATTN_STAT_SINK] = harmonic(T) / t;
        e[ATTN_STAT_D_NOSINK] = T > 1 ? (t - 2) / 4 : NAN;
        e[ATTN_STAT_MEDIAN] = mean_half;
        e[ATTN_STAT_ENTROPY] = log_fact / t;
        e[ATTN_STAT_ENTROPY_NORM] = T > 1 ? 1.0 : NAN;
        break;
    case PAT_SELF:
        e[ATTN_STAT_D] = e[ATTN_STAT_D_NORM] = e[ATTN_STAT_MEDIAN] = e[ATTN_STAT_ENTROPY] = 0.0;
        e[ATTN_STAT_SINK] = 1.0 / t;
        e[ATTN_STAT_D_NOSINK] = T > 1 ? 0.0 : NAN;
        e[ATTN_STAT_ENTROPY_NORM] = T > 1 ? 0.0 : NAN;
        break;
    case PAT_TOKEN0:
        e[ATTN_STAT_D] = (t - 1) / 2;
        e[ATTN_STAT_D_NORM] = (t - 1) / t;
        e[ATTN_STAT_SINK] = 1.0;
        e[ATTN_STAT_D_NOSINK] = NAN;
        e[ATTN_STAT_MEDIAN] = (t - 1) / 2;
        e[ATTN_STAT_ENTROPY] = 0.0;
        e[ATTN_STAT_ENTROPY_NORM] = T > 1 ? 0.0 : NAN;
        break;
    case PAT_PREV:
        e[ATTN_STAT_D] = (t - 1) / t;
        e[ATTN_STAT_D_NORM] = harmonic(T - 1) / t;
        e[ATTN_STAT_SINK] = T > 1 ? 2.0 / t : 1.0;
        e[ATTN_STAT_D_NOSINK] = T > 2 ? 1.0 : NAN;
        e[ATTN_STAT_MEDIAN] = (t - 1) / t;
        e[ATTN_STAT_ENTROPY] = 0.0;
        e[ATTN_STAT_ENTROPY_NORM] = T > 1 ? 0.0 : NAN;
        break;
    default: break;
    }
}

#define TOL 1e-6
static int close_to(double got, double want) {
    if (isnan(want)) return isnan(got);
    return fabs(got - want) <= TOL * fmax(1.0, fabs(want));
}

static void stats_of_matrix(const float *mat, int T, double out[ATTN_NUM_STATS]) {
    AttnSums s;
    attn_sums_zero(&s);
    attn_sums_add_rows(&s, mat, (size_t)T, 0, T);
    attn_sums_mean(&s, out);
}

static void test_patterns(void) {
    const int Ts[] = {1, 2, 7, 64, 257};
    for (size_t ti = 0; ti < sizeof(Ts) / sizeof(Ts[0]); ti++) {
        const int T = Ts[ti];
        float *mat = (float *)xmalloc((size_t)T * T * sizeof(float));
        for (int p = 0; p < NUM_PATTERNS; p++) {
            fill_matrix((Pattern)p, T, mat);
            double got[ATTN_NUM_STATS], want[ATTN_NUM_STATS];
            stats_of_matrix(mat, T, got);
            expected((Pattern)p, T, want);
            int bad = -1;
            for (int s = 0; s < ATTN_NUM_STATS; s++)
                if (!close_to(got[s], want[s]) && bad < 0) bad = s;
            CHECK(bad < 0, "%-8s T %3d: D %.6f D_norm %.6f sink %.6f D_nosink %.6f median %.6f "
                  "H %.6f H_norm %.6f%s%s", PATTERN_NAMES[p], T, got[0], got[1], got[2], got[3],
                  got[4], got[5], got[6], bad >= 0 ? " -- wrong: " : "",
                  bad >= 0 ? ATTN_STAT_NAMES[bad] : "");
        }
        free(mat);
    }
}

/* The tolerance can fail: off-by-one closed form, and a pattern changed in one row. */
static void test_negative_controls(void) {
    const int T = 64;
    float *mat = (float *)xmalloc((size_t)T * T * sizeof(float));
    fill_matrix(PAT_UNIFORM, T, mat);
    double got[ATTN_NUM_STATS], want[ATTN_NUM_STATS];
    stats_of_matrix(mat, T, got);
    CHECK(!close_to(got[ATTN_STAT_D], T / 4.0),
          "negative control: uniform D %.6f is not T/4 = %.6f", got[ATTN_STAT_D], T / 4.0);
    /* row 40: all mass one token back instead of uniform: D changes by (1 - 20)/64 */
    fill_row(PAT_PREV, 40, T, mat + (size_t)40 * T);
    stats_of_matrix(mat, T, got);
    expected(PAT_UNIFORM, T, want);
    int differs = 0;
    for (int s = 0; s < ATTN_NUM_STATS; s++) differs += !close_to(got[s], want[s]);
    CHECK(differs == ATTN_NUM_STATS,
          "negative control: one changed row moves all %d quantities past the tolerance (%d did)",
          ATTN_NUM_STATS, differs);
    free(mat);
}

/* The median rule at exactly half: a row with 1/2 on the diagonal and 1/2 one token back has
 * median 0 (the diagonal alone reaches 1/2); with 0.4999 on the diagonal it is 1. */
static void test_median_rule(void) {
    float row[3] = {0.0f, 0.5f, 0.5f};
    double v[ATTN_NUM_STATS];
    int valid[ATTN_NUM_STATS];
    attn_row_stats(row, 2, v, valid);
    CHECK(v[ATTN_STAT_MEDIAN] == 0.0, "median of (0, 1/2, 1/2) at i = 2 is 0 (got %g)", v[ATTN_STAT_MEDIAN]);
    float row2[3] = {0.0f, 0.5001f, 0.4999f};
    attn_row_stats(row2, 2, v, valid);
    CHECK(v[ATTN_STAT_MEDIAN] == 1.0, "median of (0, .5001, .4999) at i = 2 is 1 (got %g)", v[ATTN_STAT_MEDIAN]);
    CHECK(valid[ATTN_STAT_D_NOSINK] && fabs(v[ATTN_STAT_D_NOSINK] - 0.5001) < 1e-6,
          "D_nosink of (0, .5001, .4999) = 0.5001 (got %.6f)", v[ATTN_STAT_D_NOSINK]);
}

static void test_kinds(void) {
    CHECK(attn_kind_has_matrix(ATTN_MHA) && attn_kind_has_matrix(ATTN_SD) &&
              !attn_kind_has_matrix(ATTN_LIN) && !attn_kind_has_matrix(ATTN_SDLIN),
          "attention matrices: mha and sd have one, lin and sdlin do not");
}

/* (B, h, T, T) with head k = pattern k, sequences alike; NaN above the diagonal. */
static float *layer_buffer(int B, int h, int T) {
    float *att = (float *)xmalloc((size_t)B * h * T * T * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int k = 0; k < h; k++) fill_matrix((Pattern)(k % NUM_PATTERNS), T, att + ((size_t)b * h + k) * T * T);
    return att;
}

static void accumulate(const float *att, int B, int h, int T, int batches, AttnSums *heads) {
    for (int k = 0; k < h; k++) attn_sums_zero(&heads[k]);
    const int per = B / batches;
    for (int i = 0; i < batches; i++) {
        attn_layer_accumulate(att + (size_t)i * per * h * T * T, per, h, T, heads);
    }
}

static void test_layer(void) {
    const int B = 3, h = 4, T = 100;
    float *att = layer_buffer(B, h, T);
    AttnSums one[4], two[4], split[4];
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    accumulate(att, B, h, T, 1, one);
#ifdef _OPENMP
    omp_set_num_threads(2);
#endif
    accumulate(att, B, h, T, 1, two);
    accumulate(att, B, h, T, 3, split);
    double mean[4][ATTN_NUM_STATS];
    for (int k = 0; k < h; k++) {
        double want[ATTN_NUM_STATS];
        attn_sums_mean(&two[k], mean[k]);
        expected((Pattern)k, T, want);
        int ok = two[k].rows[ATTN_STAT_D] == (long long)B * T;
        for (int s = 0; s < ATTN_NUM_STATS; s++) ok &= close_to(mean[k][s], want[s]);
        CHECK(ok, "layer of %d sequences: head %d (%s) over %lld rows matches its closed form "
              "(D %.6f)", B, k, PATTERN_NAMES[k], two[k].rows[ATTN_STAT_D], mean[k][ATTN_STAT_D]);
    }
    CHECK(memcmp(one, two, sizeof(one)) == 0, "layer sums bit-identical for 1 and 2 threads");
    CHECK(memcmp(split, two, sizeof(two)) == 0,
          "layer sums bit-identical for 1 batch of 3 sequences and 3 batches of 1");
    double layer[ATTN_NUM_STATS], want_d = 0.0;
    attn_head_mean((const double(*)[ATTN_NUM_STATS])mean, h, layer);
    for (int k = 0; k < h; k++) {
        double w[ATTN_NUM_STATS];
        expected((Pattern)k, T, w);
        want_d += w[ATTN_STAT_D] / h;
    }
    CHECK(close_to(layer[ATTN_STAT_D], want_d), "layer D_l = head mean %.6f (want %.6f)",
          layer[ATTN_STAT_D], want_d);
    /* D_nosink is NaN for the token-0 head: the layer mean uses the other three */
    double want_ns = ((T - 2) / 4.0 + 0.0 + 1.0) / 3.0;
    CHECK(close_to(layer[ATTN_STAT_D_NOSINK], want_ns),
          "layer D_nosink leaves out the undefined head: %.6f (want %.6f)",
          layer[ATTN_STAT_D_NOSINK], want_ns);
    free(att);
}

int main(void) {
    test_patterns();
    test_negative_controls();
    test_median_rule();
    test_kinds();
    test_layer();
    return test_finish();
}
